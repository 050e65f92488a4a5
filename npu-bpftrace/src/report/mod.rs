//! `npu-bpftrace report DIR`: reads a recorded dataset back from its Parquet files and prints
//! what a profiler user looks at first, like `nsys stats`.
//!
//! The dataset is read by `tracer_schema::dataset`, the one reader every tool shares;
//! - [`summary`]: the figures, one struct per section (also the JSON output's keys);
//! - [`render`]: table, CSV or JSON text.
pub mod render;
pub mod summary;

use std::{io::Write, path::Path};

use anyhow::{Context, Result, bail};

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

/// Reads the dataset in `dir`, summarizes it and prints it to stdout in `format`. A part
/// that is not readable Parquet is skipped with a warning on stderr (an error when
/// `strict`); returns how many were skipped.
pub fn run(dir: &Path, format: Format, strict: bool) -> Result<usize> {
    let dataset = tracer_schema::dataset::Dataset::open_skipping_corrupt(dir)?;
    for (part, why) in &dataset.skipped {
        eprintln!("npu-bpftrace: warning: skipped {}: {why}", part.display());
    }
    let skipped = dataset.skipped.len();
    if skipped > 0 {
        if strict {
            bail!("{skipped} corrupt parts in {} (--strict)", dir.display());
        }
        eprintln!(
            "npu-bpftrace: warning: {skipped} corrupt parts skipped; the report leaves their rows out"
        );
    }
    let text = render::render(&summary::summarize(&dataset)?, format)?;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()) {
        // `report DIR | head` closing the pipe early is not an error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.context("writing the report"),
    }?;
    Ok(skipped)
}

/// The report on the dataset in `dir`, as text in `format`.
pub fn report(dir: &Path, format: Format) -> Result<String> {
    let dataset = tracer_schema::dataset::Dataset::open(dir)?;
    let summary = summary::summarize(&dataset)?;
    render::render(&summary, format)
}

#[cfg(test)]
mod tests;
