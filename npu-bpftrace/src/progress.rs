//! The live status line on stderr while recording (only when stderr is a terminal):
//! elapsed time, processes traced, events per second, rows written, drops.
use std::{
    collections::HashSet,
    io::Write,
    sync::atomic::{AtomicU64, Ordering},
    time::Instant,
};

use tracer_core::decode::Record;

/// Counters the pipeline updates and the status line reads.
#[derive(Default)]
pub struct Progress {
    records: AtomicU64,
    rows: AtomicU64,
    processes: AtomicU64,
}

impl Progress {
    pub fn add_rows(&self, rows: u64) {
        self.rows.fetch_add(rows, Ordering::Relaxed);
    }
}

/// Counts records and distinct processes of each batch (cheaply: records of a batch
/// mostly come from one process).
#[derive(Default)]
pub struct ProcessCounter {
    seen: HashSet<u32>,
    last: u32,
}

impl ProcessCounter {
    pub fn observe(&mut self, batch: &[Record], progress: &Progress) {
        for record in batch {
            let pid = record.header().pid;
            if pid != self.last {
                self.last = pid;
                self.seen.insert(pid);
            }
        }
        progress
            .records
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        progress
            .processes
            .store(self.seen.len() as u64, Ordering::Relaxed);
    }
}

pub struct StatusLine {
    enabled: bool,
    started: Instant,
    last: (Instant, u64),
}

impl StatusLine {
    pub fn new() -> Self {
        // SAFETY: isatty has no preconditions.
        let enabled = unsafe { libc::isatty(2) } == 1 && !crate::say::quiet();
        let now = Instant::now();
        Self {
            enabled,
            started: now,
            last: (now, 0),
        }
    }

    pub fn update(&mut self, progress: &Progress, drops: u64) {
        if !self.enabled {
            return;
        }
        let now = Instant::now();
        let records = progress.records.load(Ordering::Relaxed);
        let secs = now.duration_since(self.last.0).as_secs_f64().max(1e-3);
        let rate = (records - self.last.1) as f64 / secs;
        self.last = (now, records);
        let elapsed = now.duration_since(self.started).as_secs();
        let line = format!(
            "npu-bpftrace: {:02}:{:02} | {} processes | {}/s events | {} rows | {drops} drops",
            elapsed / 60,
            elapsed % 60,
            progress.processes.load(Ordering::Relaxed),
            human(rate),
            progress.rows.load(Ordering::Relaxed)
        );
        let _ = write!(std::io::stderr(), "\r{line:<79}");
    }

    /// Clears the line so the final summary starts clean.
    pub fn finish(&self) {
        if self.enabled {
            let _ = write!(std::io::stderr(), "\r{:<79}\r", "");
        }
    }
}

impl Default for StatusLine {
    fn default() -> Self {
        Self::new()
    }
}

fn human(rate: f64) -> String {
    match rate {
        r if r >= 1e6 => format!("{:.1}M", r / 1e6),
        r if r >= 1e3 => format!("{:.1}k", r / 1e3),
        r => format!("{r:.0}"),
    }
}

/// A progress bar on stderr for work over a known number of rows (`export`), redrawn at
/// most ten times a second; silent when not enabled (stderr is not a terminal).
pub struct Bar {
    label: &'static str,
    total: u64,
    done: u64,
    enabled: bool,
    drawn: Option<Instant>,
}

impl Bar {
    pub fn new(label: &'static str, total: u64, enabled: bool) -> Self {
        Self {
            label,
            total,
            done: 0,
            enabled,
            drawn: None,
        }
    }

    pub fn advance(&mut self, rows: u64) {
        self.done += rows;
        if !self.enabled || self.drawn.is_some_and(|t| t.elapsed().as_millis() < 100) {
            return;
        }
        self.drawn = Some(Instant::now());
        let share = self.done.min(self.total) as f64 / self.total.max(1) as f64;
        let filled = (share * 30.0) as usize;
        let line = format!(
            "npu-bpftrace: {} [{}{}] {:>3.0}% {}/{} rows",
            self.label,
            "#".repeat(filled),
            " ".repeat(30 - filled),
            share * 100.0,
            self.done,
            self.total
        );
        let _ = write!(std::io::stderr(), "\r{line:<79}");
    }

    /// Clears the bar, if it was drawn, for the closing line.
    pub fn finish(&self) {
        if self.enabled && self.drawn.is_some() {
            let _ = write!(std::io::stderr(), "\r{:<79}\r", "");
        }
    }
}
