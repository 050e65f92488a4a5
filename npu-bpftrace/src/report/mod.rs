//! `npu-bpftrace report DIR`: reads a recorded dataset back from its Parquet files and prints
//! what a profiler user looks at first, like `nsys stats`.
//!
//! The dataset is read by `tracer_schema::dataset`, the one reader every tool shares;
//! - [`summary`]: the figures, one struct per section (also the JSON output's keys);
//! - [`render`]: table, CSV or JSON text.
pub mod render;
pub mod summary;

use std::{io::Write, path::Path};

use anyhow::{Context, Result};

/// Output format of `report`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// Aligned tables with human-readable durations and sizes.
    #[default]
    Table,
    /// One CSV block per section (`# section` line, header, rows), raw numbers (ns, bytes).
    Csv,
    /// One JSON object with a key per section, raw numbers.
    Json,
}

/// Reads the dataset in `dir`, summarizes it and prints it to stdout in `format`.
pub fn run(dir: &Path, format: Format) -> Result<()> {
    let text = report(dir, format)?;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()) {
        // `report DIR | head` closing the pipe early is not an error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.context("writing the report"),
    }
}

/// The report on the dataset in `dir`, as text in `format`.
pub fn report(dir: &Path, format: Format) -> Result<String> {
    let dataset = tracer_schema::dataset::Dataset::open(dir)?;
    let summary = summary::summarize(&dataset)?;
    render::render(&summary, format)
}

#[cfg(test)]
mod tests;
