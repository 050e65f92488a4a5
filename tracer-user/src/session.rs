//! `DIR/session.json`: what a dataset needs to be interpreted later — where and when it
//! was recorded, how to map its CLOCK_MONOTONIC timestamps to wall-clock time, what was
//! attached, and what was lost.
use std::{
    collections::BTreeMap,
    fs,
    io::Write,
    os::unix::fs::OpenOptionsExt,
    path::{Path, PathBuf},
};

use anyhow::{Context, Result};
use serde::Serialize;
use tracer_common::DropKind;

use crate::{
    activity::ActivityStats, attach::AttachedFile, clock::ClockSummary, correlate::CorrelateStats,
};

/// CLOCK_REALTIME - CLOCK_MONOTONIC at one instant, in ns.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ClockSample {
    pub monotonic_ns: u64,
    pub realtime_ns: u64,
    pub realtime_minus_monotonic_ns: i128,
}

impl ClockSample {
    pub fn now() -> Self {
        // Read realtime between two monotonic reads and use their midpoint.
        let m1 = clock_ns(libc::CLOCK_MONOTONIC);
        let realtime_ns = clock_ns(libc::CLOCK_REALTIME);
        let m2 = clock_ns(libc::CLOCK_MONOTONIC);
        let monotonic_ns = m1 + (m2 - m1) / 2;
        Self {
            monotonic_ns,
            realtime_ns,
            realtime_minus_monotonic_ns: i128::from(realtime_ns) - i128::from(monotonic_ns),
        }
    }
}

pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid clock id and pointer.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[derive(Debug, Serialize)]
pub struct Session {
    pub tool: &'static str,
    pub version: &'static str,
    pub host: String,
    pub boot_id: String,
    pub kernel_release: String,
    pub command_line: Vec<String>,
    pub mode: String,
    pub targets: Vec<u32>,
    pub clock_start: ClockSample,
    pub clock_end: Option<ClockSample>,
    /// False while recording; a dataset whose session says false was not stopped cleanly.
    pub complete: bool,
    pub attached: Vec<AttachedFile>,
    pub drops: BTreeMap<&'static str, u64>,
    pub correlation: CorrelateStats,
    /// Device tasks seen, and what could not be attributed.
    pub activity: ActivityStats,
    /// Per device: the fitted syscnt -> CLOCK_MONOTONIC model and its error bound.
    pub clocks: BTreeMap<u32, ClockSummary>,
    pub rows: BTreeMap<&'static str, u64>,
    pub files: u64,
    pub bytes: u64,
}

impl Session {
    pub fn start(host: String, mode: String, targets: Vec<u32>) -> Self {
        Self {
            tool: "npu-bpftrace",
            version: env!("CARGO_PKG_VERSION"),
            host,
            boot_id: read_trimmed("/proc/sys/kernel/random/boot_id"),
            kernel_release: read_trimmed("/proc/sys/kernel/osrelease"),
            command_line: std::env::args().collect(),
            mode,
            targets,
            clock_start: ClockSample::now(),
            clock_end: None,
            complete: false,
            attached: Vec::new(),
            drops: DropKind::ALL.iter().map(|k| (k.name(), 0)).collect(),
            correlation: CorrelateStats::default(),
            activity: ActivityStats::default(),
            clocks: BTreeMap::new(),
            rows: BTreeMap::new(),
            files: 0,
            bytes: 0,
        }
    }

    pub fn set_drops(&mut self, drops: &[u64]) {
        for (kind, count) in DropKind::ALL.iter().zip(drops) {
            self.drops.insert(kind.name(), *count);
        }
    }

    pub fn total_drops(&self) -> u64 {
        self.drops.values().sum()
    }

    /// Writes `dir/session.json` atomically (temporary file, fsync, rename), mode 0600.
    pub fn write(&self, dir: &Path) -> Result<PathBuf> {
        let path = dir.join("session.json");
        let tmp = dir.join(".session.json.tmp");
        let json = serde_json::to_vec_pretty(self)?;
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .with_context(|| format!("creating {}", tmp.display()))?;
        file.write_all(&json)?;
        file.sync_all()?;
        fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))?;
        Ok(path)
    }
}

fn read_trimmed(path: &str) -> String {
    fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}
