//! Reports: what a run prints (a line, a side-by-side table, a summary, or JSON) and what a
//! sweep writes (Markdown: findings, like-with-like comparisons, a table with notes; SVG charts).

mod json;
mod latency;
mod run;
mod svg;
mod sweep;
#[cfg(test)]
mod tests;
pub mod timeline;

pub use json::{run_from_json, run_json};
pub use latency::{latency_stats, HistoryStats, LatencyHistogram, LatencyStats};
pub use run::{
    hash_text, run_details, run_line, runs_text, side_by_side, RunReport, Stories, Summary,
    ANOMALIES,
};
pub use svg::{sweep_charts, sweep_svg_latency, sweep_svg_lost};
pub use sweep::{chart_file_names, sweep_markdown, RowContext, SweepRow};
