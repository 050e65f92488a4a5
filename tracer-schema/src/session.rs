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

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::SCHEMA_VERSION;

/// CLOCK_REALTIME - CLOCK_MONOTONIC at one instant, in ns.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct ClockSample {
    pub monotonic_ns: u64,
    pub realtime_ns: u64,
    pub realtime_minus_monotonic_ns: i128,
}

/// What was attached in one library file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AttachedFile {
    /// The catalog's library name, e.g. `libascendcl.so`.
    pub library: String,
    pub path: PathBuf,
    pub functions: Vec<String>,
    /// Enabled functions the file does not define (an older CANN, a stripped build).
    pub missing: Vec<String>,
    /// How the functions' uprobes were attached; absent when none was (and in datasets
    /// written before this field existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attach: Option<AttachKind>,
    /// When the probes were in place (CLOCK_MONOTONIC ns): calls of the file's functions
    /// before then were not seen (a library a process loaded after tracing began).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attached_ns: Option<u64>,
    /// Why the file could not be attached (its calls were not traced); absent when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// How the uprobes of a library file are attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttachKind {
    /// Two `uprobe_multi` links (Linux >= 6.6), one per program, each carrying every
    /// function's offset and attach cookie.
    UprobeMulti,
    /// One perf-event uprobe per function and program (the fallback on older kernels).
    PerfEvent,
}

impl AttachKind {
    /// The name `session.json` uses.
    pub fn name(self) -> &'static str {
        match self {
            Self::UprobeMulti => "uprobe_multi",
            Self::PerfEvent => "perf_event",
        }
    }
}

/// What the correlator could not pair.
#[derive(Debug, Default, Clone, Copy, Serialize, Deserialize)]
pub struct CorrelateStats {
    pub calls: u64,
    /// EXIT whose ENTER never arrived (lost to a full ring buffer).
    pub exits_without_enter: u64,
    /// Calls still open when their thread exited or tracing stopped.
    pub incomplete_calls: u64,
    /// Records naming a probe id outside the catalog (never expected).
    pub unknown_probes: u64,
}

/// Device tasks seen, and what could not be attributed.
#[derive(Debug, Default, Clone, Copy, Serialize, Deserialize)]
pub struct ActivityStats {
    /// Device tasks with device times.
    pub tasks: u64,
    /// Of those, timed by the profiling channel's records.
    pub tasks_from_channel: u64,
    /// Channel records that matched no traced submission (other processes' tasks on the
    /// same device, or records whose submission was lost).
    pub channel_records_unmatched: u64,
    pub tasks_without_api: u64,
    pub device_errors: u64,
    pub missing_completions: u64,
    /// Begin and end records of traced tasks that never arrived from the profiling channel:
    /// lost to a full channel buffer, or never produced (the process exited, tracing
    /// stopped, before the task ended).
    #[serde(default)]
    pub channel_records_lost: u64,
}

/// How a device clock model was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClockStatus {
    /// Nothing known: no frequency, no observation.
    Unknown,
    /// Only the nominal frequency (or too little data to fix the line): no conversion.
    Nominal,
    /// Fitted from task bounds only.
    BoundsOnly,
    /// Fitted with at least one direct syscnt sample.
    Direct,
    /// Constraints conflict beyond the outlier budget: the line minimizes the worst violation.
    Infeasible,
}

/// A device's fitted syscnt -> CLOCK_MONOTONIC model, as reported in the session.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClockSummary {
    pub status: ClockStatus,
    pub freq_hz: Option<f64>,
    /// `a` in `host_ns = a + b·cnt`.
    pub offset_ns: Option<f64>,
    /// `b` in `host_ns = a + b·cnt`.
    pub ns_per_tick: Option<f64>,
    /// Device rate versus nominal: positive when the device counts fast.
    pub drift_ppm: Option<f64>,
    /// Worst deviation of any line consistent with the kept constraints from the fitted one,
    /// over the observed count range, plus half a tick. `None` when unbounded or infeasible.
    pub error_bound_ns: Option<f64>,
    pub samples: u64,
    pub tasks: u64,
    /// Constraints dropped as outliers, plus those still violated when infeasible.
    pub violations: u64,
    /// Malformed observations (exit before enter, end before start, received before submit).
    pub ignored: u64,
}

