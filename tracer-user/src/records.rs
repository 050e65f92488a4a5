//! Rows of the output tables, as the correlator produces them and the sinks write them.
//! Column meanings are documented in `docs/schema.md`.

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
    pub memcpy_kind: Option<&'static str>,
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
    pub data_type: Option<&'static str>,
    /// HCCL reduce op, e.g. `SUM`.
    pub reduce_op: Option<&'static str>,
    /// HCCL root/peer rank, or the rank returned by `HcclGetRankId`.
    pub rank: Option<u32>,
    /// mstx message or other C string argument.
    pub message: Option<String>,
    /// mstx range id (returned by RangeStart, passed to RangeEnd).
    pub range_id: Option<u64>,
}

/// One mstx mark or range: table `marker`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MarkerRow {
    /// `mark` (instantaneous) or `range`.
    pub kind: &'static str,
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
