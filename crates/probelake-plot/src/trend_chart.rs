//! Drawing a [`Trend`]: a title, one panel per statistic (value over training step, one line
//! per run), non-finite points marked at the top of their panel, one legend on the right.

use plotters::backend::DrawingBackend;
use plotters::chart::ChartBuilder;
use plotters::coord::ranged1d::{IntoSegmentedCoord, SegmentValue};
use plotters::coord::Shift;
use plotters::drawing::DrawingArea;
use plotters::element::{Circle, Cross, PathElement};
use plotters::series::{DashedLineSeries, LineSeries};
use plotters::style::{Color, IntoFont, RGBColor, ShapeStyle, TextStyle, BLACK};

use crate::error::{PlotError, Result};
use crate::figure::Chart;
use crate::font::FAMILY;
use crate::header::Header;
use crate::palette;
use crate::stat::Stat;
use crate::trend::{Subject, Trend, TrendSeries, Value};

const PANEL_HEIGHT: u32 = 330;
const PANEL_WIDTH: u32 = 760;
const GREY: RGBColor = RGBColor(0x55, 0x55, 0x55);

/// A trend, checked and laid out for drawing.
pub(crate) struct TrendChart<'a> {
    trend: &'a Trend,
    /// Per panel: the value range drawn (after the log transform, when asked).
    ranges: Vec<(f64, f64)>,
    columns: u32,
    legend_width: u32,
    header: Header,
}

impl<'a> TrendChart<'a> {
    pub(crate) fn new(trend: &'a Trend) -> Result<Self> {
        let mut ranges = Vec::new();
        for &stat in &trend.query.stats {
            ranges.push(value_range(trend, stat)?);
        }
        let columns = if trend.query.stats.len() > 2 { 2 } else { 1 };
        let longest = trend.series.iter().map(|s| s.label().chars().count()).max().unwrap_or(0).max(22);
        let legend_width = (longest as u32 * 8 + 60).min(420);
        let mut chart =
            TrendChart { trend, ranges, columns, legend_width, header: Header::new(String::new(), &[], 0)? };
        chart.header = Header::new(chart.title(), &chart.subtitle(), chart.size().0 - 32)?;
        Ok(chart)
    }

    fn rows(&self) -> u32 {
        (self.trend.query.stats.len() as u32).div_ceil(self.columns)
    }

    fn title(&self) -> String {
        let stats: Vec<&str> = self.trend.query.stats.iter().map(|s| s.column()).collect();
        format!("{}: {} across training steps", self.trend.query.subject.name(), stats.join(", "))
    }

    fn subtitle(&self) -> Vec<String> {
        let q = &self.trend.query;
        let what = match &q.subject {
            Subject::Op(_) => "first forward output of every call, combined per step",
            Subject::Item(_) => "one leaf",
        };
        let stage = match (&q.stage, self.trend.series.iter().any(|s| s.stage.is_some())) {
            (Some(stage), _) => format!("stage {stage}"),
            (None, true) => "every stage, one line each".to_string(),
            (None, false) => "every stage".to_string(),
        };
        let rank = q.rank.map_or("ranks combined".to_string(), |r| format!("rank {r}"));
        let mut parts = vec![what.to_string(), stage, rank];
        if q.log_y {
            parts.push("log scale".into());
        }
        if !self.trend.empty_runs.is_empty() {
            parts.push(format!("nothing in {}", self.trend.empty_runs.join(", ")));
        }
        parts
    }
}

impl Chart for TrendChart<'_> {
    fn size(&self) -> (u32, u32) {
        (PANEL_WIDTH * self.columns + self.legend_width, self.header.height() as u32 + PANEL_HEIGHT * self.rows())
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        self.header.draw(root)?;
        let (_, body) = root.split_vertically(self.header.height());
        let (panels, legend) = body.split_horizontally(PANEL_WIDTH * self.columns);
        let areas = panels.split_evenly((self.rows() as usize, self.columns as usize));
        for ((area, &stat), &range) in areas.iter().zip(&self.trend.query.stats).zip(&self.ranges) {
            self.draw_panel(area, stat, range)?;
        }
        self.draw_legend(&legend)
    }
}

