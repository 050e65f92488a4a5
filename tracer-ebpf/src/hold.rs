//! Holding a process at its first open of a library file the agent has not attached yet,
//! so that a process with its own copy of the CANN libraries (a container) is traced from
//! its first call.
//!
//! Uprobes belong to a file (an inode): probes on the host's `libascendcl.so` apply to
//! every process that maps that file, but not to a container's copy of it. The dynamic
//! loader opens a library before it maps it and runs none of its code until every library
//! is mapped, so the open is early enough: at `openat`'s entry the file's base name is
//! compared with the literal prefixes of the catalog's library names (`HOLD_PREFIXES`,
//! filled by the agent); at its return, when it succeeded and the path has not been seen in
//! that mount namespace before (`HOLD_KNOWN`), the process is stopped (`SIGSTOP` from its
//! own context, before it returns to user space) and the agent is told (`HOLDS`). The agent
//! resolves the file through `/proc/PID/fd`, attaches the catalog's probes to it (uprobes
//! also apply to mappings that exist already), remembers the path and continues the
//! process. The exact name check is the agent's: the prefixes only keep everything else
//! from being stopped.
use aya_ebpf::{
    bindings::BPF_RB_FORCE_WAKEUP,
    helpers::{
        bpf_ktime_get_ns,
        generated::{
            bpf_get_current_task, bpf_probe_read_kernel, bpf_probe_read_user_str, bpf_send_signal,
        },
    },
    macros::{map, tracepoint},
    maps::{Array, HashMap, LruHashMap, PerCpuArray, RingBuf},
    programs::TracePointContext,
};
use core::ffi::c_void;
use tracer_common::{
    FNV_OFFSET, HOLD_ABSOLUTE, HOLD_PATH_LEN, HOLD_PREFIX_MAX, HOLD_STAT_COUNT, HOLD_STAT_HELD,
    HOLD_STAT_MISSED, Held, HoldConfig, HoldEvent, HoldKnown, MAX_HELD, MAX_HOLD_KNOWN,
    MAX_THREADS, fnv_step,
};

use crate::maps::{current_ids, for_each, is_traced};

/// Switches and kernel offsets (index 0).
#[map]
static HOLD_CONFIG: Array<HoldConfig> = Array::with_max_entries(1, 0);

/// FNV-1a hashes of the literal prefixes of the catalog's library names and patterns.
#[map]
static HOLD_PREFIXES: HashMap<u64, u8> = HashMap::with_max_entries(1024, 0);

/// Paths already seen per mount namespace: their opens are not held again. LRU: a path
/// forgotten is held once more, nothing worse.
#[map]
static HOLD_KNOWN: LruHashMap<HoldKnown, u8> = LruHashMap::with_max_entries(MAX_HOLD_KNOWN, 0);

/// Opens in flight whose file may have to be held at their return, by tid.
#[map]
static HOLD_OPENING: LruHashMap<u32, HoldEvent> = LruHashMap::with_max_entries(MAX_THREADS, 0);

/// Threads whose open stopped their process, until the agent (or its watchdog) continues
/// it. Whoever deletes an entry continues the process: deletion happens once.
#[map]
static HELD: HashMap<u32, Held> = HashMap::with_max_entries(MAX_HELD, 0);

/// Hold events to the agent, each woken at once: a held process waits for it.
#[map]
static HOLDS: RingBuf = RingBuf::with_byte_size(64 << 10, 0);

/// Per-CPU counters, indexed by `HOLD_STAT_*`.
#[map]
static HOLD_STATS: PerCpuArray<u64> = PerCpuArray::with_max_entries(HOLD_STAT_COUNT, 0);

/// The path being looked at, and what the loops over it found.
#[derive(Clone, Copy)]
pub(crate) struct PathScan {
    path: [u8; HOLD_PATH_LEN],
    /// Bytes in `path`, without the NUL.
    len: u32,
    /// Where the base name begins.
    base: u32,
    hash: u64,
    prefix_hash: u64,
    prefix_lengths: u64,
    matched: u32,
    _pad: u32,
}

/// Per-CPU: the path the loop callbacks walk.
#[map]
static HOLD_SCAN: PerCpuArray<PathScan> = PerCpuArray::with_max_entries(1, 0);

const SIGSTOP: u32 = 19;
const O_ACCMODE: u64 = 3;
/// `O_PATH` (the same value on x86-64 and arm64): no mapping comes of such an fd.
const O_PATH: u64 = 0o10_000_000;

