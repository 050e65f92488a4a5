//! BPF maps shared with the agent, and helpers that wrap their use.
use core::ffi::c_void;

use aya_ebpf::{
    bindings::{BPF_RB_AVAIL_DATA, BPF_RB_FORCE_WAKEUP, BPF_RB_NO_WAKEUP},
    helpers::{bpf_get_current_pid_tgid, bpf_get_smp_processor_id, generated},
    macros::map,
    maps::{Array, HashMap, LruHashMap, PerCpuArray, RingBuf},
};
use tracer_common::{
    CaptureMatch, CaptureState, Config, DeviceLayout, DropKind, MAX_PROBES, MAX_SCANNED_CALLS,
    MAX_TARGETS, MAX_TASKS, MAX_THREADS, PendingTask, ProbeSpec, ScannedCall, TEXT_LEN, TaskKey,
    ThreadState,
};

/// Records to the agent. The agent may resize it before load.
#[map]
pub(crate) static EVENTS: RingBuf = RingBuf::with_byte_size(8 << 20, 0);

/// Per-thread call stacks, keyed by tid.
#[map]
pub(crate) static THREADS: HashMap<u32, ThreadState> = HashMap::with_max_entries(MAX_THREADS, 0);

/// What to capture for each catalog entry, indexed by probe id (the attach cookie).
#[map]
pub(crate) static PROBE_SPECS: Array<ProbeSpec> = Array::with_max_entries(MAX_PROBES, 0);

/// The integer arguments of calls in flight whose returns read through them
/// (`SPEC_OUT_SCAN`), with what they pointed at on entry, by correlation id. LRU: a call whose return is never seen (a thread
/// killed inside it) does not hold its slot.
#[map]
pub(crate) static SCANNED_ARGS: LruHashMap<u64, ScannedCall> =
    LruHashMap::with_max_entries(MAX_SCANNED_CALLS, 0);

/// Per-CPU room to build a [`SCANNED_ARGS`] value in.
#[map]
pub(crate) static SCAN_SCRATCH: PerCpuArray<ScannedCall> = PerCpuArray::with_max_entries(1, 0);

/// Calls `round(i, NULL)` for `i` in `0..rounds` until it returns 1, through `bpf_loop`
/// (Linux 5.17). The verifier checks `round` once; an open-coded loop it checks round by
/// round, and Linux 6.1's verifier gives up on ours (too many instructions, or a false
/// "infinite loop detected"). What a round needs it reads from a per-CPU map: the BPF
/// stack has no room to pass it.
#[inline(always)]
pub(crate) fn for_each(rounds: u32, round: extern "C" fn(u32, *mut c_void) -> i64) {
    // SAFETY: `round` is a BPF subprogram with the callback signature `bpf_loop` expects
    // and takes no context pointer.
    unsafe {
        generated::bpf_loop(rounds, round as *mut c_void, core::ptr::null_mut(), 0);
    }
}

/// SQEs handed to the driver by one call (`tasks`), walked by a `bpf_loop` callback.
#[derive(Clone, Copy)]
pub(crate) struct SqeBatch {
    pub device_id: u32,
    pub sq_id: u32,
    /// The first SQE in the caller's memory.
    pub sqes: u64,
    pub count: u32,
    /// `TASK_FILLED` for a model stream's SQEs, loaded to run later; else 0.
    pub fill: u8,
    /// What each task's `TaskInfo::flags` gets.
    pub task_flags: u8,
    /// The outermost call in flight that submitted them.
    pub correlation_id: u64,
    pub tgid: u32,
    pub tid: u32,
    pub ts_ns: u64,
    /// Room for the task of the SQE at hand and its `TASKS` key: the callback's stack adds
    /// to the enter program's, and together they must fit the BPF stack's 512 bytes.
    pub task: PendingTask,
    pub key: TaskKey,
}