impl TrendChart<'_> {
    fn draw_panel<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        stat: Stat,
        (lo, hi): (f64, f64),
    ) -> Result<()> {
        let steps = self.trend.steps();
        let (Some(&first), Some(&last)) = (steps.first(), steps.last()) else { return Ok(()) };
        let log = self.trend.query.log_y;
        // Room above the data for the marks of non-finite values.
        let marks_at = hi + (hi - lo) * 0.08;
        let top = hi + (hi - lo) * 0.14;
        let mut chart = ChartBuilder::on(area)
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(86)
            .build_cartesian_2d((first..last).into_segmented(), lo..top)?;
        let y_format = |v: &f64| if log { short(10f64.powf(*v)) } else { short(*v) };
        let x_format = |v: &SegmentValue<i64>| match v {
            SegmentValue::CenterOf(s) | SegmentValue::Exact(s) => s.to_string(),
            SegmentValue::Last => String::new(),
        };
        chart
            .configure_mesh()
            .x_desc("training step")
            .y_desc(stat.axis_label())
            .x_labels(steps.len().clamp(2, 12))
            .y_labels(6)
            .x_label_formatter(&x_format)
            .y_label_formatter(&y_format)
            .axis_desc_style((FAMILY, 14))
            .label_style((FAMILY, 12))
            .light_line_style(BLACK.mix(0.04))
            .bold_line_style(BLACK.mix(0.12))
            .draw()?;
        for (i, series) in self.trend.series.iter().enumerate() {
            let color = palette::line(i);
            let style = ShapeStyle::from(&color).stroke_width(2);
            let dashed = self.dashed(series);
            let mut run: Vec<(SegmentValue<i64>, f64)> = Vec::new();
            let mut runs = Vec::new();
            for p in &series.points {
                match p.values[stat.index()] {
                    Value::Finite(v) => run.push((SegmentValue::CenterOf(p.step), if log { v.log10() } else { v })),
                    Value::NonFinite => {
                        runs.push(std::mem::take(&mut run));
                        chart.draw_series(std::iter::once(Cross::new(
                            (SegmentValue::CenterOf(p.step), marks_at),
                            7,
                            style,
                        )))?;
                    }
                    Value::Missing => runs.push(std::mem::take(&mut run)),
                }
            }
            runs.push(run);
            for points in runs.into_iter().filter(|r| !r.is_empty()) {
                if dashed {
                    chart.draw_series(DashedLineSeries::new(points.clone(), 9, 5, style))?;
                } else {
                    chart.draw_series(LineSeries::new(points.clone(), style))?;
                }
                chart.draw_series(points.into_iter().map(|p| Circle::new(p, 3, color.filled())))?;
            }
        }
        Ok(())
    }

    /// Lines of every run but the first are dashed, so that where runs agree both still show.
    fn dashed(&self, series: &TrendSeries) -> bool {
        self.trend.series.first().is_some_and(|first| first.run != series.run)
    }

    fn draw_legend<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<()> {
        let font: TextStyle = (FAMILY, 14).into_font().color(&BLACK);
        area.draw_text("runs", &(FAMILY, 14).into_font().color(&GREY), (12, 16))?;
        let mut y = 44;
        for (i, series) in self.trend.series.iter().enumerate() {
            let style = ShapeStyle::from(&palette::line(i)).stroke_width(3);
            if self.dashed(series) {
                area.draw(&PathElement::new(vec![(10, y), (19, y)], style))?;
                area.draw(&PathElement::new(vec![(33, y), (42, y)], style))?;
            } else {
                area.draw(&PathElement::new(vec![(10, y), (42, y)], style))?;
            }
            area.draw(&Circle::new((26, y), 3, palette::line(i).filled()))?;
            area.draw_text(&series.label(), &font, (48, y - 8))?;
            y += 24;
        }
        y += 8;
        area.draw(&Cross::new((26, y), 7, ShapeStyle::from(&BLACK).stroke_width(2)))?;
        area.draw_text("NaN or ±inf", &font, (48, y - 8))?;
        area.draw_text("(marked above the data)", &(FAMILY, 12).into_font().color(&GREY), (48, y + 10))?;
        Ok(())
    }
}

