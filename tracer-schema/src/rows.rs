//! Rows of the output tables, as the correlator produces them and the sinks write them.
//! Column meanings are documented in `docs/schema.md`.
use crate::vocab::{
    CopyKind, EventKind, HcclDataType, KernelType, MarkerKind, MemcpyKind, MemoryKind,
    MemoryOperation, OpKind, ReduceOp, Severity, SyncKind,
};

/// One traced API call: table `api`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ApiRow {
    /// Allocated in the kernel at ENTER, unique in the session.
    pub correlation_id: u64,
    /// The traced call this one is nested in on the same thread (`aclrtMemcpy` for `rtMemcpy`).
    pub parent_correlation_id: Option<u64>,
    /// Layer: `ACL`, `RUNTIME`, `HCCL`, `MSTX` or `DRIVER`.
    pub domain: &'static str,
    /// Function name, e.g. `aclrtMemcpy`.
    pub name: &'static str,
    /// msPTI callback domain (`RUNTIME`/`HCCL`) and id, where msPTI defines one.
    pub mspti_domain: Option<&'static str>,
    pub cbid: Option<u32>,
    /// Library file name the function was traced in, e.g. `libascendcl.so`.
    pub library: &'static str,
    pub pid: u32,
    pub tid: u32,
    /// Nesting depth of traced calls on the thread (0 = outermost).
    pub depth: u8,
    /// CLOCK_MONOTONIC ns at ENTER and EXIT.
    pub start_ns: u64,
    /// None when the call never returned while traced (see `incomplete`).
    pub end_ns: Option<u64>,
    /// The thread or process ended, or tracing stopped, before the call returned.
    pub incomplete: bool,
    /// Return value (error code for `aclError`/`rtError_t`/`HcclResult`), None for void.
    pub return_value: Option<i64>,
    pub args: ApiArgs,
}

/// Typed columns for captured arguments; each catalog entry maps its arguments onto these.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ApiArgs {
    pub device_id: Option<i32>,
    /// Stream handle (`aclrtStream` / `rtStream_t`), or the one created by a create call.
    pub stream: Option<u64>,
    /// Bytes: allocation size, copy or memset length, `destMax` where no count exists.
    pub bytes: Option<u64>,
    /// Element count (HCCL), or other counts the function takes.
    pub count: Option<u64>,
    /// Copy direction, e.g. `HOST_TO_DEVICE`.
    pub memcpy_kind: Option<MemcpyKind>,
    /// Destination / device pointer; for allocations, the pointer returned.
    pub address: Option<u64>,
    /// Source pointer of copies, send buffer of collectives.
    pub src_address: Option<u64>,
    /// memset value; mstx/other scalar values.
    pub value: Option<i64>,
    pub block_dim: Option<u32>,
    /// Opaque handle: function/binary handle, kernel stub, HCCL comm, mstx domain, event.
    pub handle: Option<u64>,
    /// Kernel name, resolved from registration calls or the stub's ELF symbol.
    pub kernel_name: Option<String>,
    /// HCCL data type, e.g. `FP32`.
    pub data_type: Option<HcclDataType>,
    /// HCCL reduce op, e.g. `SUM`.
    pub reduce_op: Option<ReduceOp>,
    /// HCCL root/peer rank, or the rank returned by `HcclGetRankId`.
    pub rank: Option<u32>,
    /// mstx message or other C string argument.
    pub message: Option<String>,
    /// mstx range id (returned by RangeStart, passed to RangeEnd).
    pub range_id: Option<u64>,
    /// The first [`RAW_ARGS`] integer arguments as they were, for functions known only by
    /// name (columns `arg0` .. `arg5`).
    pub raw: Option<[u64; RAW_ARGS]>,
}

/// Integer arguments kept raw for a function known only by name.
pub const RAW_ARGS: usize = 6;

/// One mstx mark or range: table `marker`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MarkerRow {
    pub kind: MarkerKind,
    pub message: String,
    /// mstx domain name; None for the default domain.
    pub domain: Option<String>,
    pub pid: u32,
    pub tid: u32,
    /// Mark time, or range start (CLOCK_MONOTONIC ns).
    pub start_ns: u64,
    /// Range end; equal to start for marks; None when a range never ended.
    pub end_ns: Option<u64>,
    /// Range id; None for marks.
    pub range_id: Option<u64>,
    /// Correlation id of the mstx call that marked or started the range.
    pub correlation_id: u64,
    /// Stream passed with the mark, if any.
    pub stream: Option<u64>,
    /// Thread that ended the range (ranges may end on another thread).
    pub end_tid: Option<u32>,
}

/// Where a device task ran and when, shared by every device activity table. Device
/// times are converted from the device's syscnt to host CLOCK_MONOTONIC ns by the clock
/// model; the raw counts are kept so a dataset can be re-aligned offline.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeviceTask {
    /// The outermost API call that produced the task (joins `api.correlation_id`).
    pub correlation_id: u64,
    /// Process and thread that submitted the task.
    pub pid: u32,
    pub tid: u32,
    pub device_id: u32,
    pub stream_id: u32,
    /// 16-bit per-stream task id (wraps).
    pub task_id: u32,
    /// Device start/end on the host clock (CLOCK_MONOTONIC ns); None when the task never
    /// completed while traced.
    pub start_ns: Option<u64>,
    pub end_ns: Option<u64>,
    /// Raw device syscnt at start/end.
    pub device_start_cnt: Option<u64>,
    pub device_end_cnt: Option<u64>,
    /// Host time the task was handed to the driver (`halSqTaskSend`).
    pub submit_ns: u64,
    /// Error code the device reported in the completion (0 = success); None if none arrived.
    pub status: Option<u32>,
    /// The operator call the task was launched in (joins `op.correlation_id`), and its
    /// operator.
    pub op_correlation_id: Option<u64>,
    pub op_name: Option<&'static str>,
}

