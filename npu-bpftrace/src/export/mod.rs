//! `npu-bpftrace export DIR -o FILE`: a recorded dataset as a timeline file that trace
//! viewers open (Perfetto UI, chrome://tracing, MindStudio Insight).
//!
//! The dataset is read by `tracer_schema::dataset`, the one reader every tool shares, a
//! batch at a time: [`timeline`] says what goes on which track, and [`chrome`] (Chrome Trace
//! Event Format JSON) or [`perfetto`] (Perfetto's protobuf trace) writes it as it comes.
pub mod chrome;
pub mod perfetto;
mod timeline;

use std::{
    collections::BTreeMap,
    fs::{self, File},
    io::{BufWriter, IsTerminal, Write},
    path::Path,
};

use anyhow::{Context, Result};
use tracer_schema::dataset::Dataset;

/// File format of `export`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// Chrome Trace Event Format JSON (like msprof's trace_view.json): Perfetto UI,
    /// chrome://tracing, MindStudio Insight.
    #[default]
    Chrome,
    /// Perfetto's native protobuf trace (TrackEvent): Perfetto UI and trace processor;
    /// smaller and faster to load than JSON, with exact nanoseconds.
    Perfetto,
}

/// What an export wrote.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Trace events (Chrome) or packets (Perfetto) written, track names included.
    pub events: u64,
    /// Distinct traced processes and devices given a track.
    pub processes: usize,
    pub devices: usize,
    /// Device tasks left out because they have no device start or end time (they never
    /// completed while traced), per table.
    pub skipped_tasks: BTreeMap<&'static str, u64>,
}

/// Exports the dataset in `dir` to the file `out` in `format`, and says on stderr what it
/// wrote (with a progress bar while it writes, when stderr is a terminal). A failed
/// export removes the partial file.
pub fn run(dir: &Path, format: Format, out: &Path) -> Result<Summary> {
    let dataset = Dataset::open(dir)?;
    let file = File::create(out).with_context(|| format!("cannot write {}", out.display()))?;
    let progress = std::io::stderr().is_terminal() && !crate::say::quiet();
    let written = export(&dataset, format, BufWriter::new(file), progress)
        .with_context(|| format!("writing {}", out.display()));
    let summary = match written {
        Ok(summary) => summary,
        Err(e) => {
            // A truncated file would only fail later, in the viewer.
            let _ = fs::remove_file(out);
            return Err(e);
        }
    };
    crate::status!(
        "npu-bpftrace: exported {} {} ({} processes, {} devices) to {}",
        summary.events,
        match format {
            Format::Chrome => "events",
            Format::Perfetto => "packets",
        },
        summary.processes,
        summary.devices,
        out.display()
    );
    let skipped: u64 = summary.skipped_tasks.values().sum();
    if skipped > 0 {
        let per_table: Vec<String> = summary
            .skipped_tasks
            .iter()
            .map(|(table, n)| format!("{table} {n}"))
            .collect();
        eprintln!(
            "npu-bpftrace: skipped {skipped} device tasks without device times ({}): they \
             never completed while traced",
            per_table.join(", ")
        );
    }
    Ok(summary)
}

/// Writes `dataset` to `out` in `format`; `progress` shows a progress bar on stderr.
pub fn export(
    dataset: &Dataset,
    format: Format,
    out: impl Write,
    progress: bool,
) -> Result<Summary> {
    match format {
        Format::Chrome => chrome::write(dataset, out, progress),
        Format::Perfetto => perfetto::write(dataset, out, progress),
    }
}

#[cfg(test)]
mod tests;
