//! Drawing a [`Heatmap`]: rows (op calls, in execution order) × columns (steps or ranks), each
//! cell coloured by its relative error on a log scale, a colour bar with decade ticks, and
//! swatches for the cells outside the scale.

use plotters::backend::DrawingBackend;
use plotters::coord::Shift;
use plotters::drawing::DrawingArea;
use plotters::element::Rectangle;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{Color, FontTransform, IntoFont, RGBColor, TextStyle, BLACK, WHITE};

use crate::divergence::{Across, Cell, ErrorOf, Heatmap, RowsBy};
use crate::error::Result;
use crate::figure::Chart;
use crate::font::{ensure_registered, FAMILY};
use crate::header::Header;
use crate::palette;

const ROW_HEIGHT: i32 = 18;
const LABEL_FONT: u32 = 12;
const BAR_WIDTH: i32 = 20;
const BAR_HEIGHT: i32 = 260;
const RIGHT_PANEL: i32 = 220;
const GREY: RGBColor = RGBColor(0x55, 0x55, 0x55);
/// The scale never spans more than this many decades: smaller errors share its bottom colour.
const MAX_DECADES: f64 = 8.0;
/// Row labels longer than this are cut at the front (the call number at the end matters most).
const MAX_LABEL_CHARS: usize = 56;

/// A heatmap laid out for drawing.
pub(crate) struct HeatmapChart<'a> {
    map: &'a Heatmap,
    labels: Vec<String>,
    label_width: i32,
    cell_width: i32,
    /// log10 of the scale's ends.
    scale: (f64, f64),
    header: Header,
}

impl<'a> HeatmapChart<'a> {
    pub(crate) fn new(map: &'a Heatmap) -> Result<Self> {
        ensure_registered()?;
        let labels: Vec<String> = map.rows.iter().map(|r| cut_front(&r.name, MAX_LABEL_CHARS)).collect();
        let font = (FAMILY, LABEL_FONT).into_font();
        let mut label_width = 60;
        for l in &labels {
            let (w, _) = font.box_size(l).map_err(|e| crate::PlotError::Draw(e.to_string()))?;
            label_width = label_width.max(w as i32);
        }
        let cell_width = (640 / map.columns.len().max(1) as i32).clamp(14, 64);
        let mut chart = HeatmapChart {
            map,
            labels,
            label_width: label_width + 12,
            cell_width,
            scale: scale_of(map),
            header: Header::new(String::new(), &[], 0)?,
        };
        chart.header = Header::new(chart.title(), &chart.subtitle(), chart.width() - 32)?;
        Ok(chart)
    }

    fn width(&self) -> u32 {
        (self.grid_left() + self.grid_size().0 + 40 + RIGHT_PANEL).max(760) as u32
    }

    fn grid_left(&self) -> i32 {
        40 + self.label_width
    }

    fn grid_size(&self) -> (i32, i32) {
        (self.cell_width * self.map.columns.len() as i32, ROW_HEIGHT * self.map.rows.len() as i32)
    }

    fn color(&self, cell: Cell) -> RGBColor {
        match cell {
            Cell::Missing => palette::MISSING,
            Cell::NonFinite => palette::NON_FINITE,
            Cell::Uncomparable => palette::UNCOMPARABLE,
            Cell::Rel(x) => {
                let (lo, hi) = self.scale;
                let t = if x > 0.0 { (x.log10().clamp(lo, hi) - lo) / (hi - lo) } else { 0.0 };
                palette::scale(t)
            }
        }
    }

    fn title(&self) -> String {
        format!("Relative error of forward outputs: {} against {}", self.map.query.target, self.map.query.golden)
    }