/// Per-CPU: the SQE batch being walked.
#[map]
pub(crate) static SQE_BATCH: PerCpuArray<SqeBatch> = PerCpuArray::with_max_entries(1, 0);

/// CQEs the driver returned to one call (`tasks`), walked by a `bpf_loop` callback.
#[derive(Clone, Copy)]
pub(crate) struct CqeBatch {
    /// The first CQE in the caller's memory.
    pub cqes: u64,
    pub count: u32,
    pub device_id: u32,
    pub tgid: u32,
    pub tid: u32,
    pub ts_ns: u64,
}

/// Per-CPU: the CQE batch being walked.
#[map]
pub(crate) static CQE_BATCH: PerCpuArray<CqeBatch> = PerCpuArray::with_max_entries(1, 0);

/// A copy of user memory being sent in pieces (`pieces`): the `bpf_loop` callbacks that
/// send them find it here.
#[derive(Clone, Copy)]
pub(crate) struct PieceCopy {
    /// Where the bytes are in the traced process.
    pub src: u64,
    /// Bytes to copy.
    pub total: u32,
    /// The device a channel read came from.
    pub device_id: u32,
    /// The whole length of a device binary (`total` may be cut short).
    pub length: u64,
    /// The registration a device binary belongs to.
    pub correlation_id: u64,
    pub tgid: u32,
    pub tid: u32,
    pub ts_ns: u64,
}

/// Per-CPU: the copy the `pieces` loop callbacks are sending.
#[map]
pub(crate) static PIECE_COPY: PerCpuArray<PieceCopy> = PerCpuArray::with_max_entries(1, 0);

/// Processes to trace when `Config::filter_targets` is set, keyed by tgid.
#[map]
pub(crate) static TARGETS: HashMap<u32, u8> = HashMap::with_max_entries(MAX_TARGETS, 0);

#[map]
pub(crate) static CONFIG: Array<Config> = Array::with_max_entries(1, 0);

/// The message of the mstx ranges that open capture windows (index 0).
#[map]
pub(crate) static CAPTURE_MATCH: Array<CaptureMatch> = Array::with_max_entries(1, 0);

/// Per process (tgid): its mstx capture window, when `Config::capture_mstx` is set.
#[map]
pub(crate) static CAPTURE: HashMap<u32, CaptureState> = HashMap::with_max_entries(MAX_TARGETS, 0);

/// A zeroed [`CaptureState`], what a process's first window starts from.
#[map]
pub(crate) static CAPTURE_ZERO: Array<CaptureState> = Array::with_max_entries(1, 0);

/// Per-CPU room for a range start's message, to compare with [`CAPTURE_MATCH`].
#[map]
pub(crate) static CAPTURE_TEXT: PerCpuArray<[u8; TEXT_LEN]> = PerCpuArray::with_max_entries(1, 0);

/// Offsets of the driver's SQ/CQ structures (index 0), from the probe catalog's description
/// of the chip the driver reports.
#[map]
pub(crate) static LAYOUT: Array<DeviceLayout> = Array::with_max_entries(1, 0);

/// Submitted device tasks awaiting their completion.
#[map]
pub(crate) static TASKS: HashMap<TaskKey, PendingTask> = HashMap::with_max_entries(MAX_TASKS, 0);

/// Per-CPU loss counters indexed by [`DropKind`]; the kernel does not count ring-buffer loss.
#[map]
pub(crate) static DROPS: PerCpuArray<u64> = PerCpuArray::with_max_entries(DropKind::COUNT, 0);

/// Per-CPU sequence behind correlation ids.
#[map]
static SEQ: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

/// Unread bytes past which a submit wakes the agent. Below it, records wait for the agent's
/// periodic poll: a wakeup per record is an interrupt per traced call, which on a VM costs
/// more than the probe's own work.
const WAKEUP_BYTES: u64 = 256 * 1024;