/// The NPU chip whose device path the agent read (`chip` in session.json).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChipSummary {
    /// The layout the device path was read with: `910B` (STARS v100) or `950` (STARS v2).
    pub layout: String,
    /// The chip id the driver reported (bits 8-15 of `halGetDeviceInfo(INFO_TYPE_VERSION)`);
    /// null when it could not be asked.
    pub id: Option<u32>,
    /// Why `layout` is the default rather than the reported chip's (an unknown chip id, no
    /// answer from the driver); null when the chip is known.
    pub fallback: Option<String>,
}

/// What the agent could not write (`output` in session.json).
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputStats {
    /// Flushes (about one a second) in which some part could not be written; each such
    /// part was kept in memory and retried.
    pub write_errors: u64,
    /// The first write error: the file and the system's reason, e.g. `No space left on
    /// device (os error 28)`.
    pub error: Option<String>,
    /// Rows missing from the dataset, per table (tables without losses are left out):
    /// never written (the file system still failed when the session ended, or the
    /// unwritten rows outgrew the agent's memory bound), or written to an output directory
    /// that was then removed. `rows` counts them; the files hold `rows - rows_lost`.
    pub rows_lost: BTreeMap<String, u64>,
    /// The output directory was removed while tracing (the agent made it again).
    pub directory_removed: bool,
}

impl OutputStats {
    /// Rows missing from the dataset, all tables.
    pub fn total_rows_lost(&self) -> u64 {
        self.rows_lost.values().sum()
    }
}

/// What the kernel-side state maps held when the session ended (`bpf_maps` in
/// session.json). Entries of threads and processes that are gone should have been removed
/// when they exited: a non-zero `*_gone` count is state leaked in the kernel.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapOccupancy {
    /// Per-thread call stacks (`THREADS`), and those of threads that no longer exist.
    pub threads: u64,
    pub threads_gone: u64,
    /// Processes in the target filter (`TARGETS`), and those that no longer exist.
    pub targets: u64,
    pub targets_gone: u64,
    /// Submitted device tasks awaiting completion (`TASKS`), and those of processes that
    /// no longer exist.
    pub tasks: u64,
    pub tasks_gone: u64,
}

/// Processes held at their first open of a library file not attached yet, until its probes
/// were (`holds` in session.json).
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HoldStats {
    /// Whether processes were held (false: `NPU_BPFTRACE_HOLD=0`, or the kernel lacks what
    /// it needs; `unavailable` says why); libraries were then found by rescans only.
    pub enabled: bool,
    pub unavailable: Option<String>,
    /// Holds: a process stopped at one open.
    pub holds: u64,
    /// Distinct processes held.
    pub processes: u64,
    /// Holds whose file was a library the catalog knows (the others were named like one).
    pub libraries: u64,
    /// Library files attached because of a hold.
    pub files_attached: u64,
    /// Total and longest time held (µs), from the stop to the agent's release.
    pub total_us: u64,
    pub max_us: u64,
    /// Holds ended by the time bound rather than by the agent.
    pub timed_out: u64,
    /// Processes left stopped at release because someone else had asked them to stop.
    pub left_stopped: u64,
    /// Opens that should have been held but were not (the kernel-side maps or ring were
    /// full, or the signal was refused): those libraries were found by a rescan.
    pub missed: u64,
    /// Holds whose file could not be resolved or attached (the error, for the first).
    pub errors: u64,
    pub first_error: Option<String>,
}

/// What opened or closed a capture window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowCause {
    /// The session started recording at once (no `--delay`).
    Start,
    /// `--delay` ran out.
    Delay,
    /// SIGUSR1 started recording.
    Sigusr1,
    /// SIGUSR2 stopped recording.
    Sigusr2,
    /// An mstx range with the `--capture-range` message started or ended.
    MstxRange,
    /// The session stopped.
    Stop,
}