    fn subtitle(&self) -> Vec<String> {
        let q = &self.map.query;
        let error = match q.error_of {
            ErrorOf::Worst => "largest of max/min/mean/norm errors".to_string(),
            ErrorOf::Stat(s) => format!("{s} error"),
        };
        let rows = match q.rows {
            RowsBy::Call => "op call",
            RowsBy::Op => "op",
        };
        let cols = match q.across {
            Across::Steps => "step",
            Across::Ranks => "rank",
        };
        let mut parts = vec![format!("{error} |t − g| / |g|"), format!("largest per {rows} and {cols}")];
        parts.push(q.stage.as_ref().map_or("every stage".into(), |s| format!("stage {s}")));
        if let Some(step) = q.step {
            parts.push(format!("step {step}"));
        }
        if let Some(rank) = q.rank {
            parts.push(format!("rank {rank}"));
        }
        if self.map.total_rows > self.map.rows.len() {
            parts.push(format!("the {} of {} rows with the largest errors", self.map.rows.len(), self.map.total_rows));
        }
        parts
    }
}

impl Chart for HeatmapChart<'_> {
    fn size(&self) -> (u32, u32) {
        let (_, h) = self.grid_size();
        (self.width(), (self.header.height() + h.max(BAR_HEIGHT + 150) + 70) as u32)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        let text = |size: u32, color: &RGBColor| -> TextStyle<'static> { (FAMILY, size).into_font().color(color) };
        self.header.draw(root)?;
        let (left, top) = (self.grid_left(), self.header.height());
        let (w, h) = self.grid_size();
        for (r, row) in self.map.rows.iter().enumerate() {
            let y = top + r as i32 * ROW_HEIGHT;
            for (c, &cell) in row.cells.iter().enumerate() {
                let x = left + c as i32 * self.cell_width;
                root.draw(&Rectangle::new([(x, y), (x + self.cell_width, y + ROW_HEIGHT)], self.color(cell).filled()))?;
            }
        }
        // Thin white lines between cells keep neighbours apart without hiding small cells.
        for c in 1..self.map.columns.len() as i32 {
            let x = left + c * self.cell_width;
            root.draw(&Rectangle::new([(x, top), (x + 1, top + h)], WHITE.filled()))?;
        }
        root.draw(&Rectangle::new([(left, top), (left + w, top + h)], BLACK.mix(0.5)))?;
        let right_aligned = text(LABEL_FONT, &BLACK).pos(Pos::new(HPos::Right, VPos::Center));
        for (r, label) in self.labels.iter().enumerate() {
            root.draw_text(label, &right_aligned, (left - 6, top + r as i32 * ROW_HEIGHT + ROW_HEIGHT / 2))?;
        }
        let every = (self.map.columns.len() / 24).max(1);
        let centered = text(LABEL_FONT, &BLACK).pos(Pos::new(HPos::Center, VPos::Top));
        for (c, value) in self.map.columns.iter().enumerate().step_by(every) {
            let x = left + c as i32 * self.cell_width + self.cell_width / 2;
            root.draw_text(&value.to_string(), &centered, (x, top + h + 6))?;
        }
        let (x_title, y_title) = match (self.map.query.across, self.map.query.rows) {
            (Across::Steps, RowsBy::Call) => ("training step", "op call (execution order)"),
            (Across::Steps, RowsBy::Op) => ("training step", "op (execution order)"),
            (Across::Ranks, RowsBy::Call) => ("rank", "op call (execution order)"),
            (Across::Ranks, RowsBy::Op) => ("rank", "op (execution order)"),
        };
        let axis = text(14, &BLACK).pos(Pos::new(HPos::Center, VPos::Top));
        root.draw_text(x_title, &axis, (left + w / 2, top + h + 28))?;
        let vertical = text(14, &BLACK).transform(FontTransform::Rotate270).pos(Pos::new(HPos::Center, VPos::Top));
        root.draw_text(y_title, &vertical, (12, top + h / 2))?;
        self.draw_color_bar(root, left + w + 40, top)
    }
}