/// Flags for submitting a record to [`EVENTS`]: wake the agent only when data piles up.
#[inline(always)]
pub(crate) fn submit_flags() -> u64 {
    if EVENTS.query(u64::from(BPF_RB_AVAIL_DATA)) >= WAKEUP_BYTES {
        u64::from(BPF_RB_FORCE_WAKEUP)
    } else {
        u64::from(BPF_RB_NO_WAKEUP)
    }
}

/// The current task as (tgid, tid).
#[inline(always)]
pub(crate) fn current_ids() -> (u32, u32) {
    let pid_tgid = bpf_get_current_pid_tgid();
    ((pid_tgid >> 32) as u32, pid_tgid as u32)
}

#[inline(always)]
pub(crate) fn config() -> Config {
    CONFIG.get(0).copied().unwrap_or_default()
}

/// Whether calls of process `tgid` are traced.
#[inline(always)]
pub(crate) fn is_traced(tgid: u32) -> bool {
    // SAFETY: map value pointer valid for this program run (read in place, not copied).
    CONFIG
        .get_ptr(0)
        .is_none_or(|c| unsafe { (*c).filter_targets == 0 })
        || TARGETS.get_ptr(tgid).is_some()
}

/// Whether an outermost call of process `tgid` that begins now is recorded: recording is not
/// paused and, with an mstx capture range, the process's window is open. Reads the map value
/// in place: a copy of `Config` costs stack the enter program does not have.
#[inline(always)]
pub(crate) fn window_open(tgid: u32) -> bool {
    let Some(cfg) = CONFIG.get_ptr(0) else {
        return true;
    };
    // SAFETY: map value pointers valid for this program run.
    unsafe {
        (*cfg).paused == 0
            && ((*cfg).capture_mstx == 0 || CAPTURE.get_ptr(tgid).is_some_and(|s| (*s).open != 0))
    }
}

#[inline(always)]
pub(crate) fn count_drop(kind: DropKind) {
    if let Some(counter) = DROPS.get_ptr_mut(kind as u32) {
        // SAFETY: per-CPU slot; uprobe BPF programs run with preemption disabled.
        unsafe { *counter += 1 };
    }
}

/// A session-unique id without atomics (the BPF target has no compare-and-swap):
/// the CPU number in the top 16 bits, a per-CPU sequence below.
#[inline(always)]
pub(crate) fn next_correlation_id() -> u64 {
    // SAFETY: helper without preconditions.
    let cpu = unsafe { bpf_get_smp_processor_id() } as u64;
    let Some(seq) = SEQ.get_ptr_mut(0) else {
        return 0;
    };
    // SAFETY: per-CPU slot; uprobe BPF programs run with preemption disabled.
    let next = unsafe {
        *seq += 1;
        *seq
    };
    ((cpu + 1) << 48) | (next & ((1 << 48) - 1))
}

/// A value [`read`] can fetch (integers, byte arrays): all bit patterns valid.
pub(crate) trait Plain: Copy {
    const ZERO: Self;
}

macro_rules! plain {
    ($($t:ty),*) => { $(impl Plain for $t { const ZERO: Self = 0; })* };
}
plain!(u8, u16, u32, u64);

impl<const N: usize> Plain for [u8; N] {
    const ZERO: Self = [0; N];
}

/// Reads a `T` at `base + offset` in user memory. The value starts as zero, not uninit: an
/// uninit value on a failed read lets LLVM move an undefined register, which the verifier
/// refuses ("R9 !read_ok").
#[inline(always)]
pub(crate) fn read<T: Plain>(base: u64, offset: u16) -> Option<T> {
    let mut value = T::ZERO;
    let ptr = base.wrapping_add(u64::from(offset)) as *const c_void;
    // SAFETY: `value` is a writable `T`; the helper copies at most `size_of::<T>()` bytes
    // into it and faults safely on bad user pointers.
    let rc = unsafe {
        generated::bpf_probe_read_user(
            (&raw mut value).cast(),
            core::mem::size_of::<T>() as u32,
            ptr,
        )
    };
    (rc == 0).then_some(value)
}
