//! Holding a process at its first open of a library file not attached yet, until the
//! file's probes are attached: a process with its own copy of the CANN libraries (a
//! container image, a private install) is then traced from its first call, as processes
//! using the host's files are.
//!
//! The BPF side (`tracer-ebpf/src/hold.rs`) stops a process at the return of an `openat`
//! (read-only, not `O_PATH`) of a file whose base name begins like a catalog library name,
//! when that path has not been seen in the process's mount namespace, and sends a
//! [`HoldEvent`]. Here the file is resolved through `/proc/PID/fd`, attached when the catalog
//! knows its name (an inode's uprobes apply to mappings that exist already), the path is
//! remembered as seen in that namespace (`HOLD_KNOWN`), and the process is continued.
//!
//! Nothing may stay stopped: the hold is deleted from `HELD` by whoever continues the
//! process (the deletion succeeds once), the `watchdog` helper continues holds older
//! than [`HOLD_LIMIT`] (and turns holding off until the agent answers again) and, when the
//! agent ends in any way, turns holding off and continues every hold left; dropping
//! [`Holds`] does the same. A process found stopped with another stop pending at release
//! (someone stopped it while it was held) is left stopped.
use std::{
    collections::HashSet,
    fs,
    os::{
        fd::{AsFd, AsRawFd, RawFd},
        unix::fs::MetadataExt,
    },
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::{Context, Result, bail};
use aya::maps::{Array, HashMap, Map, MapData, PerCpuArray, RingBuf};
use tokio::io::{Interest, unix::AsyncFd};
use tracer_catalog::{Catalog, intern, library_base_name};
use tracer_common::{
    HOLD_ABSOLUTE, HOLD_PREFIX_MAX, HOLD_STAT_HELD, HOLD_STAT_MISSED, HoldConfig, HoldEvent,
    HoldKnown, MAX_HELD, fnv,
};
use tracer_schema::session::{AttachedFile, HoldStats};

use crate::{
    attach::Attacher,
    bpf::{Probes, tracepoint_field_offset},
    discovery::LibraryFile,
    session::clock_ns,
};

mod btf;
mod watchdog;

/// `NPU_BPFTRACE_HOLD=0` turns holding off (libraries are then found by rescans only).
pub const HOLD_ENV: &str = "NPU_BPFTRACE_HOLD";
/// The longest a process is held: past it the watchdog continues it, attached or not.
pub const HOLD_LIMIT: Duration = Duration::from_secs(3);

const ENTER_PROGRAM: &str = "hold_open_enter";
const EXIT_PROGRAM: &str = "hold_open_exit";

/// The hold machinery of a session: its maps, ring and watchdog, and what it did.
pub struct Holds {
    ring: AsyncFd<RingBuf<MapData>>,
    /// `HELD` and `HOLD_CONFIG`, kept for their descriptors (the watchdog has copies).
    held: MapData,
    config: MapData,
    known: HashMap<MapData, HoldKnown, u8>,
    counters: PerCpuArray<MapData, u64>,
    _watchdog: watchdog::Watchdog,
    stats: HoldStats,
    processes: HashSet<u32>,
    /// Holding was turned off and every hold continued.
    stopped: bool,
}

/// Whether the user turned holding off.
pub fn disabled_by_env() -> bool {
    std::env::var(HOLD_ENV).is_ok_and(|v| v.trim() == "0")
}

impl Holds {
    /// Starts holding: fills the BPF side's name prefixes (from `catalog`) and the paths
    /// already attached (`attached`, seen in the agent's own mount namespace), starts the
    /// watchdog and attaches the two `openat` tracepoints.
    pub fn start(
        probes: &mut Probes,
        catalog: &Catalog,
        attached: &[AttachedFile],
    ) -> Result<Self> {
        let mut config = HoldConfig {
            enabled: 0,
            filename_offset: tracepoint_field_offset("syscalls", "sys_enter_openat", "filename")?,
            flags_offset: tracepoint_field_offset("syscalls", "sys_enter_openat", "flags")?,
            ret_offset: tracepoint_field_offset("syscalls", "sys_exit_openat", "ret")?,
            ..HoldConfig::default()
        };
        match mount_ns_offsets() {
            Ok(offsets) => {
                config.use_known = 1;
                [
                    config.nsproxy_offset,
                    config.mnt_ns_offset,
                    config.ns_inum_offset,
                    config.ns_id_offset,
                ] = offsets;
                config.agent_mnt_ns = own_mount_ns()?;
            }
            // Without a process's mount namespace a path names no one file: every open of
            // a library name is held (correct, slower).
            Err(e) => eprintln!(
                "npu-bpftrace: warning: the kernel's BTF lacks the mount namespace offsets ({e:#}); \
                 every open of a CANN library name stops its process briefly"
            ),
        }
        let mut prefixes: HashMap<MapData, u64, u8> =
            HashMap::try_from(probes.take_map("HOLD_PREFIXES")?)?;
        for prefix in name_prefixes(catalog.library_patterns()) {
            config.prefix_lengths |= 1 << prefix.len();
            prefixes.insert(fnv(prefix.as_bytes()), 1, 0)?;
        }
        let mut known: HashMap<MapData, HoldKnown, u8> =
            HashMap::try_from(probes.take_map("HOLD_KNOWN")?)?;
        for path in attached.iter().filter_map(|a| seen_path(&a.path)) {
            known.insert(seen_here(&path), 1, 0)?;
        }
        let held = map_data(probes.take_map("HELD")?)?;
        let mut config_map = probes.take_map("HOLD_CONFIG")?;
        config.enabled = 1;
        Array::<&mut MapData, HoldConfig>::try_from(&mut config_map)?.set(0, config, 0)?;
        let config_map = map_data(config_map)?;
        let watchdog = watchdog::spawn(held.fd().as_fd(), config_map.fd().as_fd(), HOLD_LIMIT)
            .context("starting the helper that continues held processes")?;
        let ring = RingBuf::try_from(probes.take_map("HOLDS")?)?;
        // SAFETY: the ring buffer owns its fd and outlives the registration (both move in).
        let ring = unsafe { AsyncFd::register_with_interest(ring, Interest::READABLE) }
            .map_err(|e| anyhow::anyhow!("registering the hold ring with tokio: {e}"))?;
        let counters = PerCpuArray::try_from(probes.take_map("HOLD_STATS")?)?;
        // From here on dropping `holds` continues whatever the programs hold.
        let holds = Self {
            ring,
            held,
            config: config_map,
            known,
            counters,
            _watchdog: watchdog,
            stats: HoldStats {
                enabled: true,
                ..HoldStats::default()
            },
            processes: HashSet::new(),
            stopped: false,
        };
        probes.attach_tracepoint("syscalls", "sys_exit_openat", EXIT_PROGRAM)?;
        probes.attach_tracepoint("syscalls", "sys_enter_openat", ENTER_PROGRAM)?;
        Ok(holds)
    }

    /// The next hold events, once the BPF side sent some.
    pub async fn next(&mut self) -> Result<Vec<HoldEvent>> {
        let mut guard = self.ring.readable_mut().await?;
        let mut events = drain(guard.get_inner_mut());
        guard.clear_ready();
        // An event sent between the drain and clearing the readiness woke nobody.
        events.extend(drain(self.ring.get_mut()));
        Ok(events)
    }

    /// Attaches the files the held processes opened and continues them.
    pub fn handle(
        &mut self,
        events: &[HoldEvent],
        probes: &mut Probes,
        attacher: &mut Attacher,
        catalog: &Catalog,
    ) {
        for event in events {
            self.stats.holds += 1;
            self.processes.insert(event.tgid);
            // A hold the watchdog ended (the bound ran out) may have moved on from the file.
            let expired = watchdog::lookup(self.maps().held, event.tid).is_none();
            let attached = opened_library(event.tgid, event.fd, catalog).and_then(|file| {
                let Some(file) = file else { return Ok(None) };
                attacher.attach(probes, file).map(Some)
            });
            let settled = match attached {
                Ok(Some(n)) => {
                    self.stats.libraries += 1;
                    self.stats.files_attached += u64::from(n > 0);
                    true
                }
                Ok(None) => true,
                // The file was not looked at: the next open of it is held again.
                Err(_) if expired => false,
                // Trying again would come to the same.
                Err(e) => {
                    self.error(&e);
                    true
                }
            };
            if settled && event.flags & HOLD_ABSOLUTE != 0 && event.mnt_ns != u64::MAX {
                let key = HoldKnown {
                    mnt_ns: event.mnt_ns,
                    path_hash: event.path_hash,
                };
                let _ = self.known.insert(key, 1, 0);
            }
            self.release(event);
        }
    }

    /// Continues the process of `event` unless another of its threads is still held, and
    /// counts the time it was held.
    fn release(&mut self, event: &HoldEvent) {
        let held_us = clock_ns(libc::CLOCK_MONOTONIC).saturating_sub(event.ts_ns) / 1000;
        self.stats.total_us += held_us;
        self.stats.max_us = self.stats.max_us.max(held_us);
        let fd = self.held.fd().as_fd().as_raw_fd();
        if !watchdog::delete(fd, event.tid) {
            // The watchdog got there first: the bound ran out, and it turned holding off
            // until the agent answers, as it does now.
            self.stats.timed_out += 1;
            watchdog::set_enabled(self.maps().config, true);
            return;
        }
        if still_held(fd, event.tgid) {
            return;
        }
        if !watchdog::continue_process(event.tgid) && process_stopped_by_others(event.tgid) {
            self.stats.left_stopped += 1;
        }
    }

    fn error(&mut self, e: &anyhow::Error) {
        self.stats.errors += 1;
        if self.stats.first_error.is_none() {
            self.stats.first_error = Some(format!("{e:#}"));
        }
    }

    fn maps(&self) -> watchdog::Maps {
        watchdog::Maps {
            held: self.held.fd().as_fd().as_raw_fd(),
            config: self.config.fd().as_fd().as_raw_fd(),
        }
    }

    /// Turns holding off and continues every process still held (once).
    fn stop(&mut self) {
        if !self.stopped {
            self.stopped = true;
            watchdog::stop_holding(self.maps());
        }
    }

    /// Stops holding, continues every process still held and says what was done.
    pub fn finish(mut self) -> HoldStats {
        // Holds whose events came after the last read (a session stopping right after it
        // was continued): released, and counted (timed out, when the watchdog ended them),
        // without attaching anything.
        for event in drain(self.ring.get_mut()) {
            self.stats.holds += 1;
            self.processes.insert(event.tgid);
            self.release(&event);
        }
        self.stop();
        if let Ok(values) = self.counters.get(&HOLD_STAT_MISSED, 0) {
            self.stats.missed = values.iter().sum();
        }
        if let Ok(values) = self.counters.get(&HOLD_STAT_HELD, 0) {
            // Holds whose events the agent never read (the session ended first) were
            // continued above.
            self.stats.holds = self.stats.holds.max(values.iter().sum());
        }
        self.stats.processes = self.processes.len() as u64;
        std::mem::take(&mut self.stats)
    }
}

/// Whatever ends the session (an error included), nothing stays held.
impl Drop for Holds {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether `HELD` still holds a thread of `tgid`.
fn still_held(held_fd: RawFd, tgid: u32) -> bool {
    let mut keys = vec![0u32; MAX_HELD as usize];
    let count = watchdog::held_keys(held_fd, &mut keys);
    keys[..count]
        .iter()
        .filter_map(|&tid| watchdog::lookup(held_fd, tid))
        .any(|h| h.tgid == tgid)
}

fn process_stopped_by_others(tgid: u32) -> bool {
    fs::read(format!("/proc/{tgid}/status")).is_ok_and(|s| {
        let state = stop_state(&s);
        state.stopped && state.stop_pending
    })
}

/// What `/proc/PID/status` says about stopping.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StopState {
    /// State `T` (stopped).
    stopped: bool,
    /// A stop signal (SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU) pending for the process.
    stop_pending: bool,
}

/// Reads a `/proc/PID/status` text without allocating. A stopped process has consumed its
/// stop signal, so a stop signal still pending was sent after it stopped: by someone else,
/// when the stop was the hold's.
pub(crate) fn stop_state(status: &[u8]) -> StopState {
    const STOPS: u64 = (1 << (libc::SIGSTOP - 1))
        | (1 << (libc::SIGTSTP - 1))
        | (1 << (libc::SIGTTIN - 1))
        | (1 << (libc::SIGTTOU - 1));
    let mut state = StopState::default();
    for line in status.split(|&b| b == b'\n') {
        if let Some(rest) = line.strip_prefix(b"State:") {
            state.stopped = rest.trim_ascii_start().first() == Some(&b'T');
        } else if let Some(rest) = line.strip_prefix(b"ShdPnd:") {
            state.stop_pending = hex(rest.trim_ascii()) & STOPS != 0;
        }
    }
    state
}

fn hex(digits: &[u8]) -> u64 {
    digits.iter().fold(0u64, |n, &d| {
        let v = match d {
            b'0'..=b'9' => d - b'0',
            b'a'..=b'f' => d - b'a' + 10,
            b'A'..=b'F' => d - b'A' + 10,
            _ => 0,
        };
        (n << 4) | u64::from(v)
    })
}

/// The CANN library (one `catalog` knows) process `pid` has open as `fd`, reached through
/// the process's root so that a container's file is the container's.
fn opened_library(pid: u32, fd: u32, catalog: &Catalog) -> Result<Option<LibraryFile>> {
    let fd_path = PathBuf::from(format!("/proc/{pid}/fd/{fd}"));
    let inside =
        fs::read_link(&fd_path).with_context(|| format!("reading {}", fd_path.display()))?;
    let Some(file_name) = inside.file_name().and_then(|n| n.to_str()) else {
        return Ok(None);
    };
    if !catalog.knows_library(file_name) {
        return Ok(None);
    }
    let opened =
        fs::metadata(&fd_path).with_context(|| format!("reading {}", fd_path.display()))?;
    let id = (opened.dev(), opened.ino());
    let through_root =
        Path::new(&format!("/proc/{pid}/root")).join(inside.strip_prefix("/").unwrap_or(&inside));
    // The descriptor's path is the file only while it is open; the path through the
    // process's root lasts, when it still leads to the same file.
    let path = match fs::metadata(&through_root) {
        Ok(m) if (m.dev(), m.ino()) == id => through_root,
        _ => fd_path,
    };
    if !opened.is_file() {
        bail!("{} is not a regular file", inside.display());
    }
    Ok(Some(LibraryFile {
        name: intern(library_base_name(file_name)),
        path,
        id,
    }))
}

/// The literal beginnings (before any wildcard) of the catalog's library names and
/// patterns, at most [`HOLD_PREFIX_MAX`] bytes each.
fn name_prefixes(patterns: &[String]) -> HashSet<String> {
    patterns
        .iter()
        .map(|p| {
            let literal = p
                .split(['*', '?', '[', '{', '\\'])
                .next()
                .unwrap_or_default();
            let mut end = literal.len().min(HOLD_PREFIX_MAX);
            while !literal.is_char_boundary(end) {
                end -= 1;
            }
            literal[..end].to_owned()
        })
        .collect()
}

/// A path of an attached file as a process of the agent's mount namespace opens it: the
/// path itself, unless it reaches into another process's root.
fn seen_path(path: &Path) -> Option<PathBuf> {
    (!path.starts_with("/proc")).then(|| path.to_owned())
}

/// `path` seen in the agent's own mount namespace (whose key is 0).
fn seen_here(path: &Path) -> HoldKnown {
    use std::os::unix::ffi::OsStrExt;
    HoldKnown {
        mnt_ns: 0,
        path_hash: fnv(path.as_os_str().as_bytes()),
    }
}

/// The agent's mount namespace (the inode number of `/proc/self/ns/mnt`).
fn own_mount_ns() -> Result<u32> {
    let meta = fs::metadata("/proc/self/ns/mnt").context("reading /proc/self/ns/mnt")?;
    u32::try_from(meta.ino()).context("mount namespace number out of range")
}

/// `task_struct.nsproxy`, `nsproxy.mnt_ns`, `mnt_namespace.ns.inum` and the namespace's
/// id that is never reused: `mnt_namespace.ns.ns_id` (Linux 6.18) or `mnt_namespace.seq`.
fn mount_ns_offsets() -> Result<[u32; 4]> {
    let btf = btf::Btf::kernel()?;
    let id = btf
        .member_offset("mnt_namespace", &["ns", "ns_id"])
        .or_else(|_| btf.member_offset("mnt_namespace", &["seq"]))?;
    Ok([
        btf.member_offset("task_struct", &["nsproxy"])?,
        btf.member_offset("nsproxy", &["mnt_ns"])?,
        btf.member_offset("mnt_namespace", &["ns", "inum"])?,
        id,
    ])
}

fn map_data(map: Map) -> Result<MapData> {
    match map {
        Map::HashMap(data) | Map::Array(data) => Ok(data),
        _ => bail!("a hold map is neither a hash map nor an array"),
    }
}

/// Every event the ring holds.
fn drain(ring: &mut RingBuf<MapData>) -> Vec<HoldEvent> {
    let mut events = Vec::new();
    while let Some(item) = ring.next() {
        if item.len() >= size_of::<HoldEvent>() {
            // SAFETY: the length was checked and `HoldEvent` is plain integers (any bit
            // pattern is valid); read_unaligned copes with any alignment.
            events.push(unsafe { std::ptr::read_unaligned(item.as_ptr().cast::<HoldEvent>()) });
        }
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_state_tells_a_stop_sent_while_stopped() {
        let status =
            |state: &str, pending: &str| format!("Name:\tx\nState:\t{state}\nShdPnd:\t{pending}\n");
        let read = |s: String| stop_state(s.as_bytes());
        assert_eq!(
            read(status("T (stopped)", "0000000000000000")),
            StopState {
                stopped: true,
                stop_pending: false
            }
        );
        // SIGSTOP is signal 19: bit 18.
        assert_eq!(
            read(status("T (stopped)", "0000000000040000")),
            StopState {
                stopped: true,
                stop_pending: true
            }
        );
        // SIGTSTP (20): bit 19.
        assert!(read(status("T (stopped)", "0000000000080000")).stop_pending);
        // Not stopped yet: the pending stop is the hold's own.
        assert_eq!(
            read(status("S (sleeping)", "0000000000040000")),
            StopState {
                stopped: false,
                stop_pending: true
            }
        );
        assert!(
            !read(status("T (stopped)", "0000000000004000")).stop_pending,
            "SIGTERM is no stop"
        );
    }

    #[test]
    fn prefixes_end_at_the_first_wildcard() {
        let patterns = ["libascendcl.so", "libopapi_*.so", "lib?x.so", "*.so"].map(String::from);
        let prefixes = name_prefixes(&patterns);
        for want in ["libascendcl.so", "libopapi_", "lib", ""] {
            assert!(prefixes.contains(want), "{want:?} in {prefixes:?}");
        }
        let long = ["x".repeat(100)];
        assert_eq!(
            name_prefixes(&long).into_iter().next().unwrap().len(),
            HOLD_PREFIX_MAX
        );
    }

    #[test]
    fn opened_libraries_are_resolved_through_the_descriptor() {
        let dir = std::env::temp_dir().join(format!("npu-hold-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("libhccl.so.8");
        fs::write(&path, b"x").unwrap();
        let file = fs::File::open(&path).unwrap();
        let fd = file.as_raw_fd() as u32;
        let found = opened_library(std::process::id(), fd, Catalog::builtin())
            .unwrap()
            .unwrap();
        assert_eq!(found.name, "libhccl.so");
        assert!(
            found
                .path
                .starts_with(format!("/proc/{}/root", std::process::id()))
        );
        let other = dir.join("libc.so.6");
        fs::write(&other, b"x").unwrap();
        let other = fs::File::open(&other).unwrap();
        assert!(
            opened_library(
                std::process::id(),
                other.as_raw_fd() as u32,
                Catalog::builtin()
            )
            .unwrap()
            .is_none()
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
