//! # probelake-report
//!
//! `probelake report`: one HTML file that shows where two runs part, readable offline and with
//! no server: the verdict (the earliest diverging op and its module chain, the counts), a
//! heatmap of rank × step per stage, each unit's module tree coloured with msprobe's buckets,
//! a node's inputs and outputs side by side with its call stack, trends across steps, and the
//! worst rows. docs/report.md says what each view means.
//!
//! [`ReportJob`] gathers the data ([`ReportData`]): it opens and pairs both runs as `compare`
//! does, runs the first-divergence search and msprobe compare over every unit pair, and keeps
//! every unit's summary and tree, and the rows of the nodes worth showing. [`page`] pastes that
//! data, the page's script and its style into `assets/report.html`.
#![warn(missing_docs)]

mod context;
mod error;
mod job;
pub mod model;
mod page;
mod unit;

pub use error::ReportError;
pub use job::{ReportJob, DETAIL_ROWS, WORST_ROWS};
pub use model::ReportData;
pub use page::{page, CONTENT_SECURITY_POLICY};