#[tracepoint]
pub(crate) fn hold_open_enter(ctx: TracePointContext) -> u32 {
    let Some(cfg) = HOLD_CONFIG.get(0).copied() else {
        return 0;
    };
    let (tgid, tid) = current_ids();
    if cfg.enabled == 0 || !is_traced(tgid) || tgid == agent_pid() {
        return 0;
    }
    // SAFETY: the offsets come from the tracepoint's format file.
    let (Ok(filename), Ok(flags)) = (
        unsafe { ctx.read_at::<u64>(cfg.filename_offset.into()) },
        unsafe { ctx.read_at::<u64>(cfg.flags_offset.into()) },
    ) else {
        return 0;
    };
    // A loader opens libraries to read them; writers (a copy, a linker) are no loaders.
    if flags & O_ACCMODE != 0 || flags & O_PATH != 0 {
        return 0;
    }
    let Some(scan) = read_path(filename, cfg.prefix_lengths) else {
        return 0;
    };
    // SAFETY: a per-CPU map value, valid for this program run.
    let (matched, hash, absolute) =
        unsafe { ((*scan).matched, (*scan).hash, (*scan).path[0] == b'/') };
    if matched == 0 {
        return 0;
    }
    // u64::MAX: unknown, nothing is remembered for it.
    let mnt_ns = if cfg.use_known != 0 {
        mount_ns(&cfg)
    } else {
        u64::MAX
    };
    if absolute && mnt_ns != u64::MAX {
        let key = HoldKnown {
            mnt_ns,
            path_hash: hash,
        };
        if HOLD_KNOWN.get_ptr(key).is_some() {
            return 0;
        }
    }
    let event = HoldEvent {
        ts_ns: 0,
        tgid,
        tid,
        fd: 0,
        flags: if absolute { HOLD_ABSOLUTE } else { 0 },
        mnt_ns,
        path_hash: hash,
    };
    let _ = HOLD_OPENING.insert(tid, event, 0);
    0
}

#[tracepoint]
pub(crate) fn hold_open_exit(ctx: TracePointContext) -> u32 {
    let (_, tid) = current_ids();
    let Some(opening) = HOLD_OPENING.get_ptr(tid) else {
        return 0;
    };
    // SAFETY: a map value pointer, valid for this program run; copied before the removal.
    let mut event = unsafe { *opening };
    let _ = HOLD_OPENING.remove(tid);
    let Some(cfg) = HOLD_CONFIG.get(0).copied() else {
        return 0;
    };
    // SAFETY: the offset comes from the tracepoint's format file.
    let Ok(ret) = (unsafe { ctx.read_at::<i64>(cfg.ret_offset.into()) }) else {
        return 0;
    };
    if ret < 0 || cfg.enabled == 0 {
        return 0;
    }
    // SAFETY: a helper without arguments that only reads the clock.
    event.ts_ns = unsafe { bpf_ktime_get_ns() };
    event.fd = ret as u32;
    hold(&event);
    0
}

/// Stops the current process and tells the agent, or neither: a process is never stopped
/// without a `HELD` entry and an event, so that someone continues it.
#[inline(always)]
fn hold(event: &HoldEvent) {
    let Some(mut entry) = HOLDS.reserve::<HoldEvent>(0) else {
        count(HOLD_STAT_MISSED);
        return;
    };
    let held = Held {
        tgid: event.tgid,
        _pad: 0,
        ts_ns: event.ts_ns,
    };
    if HELD.insert(event.tid, held, 0).is_err() {
        entry.discard(0);
        count(HOLD_STAT_MISSED);
        return;
    }
    // SAFETY: sends a signal to the current process only.
    if unsafe { bpf_send_signal(SIGSTOP) } != 0 {
        let _ = HELD.remove(event.tid);
        entry.discard(0);
        count(HOLD_STAT_MISSED);
        return;
    }
    entry.write(*event);
    entry.submit(u64::from(BPF_RB_FORCE_WAKEUP));
    count(HOLD_STAT_HELD);
}

/// Reads the path at `filename` into [`HOLD_SCAN`], hashes it and compares its base name's
/// prefixes with [`HOLD_PREFIXES`].
#[inline(always)]
fn read_path(filename: u64, prefix_lengths: u64) -> Option<*mut PathScan> {
    let scan = HOLD_SCAN.get_ptr_mut(0)?;
    // SAFETY: a per-CPU map value, valid for this program run; the helper writes at most
    // `HOLD_PATH_LEN` bytes into `path` and faults safely on bad user memory.
    let len = unsafe {
        bpf_probe_read_user_str(
            (*scan).path.as_mut_ptr().cast(),
            HOLD_PATH_LEN as u32,
            filename as *const c_void,
        )
    };
    if len <= 1 {
        return None;
    }
    // SAFETY: as above.
    unsafe {
        (*scan).len = (len - 1) as u32;
        (*scan).base = 0;
        (*scan).hash = FNV_OFFSET;
        (*scan).prefix_hash = FNV_OFFSET;
        (*scan).prefix_lengths = prefix_lengths;
        (*scan).matched = u32::from(prefix_lengths & 1 != 0);
    }
    for_each(HOLD_PATH_LEN as u32, path_byte);
    for_each(HOLD_PREFIX_MAX as u32, base_byte);
    Some(scan)
}

