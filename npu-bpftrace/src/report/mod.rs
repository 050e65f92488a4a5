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
use regex::Regex;

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

/// What the report counts: every row, or those of some processes, hosts, ranks, names
/// and a time window.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Processes (any host's process with one of these pids); empty for all.
    pub pids: Vec<u64>,
    /// Hosts, by the name of their `host=` partition; empty for all.
    pub hosts: Vec<String>,
    /// HCCL ranks: the processes whose rank in their largest communicator is one of these.
    pub ranks: Vec<u64>,
    /// Kernel, API function, operator, collective and mstx names, copy directions.
    pub name: Option<Regex>,
    /// Rows that start at least this many ns after the first timestamp of their host...
    pub from: Option<u64>,
    /// ... and before this many.
    pub to: Option<u64>,
    /// The first N rows of each section.
    pub top: Option<usize>,
}

impl Filter {
    /// The filters in force, as `--flag value` text, for the report's header.
    pub fn describe(&self) -> Vec<String> {
        let list = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
        let mut out = Vec::new();
        if !self.pids.is_empty() {
            out.push(format!("--pid {}", list(&self.pids)));
        }
        if !self.hosts.is_empty() {
            out.push(format!("--host {}", self.hosts.join(",")));
        }
        if !self.ranks.is_empty() {
            out.push(format!("--rank {}", list(&self.ranks)));
        }
        if let Some(name) = &self.name {
            out.push(format!("--name {}", name.as_str()));
        }
        if let Some(from) = self.from {
            out.push(format!("--from {}", render::human_ns(from)));
        }
        if let Some(to) = self.to {
            out.push(format!("--to {}", render::human_ns(to)));
        }
        if let Some(top) = self.top {
            out.push(format!("--top {top}"));
        }
        out
    }
}

/// Reads the dataset in `dir`, summarizes what `filter` selects and prints it to stdout in
/// `format`. A part that is not readable Parquet is skipped with a warning on stderr (an
/// error when `strict`).
pub fn run(dir: &Path, format: Format, filter: &Filter, strict: bool) -> Result<()> {
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
    let text = render::render(&summary::summarize(&dataset, filter)?, format)?;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()) {
        // `report DIR | head` closing the pipe early is not an error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.context("writing the report"),
    }
}

/// The report on the dataset in `dir`, as text in `format`.
pub fn report(dir: &Path, format: Format, filter: &Filter) -> Result<String> {
    let dataset = tracer_schema::dataset::Dataset::open(dir)?;
    let summary = summary::summarize(&dataset, filter)?;
    render::render(&summary, format)
}

#[cfg(test)]
mod tests;