/// The range of finite values of `stat` over every line (log10 of them with a log axis),
/// padded; a flat or empty range gets a sensible width.
fn value_range(trend: &Trend, stat: Stat) -> Result<(f64, f64)> {
    let mut values = Vec::new();
    for p in trend.series.iter().flat_map(|s| &s.points) {
        if let Value::Finite(v) = p.values[stat.index()] {
            if trend.query.log_y {
                if v <= 0.0 {
                    return Err(PlotError::Option(format!(
                        "a log scale needs positive values, and {stat} is {v} at step {}; drop --log-y",
                        p.step
                    )));
                }
                values.push(v.log10());
            } else {
                values.push(v);
            }
        }
    }
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if values.is_empty() {
        return Ok((0.0, 1.0));
    }
    let span = hi - lo;
    let pad = if span > 0.0 {
        span * 0.06
    } else if hi != 0.0 {
        hi.abs() * 0.1
    } else {
        1.0
    };
    Ok((lo - pad, hi + pad))
}

/// A tick label: at most 4 significant digits, scientific outside [1e-3, 1e5).
pub(crate) fn short(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let a = v.abs();
    if !(1e-3..1e5).contains(&a) {
        let text = format!("{v:.2e}");
        return match text.split_once('e') {
            Some((mantissa, exp)) if mantissa.contains('.') => {
                format!("{}e{exp}", mantissa.trim_end_matches('0').trim_end_matches('.'))
            }
            _ => text,
        };
    }
    let decimals = (3 - a.log10().floor() as i32).clamp(0, 6) as usize;
    let text = format!("{v:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trend::{TrendPoint, TrendQuery, TrendSeries};

    fn trend(values: &[(i64, Value)], log_y: bool) -> Trend {
        let points = values.iter().map(|&(step, v)| TrendPoint { step, values: [v, v, v, v], leaves: 1 }).collect();
        Trend {
            query: TrendQuery { log_y, ..TrendQuery::op("Functional.linear") },
            series: vec![TrendSeries { run: "base".into(), stage: None, points }],
            empty_runs: vec!["other".into()],
        }
    }

    #[test]
    fn ranges_leave_out_non_finite_values_and_refuse_a_log_of_negatives() {
        let t = trend(&[(1, Value::Finite(2.0)), (2, Value::NonFinite), (3, Value::Finite(4.0))], false);
        let (lo, hi) = value_range(&t, Stat::Norm).unwrap();
        assert!(lo < 2.0 && hi > 4.0 && hi < 5.0, "{lo}..{hi}");
        assert_eq!(value_range(&trend(&[(1, Value::NonFinite)], false), Stat::Max).unwrap(), (0.0, 1.0));
        let log = trend(&[(1, Value::Finite(10.0)), (2, Value::Finite(1000.0))], true);
        let (lo, hi) = value_range(&log, Stat::Norm).unwrap();
        assert!(lo < 1.0 && hi > 3.0 && hi < 3.5, "{lo}..{hi}");
        let err = value_range(&trend(&[(4, Value::Finite(-1.0))], true), Stat::Mean).unwrap_err();
        assert!(err.to_string().contains("mean is -1 at step 4"), "{err}");
    }

    #[test]
    fn a_trend_with_gaps_and_non_finite_points_draws() {
        let t = trend(
            &[(1, Value::Finite(2.0)), (2, Value::NonFinite), (3, Value::Missing), (4, Value::Finite(1.0))],
            false,
        );
        let figure = t.render().unwrap();
        assert!(figure.svg.contains("nothing in other"), "the subtitle names runs without data");
        assert!(figure.svg.contains("NaN or ±inf"));
        assert!(figure.png.starts_with(b"\x89PNG"));
    }

    #[test]
    fn tick_labels_stay_short() {
        assert_eq!(short(0.0), "0");
        assert_eq!(short(1.5), "1.5");
        assert_eq!(short(12.345678), "12.35");
        assert_eq!(short(-0.0125), "-0.0125");
        assert_eq!(short(250000.0), "2.5e5");
        assert_eq!(short(0.0001), "1e-4");
        assert_eq!(short(0.00001234), "1.23e-5");
    }
}