impl HeatmapChart<'_> {
    fn draw_color_bar<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>, x: i32, top: i32) -> Result<()> {
        let label = (FAMILY, LABEL_FONT).into_font().color(&BLACK);
        root.draw_text("relative error", &(FAMILY, 14).into_font().color(&BLACK), (x, top))?;
        root.draw_text("(fraction, log scale)", &(FAMILY, LABEL_FONT).into_font().color(&GREY), (x, top + 18))?;
        let (bar_top, bar_bottom) = (top + 44, top + 44 + BAR_HEIGHT);
        for i in 0..BAR_HEIGHT {
            let t = f64::from(i) / f64::from(BAR_HEIGHT - 1);
            let y = bar_bottom - i - 1;
            root.draw(&Rectangle::new([(x, y), (x + BAR_WIDTH, y + 1)], palette::scale(t).filled()))?;
        }
        root.draw(&Rectangle::new([(x, bar_top), (x + BAR_WIDTH, bar_bottom)], BLACK.mix(0.6)))?;
        let (lo, hi) = self.scale;
        let tick = label.clone().pos(Pos::new(HPos::Left, VPos::Center));
        let decades = (hi - lo).round() as i32;
        let step = (decades / 8).max(1);
        for k in (0..=decades).step_by(step as usize) {
            let e = lo + f64::from(k);
            let y = bar_bottom - ((e - lo) / (hi - lo) * f64::from(BAR_HEIGHT)).round() as i32;
            root.draw(&Rectangle::new([(x + BAR_WIDTH, y), (x + BAR_WIDTH + 5, y + 1)], BLACK.filled()))?;
            let text = match k {
                0 => format!("≤ {}", decade(e)),
                _ if k == decades => format!("≥ {}", decade(e)),
                _ => decade(e),
            };
            root.draw_text(&text, &tick, (x + BAR_WIDTH + 8, y))?;
        }
        let mut y = bar_bottom + 24;
        for (color, what) in [
            (palette::NON_FINITE, "NaN/inf in target only"),
            (palette::UNCOMPARABLE, "not comparable"),
            (palette::MISSING, "not in both runs"),
        ] {
            root.draw(&Rectangle::new([(x, y), (x + BAR_WIDTH, y + 14)], color.filled()))?;
            root.draw(&Rectangle::new([(x, y), (x + BAR_WIDTH, y + 14)], BLACK.mix(0.6)))?;
            root.draw_text(what, &tick, (x + BAR_WIDTH + 8, y + 7))?;
            y += 24;
        }
        Ok(())
    }
}

/// `1e-3` for -3, `1` for 0, `10` for 1, `1e3` for 3.
fn decade(e: f64) -> String {
    match e.round() as i32 {
        0 => "1".into(),
        1 => "10".into(),
        k => format!("1e{k}"),
    }
}

/// log10 of the colour scale's ends: whole decades around the positive finite errors, at most
/// [`MAX_DECADES`] apart; 1e-8 to 1 when there are none.
fn scale_of(map: &Heatmap) -> (f64, f64) {
    let positive = map.rows.iter().flat_map(|r| &r.cells).filter_map(|c| match c {
        Cell::Rel(x) if *x > 0.0 && x.is_finite() => Some(x.log10()),
        _ => None,
    });
    let (lo, hi) = positive.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), e| (lo.min(e), hi.max(e)));
    if !lo.is_finite() {
        return (-MAX_DECADES, 0.0);
    }
    let hi = hi.ceil();
    let lo = lo.floor().max(hi - MAX_DECADES);
    if lo < hi {
        (lo, hi)
    } else {
        (hi - 1.0, hi)
    }
}

fn cut_front(name: &str, max: usize) -> String {
    let n = name.chars().count();
    if n <= max {
        return name.to_string();
    }
    let tail: String = name.chars().skip(n - (max - 1)).collect();
    format!("…{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decades_and_labels() {
        assert_eq!(decade(-3.0), "1e-3");
        assert_eq!(decade(0.0), "1");
        assert_eq!(cut_front("Functional.scaled_dot_product_attention.12", 20), "…roduct_attention.12");
        assert_eq!(cut_front("Torch.add.0", 20), "Torch.add.0");
    }
}