/// One operator call: table `op`. The call that ran it (second phase, `aclop` call or model
/// execution) and, for a two-phase operator, the first phase that prepared its executor (none
/// on an executor-cache hit).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OpRow {
    /// The running call (joins `api.correlation_id` and the device rows' `op_correlation_id`).
    pub correlation_id: u64,
    pub name: &'static str,
    pub kind: OpKind,
    /// The running function (`aclnnAdd`) and its library.
    pub api_name: &'static str,
    pub library: &'static str,
    pub pid: u32,
    pub tid: u32,
    pub start_ns: u64,
    pub end_ns: Option<u64>,
    /// The first phase (`aclnnAddGetWorkspaceSize`), when one prepared the executor.
    pub prepare: Option<OpPhase>,
    pub workspace_bytes: Option<u64>,
    pub executor: Option<u64>,
    pub stream: Option<u64>,
    pub return_value: Option<i64>,
}

/// A first phase of an operator call.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct OpPhase {
    pub correlation_id: u64,
    pub api_name: &'static str,
    pub tid: u32,
    pub start_ns: u64,
    pub end_ns: u64,
}

impl OpRow {
    /// Host time of both phases.
    pub fn host_ns(&self) -> Option<u64> {
        let run = self.end_ns?.checked_sub(self.start_ns)?;
        let prepare = self
            .prepare
            .map_or(0, |p| p.end_ns.saturating_sub(p.start_ns));
        Some(run + prepare)
    }
}

/// One kernel execution: table `kernel`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KernelRow {
    pub task: DeviceTask,
    pub name: Option<String>,
    pub kernel_type: KernelType,
    pub block_dim: u32,
    /// The launch API, e.g. `aclrtLaunchKernel`.
    pub api_name: &'static str,
}

/// One device copy: table `memcpy`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemcpyRow {
    pub task: DeviceTask,
    pub copy_kind: CopyKind,
    pub bytes: u64,
    pub is_async: bool,
    /// bytes / device duration, GB/s (10^9 bytes per second).
    pub bandwidth_gbps: Option<f64>,
    pub api_name: &'static str,
}

/// One device memset: table `memset`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemsetRow {
    pub task: DeviceTask,
    pub value: u32,
    pub bytes: u64,
    pub is_async: bool,
    pub api_name: &'static str,
}

/// One synchronization task (event record or wait, notify): table `sync`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SyncRow {
    pub task: DeviceTask,
    pub kind: SyncKind,
    /// The event (or notify) handle the producing call passed, when it passed one.
    pub event: Option<u64>,
    /// The call that produced it, e.g. `aclrtRecordEvent`.
    pub api_name: &'static str,
}

/// One collective or point-to-point operation of one rank: table `hccl`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HcclRow {
    pub task: DeviceTask,
    /// Operation, e.g. `HcclAllReduce`.
    pub name: &'static str,
    /// Communicator handle in this process.
    pub comm: u64,
    /// Name stable across the ranks of a job: communicators numbered in creation order
    /// per process, with the world size (`comm0/2`).
    pub comm_name: Option<String>,
    pub rank: Option<u32>,
    pub world_size: Option<u32>,
    pub data_type: Option<HcclDataType>,
    pub count: Option<u64>,
    pub bytes: Option<u64>,
    pub reduce_op: Option<ReduceOp>,
    /// Root (broadcast/reduce) or peer (send/recv) rank.
    pub peer: Option<u32>,
    /// bytes / device duration, GB/s.
    pub bandwidth_gbps: Option<f64>,
    /// 0, 1, 2, ... per communicator and process: the same collective has the same `seq`
    /// on every rank.
    pub seq: u64,
}

/// One allocation or release: table `memory`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemoryRow {
    /// The outermost API call (e.g. `aclrtMalloc` for the `rtMalloc` inside it).
    pub correlation_id: u64,
    pub pid: u32,
    pub tid: u32,
    pub operation: MemoryOperation,
    pub memory_kind: MemoryKind,
    pub address: u64,
    /// Size; for releases, the size of the allocation released (when it was traced).
    pub bytes: Option<u64>,
    pub device_id: Option<i32>,
    /// The allocation call's host interval.
    pub start_ns: u64,
    pub end_ns: u64,
    /// The runtime call that did it, e.g. `rtMalloc`.
    pub api_name: &'static str,
    pub return_value: i64,
}

/// What the user must know to trust the trace: table `critical_event`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CriticalEventRow {
    pub ts_ns: u64,
    pub kind: EventKind,
    pub severity: Severity,
    pub pid: Option<u32>,
    pub tid: Option<u32>,
    pub device_id: Option<u32>,
    pub correlation_id: Option<u64>,
    /// How many occurrences the row stands for (drops are counted, not listed).
    pub count: u64,
    pub message: String,
}

/// Bandwidth in GB/s (10^9 bytes per second) of `bytes` moved in `ns` nanoseconds: bytes
/// per ns. None for an empty interval.
pub fn bandwidth_gbps(bytes: u64, ns: u64) -> Option<f64> {
    (ns > 0).then(|| bytes as f64 / ns as f64)
}
