//! # probelake-plot
//!
//! Charts of probelake runs, drawn with `plotters` as SVG and PNG (text rendered with an
//! embedded font, so PNGs come out the same on a machine without fonts):
//!
//! - a **trend**: an op's or an item's statistics (max, min, mean, norm) across training
//!   steps, one line per run — [`fetch_trend`], then [`Trend::render`];
//! - a **divergence heatmap**: the relative error between a target and a golden run for every
//!   op call (or op) × step (or rank), on a log colour scale with a colour bar —
//!   [`fetch_divergence`], then [`Heatmap::render`].
//!
//! Fetching is SQL over a [`probelake_query::RunSession`]; drawing needs no I/O, so a chart's
//! data can be built, inspected and drawn separately. `probelake plot` is the command line.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use probelake_plot::{fetch_trend, TrendQuery};
//! use probelake_query::{Run, RunSession};
//! # let dir = tempfile::tempdir()?;
//! # let src = dir.path().join("src");
//! # probelake_synth::write_run(&probelake_synth::SynthSpec::demo(), &src)?;
//! # let lake = probelake_format::Lake::local(&dir.path().join("lake"))?;
//! # probelake_msprobe::import(&src, &lake, &Default::default(), &probelake_msprobe::NoProgress).await?;
//! let session = RunSession::open(vec![Run::new("base", lake)], false).await?;
//! let trend = fetch_trend(&session, &TrendQuery::op("Functional.layer_norm")).await?;
//! assert_eq!(trend.steps(), [1, 2]);
//! let figure = trend.render()?;
//! assert!(figure.svg.starts_with("<svg") && figure.png.starts_with(b"\x89PNG"));
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

mod columns;
mod divergence;
mod error;
mod figure;
mod font;
mod header;
mod heatmap;
mod palette;
mod stat;
mod trend;
mod trend_chart;

pub use divergence::{fetch_divergence, Across, Cell, DivergenceQuery, ErrorOf, HeatRow, Heatmap, RowsBy};
pub use error::{PlotError, Result};
pub use figure::{Figure, Formats};
pub use stat::Stat;
pub use trend::{fetch_trend, Subject, Trend, TrendPoint, TrendQuery, TrendSeries, Value};