/// A span of time in which recording was on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaptureWindow {
    /// CLOCK_MONOTONIC ns.
    pub start_ns: u64,
    /// Null only in a session that did not finish.
    pub end_ns: Option<u64>,
    pub opened_by: WindowCause,
    pub closed_by: Option<WindowCause>,
    /// The process whose mstx range made the window (`mstx_range` windows); null for the
    /// windows of every process (started and stopped by the session, `--delay`, signals).
    pub pid: Option<u32>,
    /// The thread that called the range's start (and, when it closed it, its end).
    pub tid: Option<u32>,
    /// The mstx range id (null when the range never returned its id).
    pub range_id: Option<u64>,
}

/// `--capture-range`: which mstx ranges open windows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaptureRange {
    /// The message ranges must have; ending in `*`: the start it must have.
    pub message: String,
    /// Windows each process opens at most (`--capture-range-count`); null: no limit.
    pub count: Option<u32>,
}

/// When recording was on (`capture` in session.json). A call is recorded when its outermost
/// call began inside a window of every process (`pid` null) and, with a capture range,
/// inside a window of its own process; it is then recorded whole, with its nested calls and
/// device tasks.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capture {
    /// `--delay` in ns.
    pub delay_ns: Option<u64>,
    pub range: Option<CaptureRange>,
    /// In the order they opened.
    pub windows: Vec<CaptureWindow>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Session {
    /// [`SCHEMA_VERSION`] of the writer.
    pub schema_version: u32,
    pub tool: String,
    /// Version of the tool that wrote the dataset.
    pub version: String,
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
    /// Records or calls lost in the kernel, per drop kind.
    pub drops: BTreeMap<String, u64>,
    /// User-memory reads that failed in the BPF programs, per kind: the record was kept
    /// without the value (or a device task went untraced).
    pub read_failures: BTreeMap<String, u64>,
    pub correlation: CorrelateStats,
    /// Device tasks seen, and what could not be attributed.
    pub activity: ActivityStats,
    /// Per device: the fitted syscnt -> CLOCK_MONOTONIC model and its error bound.
    pub clocks: BTreeMap<u32, ClockSummary>,
    /// Per device the driver lists: where its task times come from, `profiling_channel`
    /// (channel 50's begin/end records) or `completion_queue: <why not the channel>`.
    pub device_time_sources: BTreeMap<u32, String>,
    /// The chip the device path was read as; absent in sessions written before it was
    /// recorded.
    #[serde(default)]
    pub chip: Option<ChipSummary>,
    /// Rows produced, per table (see `output.rows_lost` for any not in the files).
    pub rows: BTreeMap<String, u64>,
    pub files: u64,
    pub bytes: u64,
    /// Write errors and the rows they cost; absent in sessions written before it existed.
    #[serde(default)]
    pub output: OutputStats,
    /// When recording was on; absent in sessions written before it existed.
    #[serde(default)]
    pub capture: Capture,
    /// The kernel-side state maps at the end; absent in sessions written before it existed.
    #[serde(default)]
    pub bpf_maps: MapOccupancy,
    /// Processes held until their libraries were attached; absent in older files.
    #[serde(default)]
    pub holds: HoldStats,
}

impl Session {
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

    /// Reads `dir/session.json`, refusing a dataset written with another schema version
    /// with a line that says which side is older.
    pub fn read(dir: &Path) -> Result<Self> {
        let path = dir.join("session.json");
        let text =
            fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        let value: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("{} is not JSON", path.display()))?;
        check_version(&path, value.get("schema_version").and_then(|v| v.as_u64()))?;
        serde_json::from_value(value)
            .with_context(|| format!("{} is not an npu-bpftrace session", path.display()))
    }
}

/// Fails unless `found` (a file's schema version; None before versions were written) is
/// [`SCHEMA_VERSION`].
pub fn check_version(file: &Path, found: Option<u64>) -> Result<()> {
    let ours = u64::from(SCHEMA_VERSION);
    match found {
        Some(v) if v == ours => Ok(()),
        Some(v) if v > ours => bail!(
            "{} has schema version {v}, newer than this npu-bpftrace reads ({ours}): \
             use a newer npu-bpftrace",
            file.display()
        ),
        found => bail!(
            "{} has schema version {}, older than this npu-bpftrace reads ({ours}): \
             read it with the npu-bpftrace that wrote it, or record it again",
            file.display(),
            found.map_or("1".to_string(), |v| v.to_string())
        ),
    }
}