/// `bpf_loop` callback: hashes byte `i` of the path and notes where the base name begins.
extern "C" fn path_byte(i: u32, _ctx: *mut c_void) -> i64 {
    let Some(scan) = HOLD_SCAN.get_ptr_mut(0) else {
        return 1;
    };
    // SAFETY: a per-CPU map value, valid for this program run.
    let scan = unsafe { &mut *scan };
    if i >= scan.len {
        return 1;
    }
    let byte = scan.path[i as usize & (HOLD_PATH_LEN - 1)];
    if byte == b'/' {
        scan.base = i + 1;
    }
    scan.hash = fnv_step(scan.hash, byte);
    0
}

/// `bpf_loop` callback: adds byte `i` of the base name to its prefix hash and looks the
/// prefix of `i + 1` bytes up when the catalog has prefixes of that length.
extern "C" fn base_byte(i: u32, _ctx: *mut c_void) -> i64 {
    let Some(scan) = HOLD_SCAN.get_ptr_mut(0) else {
        return 1;
    };
    // SAFETY: a per-CPU map value, valid for this program run.
    let scan = unsafe { &mut *scan };
    let at = scan.base.wrapping_add(i);
    if scan.matched != 0 || at >= scan.len {
        return 1;
    }
    let byte = scan.path[at as usize & (HOLD_PATH_LEN - 1)];
    scan.prefix_hash = fnv_step(scan.prefix_hash, byte);
    let length = i + 1;
    if length < 64
        && scan.prefix_lengths & (1 << length) != 0
        && HOLD_PREFIXES.get_ptr(scan.prefix_hash).is_some()
    {
        scan.matched = 1;
    }
    0
}

/// The current task's mount namespace as a key of [`HOLD_KNOWN`], through the offsets the
/// agent read from the kernel's BTF: 0 for the agent's own namespace, else the namespace's
/// id that is never reused (an inode number is, once its namespace is gone, and a path
/// seen in a dead container must not pass for one in a new container). `u64::MAX` when a
/// read fails: such a process is held at every open of a library name.
#[inline(always)]
fn mount_ns(cfg: &HoldConfig) -> u64 {
    // SAFETY: a helper without arguments; the result is only read through
    // bpf_probe_read_kernel, which faults safely.
    let task = unsafe { bpf_get_current_task() };
    let Some(mnt_ns) = kernel_read::<u64>(task, cfg.nsproxy_offset)
        .and_then(|nsproxy| kernel_read::<u64>(nsproxy, cfg.mnt_ns_offset))
    else {
        return u64::MAX;
    };
    match kernel_read::<u32>(mnt_ns, cfg.ns_inum_offset) {
        Some(inum) if inum == cfg.agent_mnt_ns => 0,
        Some(_) => kernel_read::<u64>(mnt_ns, cfg.ns_id_offset).unwrap_or(u64::MAX),
        None => u64::MAX,
    }
}

/// Reads a `T` at `base + offset` in kernel memory.
#[inline(always)]
fn kernel_read<T: crate::maps::Plain>(base: u64, offset: u32) -> Option<T> {
    if base == 0 {
        return None;
    }
    let mut value = T::ZERO;
    // SAFETY: `value` is a writable `T`; the helper copies `size_of::<T>()` bytes into it
    // and faults safely on a bad kernel address.
    let rc = unsafe {
        bpf_probe_read_kernel(
            (&raw mut value).cast(),
            core::mem::size_of::<T>() as u32,
            base.wrapping_add(u64::from(offset)) as *const c_void,
        )
    };
    (rc == 0).then_some(value)
}

/// The agent's own process, which is never held.
#[inline(always)]
fn agent_pid() -> u32 {
    crate::maps::config().agent_pid
}

#[inline(always)]
fn count(stat: u32) {
    if let Some(counter) = HOLD_STATS.get_ptr_mut(stat) {
        // SAFETY: per-CPU slot; tracepoint programs run with preemption disabled.
        unsafe { *counter += 1 };
    }
}
