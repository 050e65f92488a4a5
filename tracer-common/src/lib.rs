//! Types shared by `tracer-ebpf` (kernel side) and `npu-bpftrace` (agent).
//!
//! Every record that crosses the ring buffer starts with a [`RecordHeader`]; its `kind`
//! byte says which struct follows. Layouts are `#[repr(C)]` and checked by the tests
//! below so both sides agree byte for byte.
#![no_std]

/// Integer arguments captured at ENTER. x86-64 passes six in registers and the rest on
/// the stack (read there); arm64 passes eight in registers. HCCL calls take up to eight.
pub const MAX_ARGS: usize = 8;
/// Bytes of a C string argument (kernel name, marker message) copied at ENTER.
pub const TEXT_LEN: usize = 64;
/// Nested traced calls remembered per thread (acl -> rt -> hal is 3 deep).
pub const MAX_DEPTH: usize = 8;
/// Functions the BPF side can describe: probe ids (attach cookies, handed out as library
/// files are attached) index the [`ProbeSpec`] array `PROBE_SPECS`, 8 bytes each (256 KiB).
pub const MAX_PROBES: u32 = 32_768;
/// Threads with a traced call in flight at once.
pub const MAX_THREADS: u32 = 65_536;
/// `ProbeSpec` fields that name no argument.
pub const NO_ARG: u8 = 0xff;

/// What follows the header in a ring-buffer record.
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordKind {
    /// A traced function was entered: [`ApiEnter`].
    ApiEnter = 1,
    /// A traced function returned: [`ApiExit`].
    ApiExit = 2,
    /// A thread that had traced state exited: [`RecordHeader`] alone.
    ThreadExit = 3,
    /// A device task completed: [`TaskComplete`].
    TaskComplete = 4,
    /// A device task was handed to the driver: [`TaskSubmit`].
    TaskSubmit = 5,
    /// Profiling-channel bytes another profiler read: [`ChannelData`].
    ChannelData = 6,
    /// Bytes of a device binary being registered: [`BinaryPiece`].
    BinaryPiece = 7,
    /// What the integer arguments of a returning call pointed at: [`OutScan`].
    OutScan = 8,
    /// An mstx range opened or closed a process's capture window: [`WindowEdge`].
    Window = 9,
}

impl RecordKind {
    pub fn from_u8(v: u8) -> Option<Self> {
        match v {
            1 => Some(Self::ApiEnter),
            2 => Some(Self::ApiExit),
            3 => Some(Self::ThreadExit),
            4 => Some(Self::TaskComplete),
            5 => Some(Self::TaskSubmit),
            6 => Some(Self::ChannelData),
            7 => Some(Self::BinaryPiece),
            8 => Some(Self::OutScan),
            9 => Some(Self::Window),
            _ => None,
        }
    }
}

/// Counters of what the BPF side could not deliver, indexed in the per-CPU `DROPS` map.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropKind {
    /// Ring buffer full: an ENTER record was lost.
    ApiEnter = 0,
    /// Ring buffer full: an EXIT record was lost.
    ApiExit = 1,
    /// Ring buffer full: a thread-exit record was lost.
    ThreadExit = 2,
    /// Calls nested deeper than [`MAX_DEPTH`]; the call was not traced.
    StackOverflow = 3,
    /// The per-thread state map was full; the call was not traced.
    ThreadMapFull = 4,
    /// Ring buffer full: a task completion was lost.
    TaskComplete = 5,
    /// The submitted-task map was full; a task will complete without its API call.
    TaskMapFull = 6,
    /// Ring buffer full: a task submission was lost (its device records go unattributed).
    TaskSubmit = 7,
    /// A `halTaskSendInfo` (SQE address, count) could not be read: its tasks are untraced.
    SendInfoRead = 8,
    /// An SQE header could not be read: that task and the rest of the batch are untraced.
    SqeRead = 9,
    /// A `halReportRecvInfo` (CQE address, count) could not be read: completions lost.
    RecvInfoRead = 10,
    /// A CQE's stream or task id could not be read: that completion is lost.
    CqeRead = 11,
    /// A C string argument could not be read: the row lacks its text.
    TextRead = 12,
    /// An out-parameter could not be read at return: the row lacks its value.
    OutRead = 13,
    /// Arguments passed on the stack could not be read: they read as 0.
    StackArgsRead = 14,
    /// A function handle matched no known layout (its name's length disagreed): the row
    /// has no kernel name.
    HandleLayout = 15,
    /// Ring buffer full: profiling-channel bytes another profiler read were lost (the
    /// records in them are missing; their tasks go untimed).
    ChannelData = 16,
    /// The buffer another profiler read the profiling channel into could not be read.
    ChannelDataRead = 17,
    /// Ring buffer full: part of a device binary being registered was lost (its kernels
    /// may go unnamed).
    BinaryPiece = 18,
    /// A device binary being registered could not be read.
    BinaryRead = 19,
}

impl DropKind {
    pub const COUNT: u32 = 20;
    pub const ALL: [DropKind; Self::COUNT as usize] = [
        Self::ApiEnter,
        Self::ApiExit,
        Self::ThreadExit,
        Self::StackOverflow,
        Self::ThreadMapFull,
        Self::TaskComplete,
        Self::TaskMapFull,
        Self::TaskSubmit,
        Self::SendInfoRead,
        Self::SqeRead,
        Self::RecvInfoRead,
        Self::CqeRead,
        Self::TextRead,
        Self::OutRead,
        Self::StackArgsRead,
        Self::HandleLayout,
        Self::ChannelData,
        Self::ChannelDataRead,
        Self::BinaryPiece,
        Self::BinaryRead,
    ];

    /// A user-memory read that failed (the record is kept, a value in it is missing or
    /// a device task goes untraced), as opposed to a record or call that was lost.
    pub const fn is_read_failure(self) -> bool {
        matches!(
            self,
            Self::SendInfoRead
                | Self::SqeRead
                | Self::RecvInfoRead
                | Self::CqeRead
                | Self::TextRead
                | Self::OutRead
                | Self::StackArgsRead
                | Self::HandleLayout
                | Self::ChannelDataRead
                | Self::BinaryRead
        )
    }

    pub const fn name(self) -> &'static str {
        match self {
            Self::ApiEnter => "ringbuf_full_api_enter",
            Self::ApiExit => "ringbuf_full_api_exit",
            Self::ThreadExit => "ringbuf_full_thread_exit",
            Self::StackOverflow => "call_stack_overflow",
            Self::ThreadMapFull => "thread_map_full",
            Self::TaskComplete => "ringbuf_full_task_complete",
            Self::TaskMapFull => "task_map_full",
            Self::TaskSubmit => "ringbuf_full_task_submit",
            Self::SendInfoRead => "read_failed_send_info",
            Self::SqeRead => "read_failed_sqe",
            Self::RecvInfoRead => "read_failed_recv_info",
            Self::CqeRead => "read_failed_cqe",
            Self::TextRead => "read_failed_text",
            Self::OutRead => "read_failed_out_param",
            Self::StackArgsRead => "read_failed_stack_args",
            Self::HandleLayout => "read_failed_handle_layout",
            Self::ChannelData => "ringbuf_full_channel_data",
            Self::ChannelDataRead => "read_failed_channel_data",
            Self::BinaryPiece => "ringbuf_full_binary",
            Self::BinaryRead => "read_failed_binary",
        }
    }
}

/// First bytes of every ring-buffer record; built only by [`RecordHeader::new`].
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct RecordHeader {
    /// A [`RecordKind`].
    pub kind: u8,
    /// Call depth on this thread at ENTER/EXIT (0 = outermost traced call).
    pub depth: u8,
    /// Probe id of the probed function (the attach cookie; the agent's probe table says
    /// which function it is).
    pub probe: u16,
    /// Thread group id (the process id users see).
    pub pid: u32,
    /// Kernel thread id.
    pub tid: u32,
    /// Private, so that every header is built by [`RecordHeader::new`].
    _pad: u32,
    /// `bpf_ktime_get_ns()`: CLOCK_MONOTONIC nanoseconds.
    pub ts_ns: u64,
}

impl RecordHeader {
    /// The header of a record of `kind` about `probe` at call depth `depth`.
    #[inline(always)]
    pub const fn new(
        kind: RecordKind,
        probe: u16,
        depth: u8,
        pid: u32,
        tid: u32,
        ts_ns: u64,
    ) -> Self {
        Self {
            kind: kind as u8,
            depth,
            probe,
            pid,
            tid,
            _pad: 0,
            ts_ns,
        }
    }
}

/// ENTER of a traced call.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ApiEnter {
    pub header: RecordHeader,
    /// Allocated in the kernel, unique in a session: `(cpu + 1) << 48 | per-cpu sequence`.
    pub correlation_id: u64,
    /// The call this one is nested in on the same thread, 0 when outermost.
    pub parent_correlation_id: u64,
    /// Raw integer-register arguments.
    pub args: [u64; MAX_ARGS],
    /// Bytes of `text` that are valid (the C string, without its NUL).
    pub text_len: u32,
    pub _pad: u32,
    /// The C string named by [`ProbeSpec::text_arg`].
    pub text: [u8; TEXT_LEN],
}

/// EXIT of a traced call.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiExit {
    pub header: RecordHeader,
    pub correlation_id: u64,
    /// Raw return register.
    pub ret: u64,
    /// Value read at EXIT through the out-parameter pointer of [`ProbeSpec::out_arg`].
    pub out_value: u64,
    /// [`EXIT_OUT_VALID`] when `out_value` was read.
    pub flags: u32,
    pub _pad: u32,
}

/// `ApiExit::flags`: the out-parameter was read.
pub const EXIT_OUT_VALID: u32 = 1;

/// The 8-byte values the integer arguments of a returning call pointed at, for a function
/// whose out-parameters sit at positions the catalog cannot know ([`SPEC_OUT_SCAN`]: an
/// `aclnnXxxGetWorkspaceSize`, whose last two parameters are its out-parameters). Sent just
/// before the call's [`ApiExit`].
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct OutScan {
    pub header: RecordHeader,
    pub correlation_id: u64,
    /// `values[i]`: what integer argument `i` pointed at, when bit `i` of `valid` is set (an
    /// argument that is not a readable pointer gives nothing).
    pub values: [u64; SCAN_ARGS],
    pub valid: u32,
    /// Bit `i`: `values[i]` differs from what argument `i` pointed at when the call entered
    /// (or that was unreadable then), i.e. the call wrote it. An out-parameter the function
    /// fills is written; stack slots past its last parameter (its caller's data) rarely are.
    pub written: u32,
}

/// A [`SPEC_OUT_SCAN`] call in flight (BPF map `SCANNED_ARGS`): its integer arguments and
/// what they pointed at when it entered, compared with what they point at on return.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ScannedCall {
    pub args: [u64; SCAN_ARGS],
    /// `before[i]`: what `args[i]` pointed at on entry, when bit `i` of `before_valid` is set.
    pub before: [u64; SCAN_ARGS],
    pub before_valid: u32,
    pub _pad: u32,
}

/// What the generic probes capture for one catalog entry (BPF map `PROBE_SPECS`, index = probe id).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeSpec {
    /// Argument holding a `const char *` to copy at ENTER, or [`NO_ARG`].
    pub text_arg: u8,
    /// Argument holding a pointer whose pointee is read at EXIT, or [`NO_ARG`].
    pub out_arg: u8,
    /// Bytes read through `out_arg` (1..=8).
    pub out_size: u8,
    /// [`TEXT_FUNC_HANDLE`]: `text_arg` is a function handle, named through the handle
    /// layout of [`DeviceLayout`]; [`TEXT_RAW`]: it points to bytes copied as they are.
    pub text_flags: u8,
    /// [`SPEC_RANGE_END`]: the argument holding the range id, else [`NO_ARG`].
    pub range_id_arg: u8,
    /// An argument past the first [`MAX_ARGS`] (below [`SCAN_ARGS`]) read from the stack at
    /// ENTER into slot [`FAR_ARG_SLOT`] in place of the argument there, or [`NO_ARG`]
    /// (`aclopCompileAndExecuteV2`'s stream is its twelfth).
    pub far_arg: u8,
    /// A [`ProbeRole`] as u8: what else the probe does besides ENTER/EXIT.
    pub role: u8,
    /// [`SPEC_QUIET`]: no ENTER/EXIT records (the role's work only); [`SPEC_OUT_SCAN`],
    /// [`SPEC_ALWAYS`], [`SPEC_RANGE_START`], [`SPEC_RANGE_END`].
    pub flags: u8,
}

/// `ProbeSpec::text_flags`: the text argument is a function handle; the kernel name is read
/// through the handle layout.
pub const TEXT_FUNC_HANDLE: u8 = 1;
/// `ProbeSpec::text_flags`: the text argument points to a structure whose first
/// [`RAW_TEXT_LEN`] bytes are copied as they are (an `rtDevBinary_t`, which lives on the
/// caller's stack only during the call).
pub const TEXT_RAW: u8 = 2;
/// Bytes copied for [`TEXT_RAW`].
pub const RAW_TEXT_LEN: usize = 24;
/// `ProbeSpec::flags`: the function is attached for its role only; its calls are not
/// reported as API records (e.g. the driver's SQ/CQ calls when the driver domain is off).
pub const SPEC_QUIET: u8 = 1;
/// `ProbeSpec::flags`: at return, read what each integer argument points at ([`OutScan`]).
pub const SPEC_OUT_SCAN: u8 = 2;
/// `ProbeSpec::flags`: recorded outside capture windows too. Calls that teach the pipeline
/// what later calls mean (kernel registration, communicator creation, mstx domains): a
/// window's kernels, collectives and domain ranges are named by them.
pub const SPEC_ALWAYS: u8 = 4;
/// `ProbeSpec::flags`: an mstx range start (`mstxRangeStartA`, `mstxDomainRangeStartA`): its
/// text argument is the message, its return value the range id. With an mstx capture range
/// ([`Config::capture_mstx`]) one whose message matches [`CaptureMatch`] opens its process's
/// window.
pub const SPEC_RANGE_START: u8 = 8;
/// `ProbeSpec::flags`: an mstx range end; argument `range_id_arg` is the range id. The end
/// of the range that opened a window closes it.
pub const SPEC_RANGE_END: u8 = 16;
/// The slot of [`ApiEnter::args`] that holds [`ProbeSpec::far_arg`] when one is set.
pub const FAR_ARG_SLOT: usize = MAX_ARGS - 1;

/// Integer arguments an [`OutScan`] reads through: operators have up to a dozen parameters
/// before their two out-parameters, so more than [`MAX_ARGS`].
pub const SCAN_ARGS: usize = 16;
/// Calls of [`SPEC_OUT_SCAN`] functions in flight at once whose arguments are kept for their
/// return (the BPF map `SCANNED_ARGS`, least recently used first out).
pub const MAX_SCANNED_CALLS: u32 = 8192;

/// Device-task work a probe does, beyond recording the call.
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeRole {
    Api = 0,
    /// `halSqTaskSend(devId, info)`: remember each submitted SQE's task.
    SqSend = 1,
    /// `halCqReportRecv(devId, info)`: at EXIT, join each returned CQE to its submission.
    CqRecv = 2,
    /// `prof_channel_read(device, channel, buf, size)` in any process but the agent: at
    /// EXIT, copy the profiling-channel bytes that process read (another profiler owns the
    /// channel; the agent reads along, "passive mode").
    ChannelRead = 3,
    /// `rtRegisterAllKernel(const rtDevBinary_t *bin, ...)`: at ENTER, copy the device
    /// binary `bin` describes (its kernels are named by its ELF symbols; the caller may free
    /// it once the call returned).
    CaptureBinary = 4,
    /// `halStreamTaskFill(dev_id, stream_id, stream_mem, task_info, task_cnt)`: a model's
    /// tasks loaded in bulk; each SQE becomes a [`TaskSubmit`] marked [`TASK_FILLED`], run
    /// later by model-execute tasks.
    StreamFill = 5,
}

impl ProbeSpec {
    pub const NONE: Self = Self {
        text_arg: NO_ARG,
        out_arg: NO_ARG,
        out_size: 0,
        text_flags: 0,
        range_id_arg: NO_ARG,
        far_arg: NO_ARG,
        role: ProbeRole::Api as u8,
        flags: 0,
    };
}

/// Where the driver's task structures keep their fields (BPF array `LAYOUT`, index 0): a
/// layout description from the probe catalog, chosen for the chip the driver reports, so no
/// offset is hard-coded in BPF.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceLayout {
    /// `struct halTaskSendInfo`: `sqe_addr` (pointer), `sqe_num` and `sqId` (u32).
    pub send_sqe_addr: u16,
    pub send_sqe_num: u16,
    pub send_sq_id: u16,
    /// Bytes per SQE, and fields of the SQE header: type (low 6 bits of a byte),
    /// blockDim (u16), stream id (u16, kept to `sqe_stream_mask`) and task id
    /// (`sqe_task_size` bytes).
    pub sqe_size: u16,
    pub sqe_type: u16,
    pub sqe_block_dim: u16,
    pub sqe_stream: u16,
    pub sqe_task: u16,
    /// The byte and bit mask of the SQE header's `wrCqe` flag: only such tasks write a
    /// completion entry, so only they wait in `TASKS`.
    pub sqe_wr_cqe_byte: u16,
    pub sqe_wr_cqe_mask: u16,
    /// `struct halReportRecvInfo`: `cqe_addr` (pointer) and `report_cqe_num` (u32).
    pub recv_cqe_addr: u16,
    pub recv_report_num: u16,
    /// Bytes per CQE, and its fields: stream id (u16, kept to `cqe_stream_mask`), task id
    /// (`cqe_task_size` bytes), error code (u32), SQE type (u8), and a u64 that holds the
    /// device syscnt of the task's end only for entries of the SQE types the catalog says are
    /// timestamped (no CQE carries a start time).
    pub cqe_size: u16,
    pub cqe_stream: u16,
    pub cqe_task: u16,
    pub cqe_status: u16,
    pub cqe_sqe_type: u16,
    pub cqe_end_cnt: u16,
    /// The bits of the SQE header's and the CQE's stream id fields that name the stream: the
    /// rest are flags (the runtime's `RT_SYNC_TASK_FLAG`, 0x8000), and the profiling channel
    /// keeps stream ids modulo 2048. 0 when the structure names no stream (STARS v2 headers)
    /// or its stream is not joined on: the stream is then 0 (the field at the offset is read
    /// and dropped, so the BPF programs need no branch for it).
    pub sqe_stream_mask: u16,
    pub cqe_stream_mask: u16,
    /// A function handle (`aclrtFuncHandle`, `rtFuncHandle`): when the u64 at
    /// `handle_magic_offset` is `handle_wrapper_magic` (non-zero), the handle wraps the kernel
    /// object, whose pointer is at `handle_object_offset`; otherwise the handle is the kernel
    /// object. In it, the name's characters are behind the pointer at `handle_name_ptr` and
    /// its length is at `handle_name_len` (a `std::string`): a name whose length disagrees is
    /// dropped and counted, never reported as garbage.
    pub handle_magic_offset: u16,
    pub handle_object_offset: u16,
    pub handle_name_ptr: u16,
    pub handle_name_len: u16,
    /// The profiling channel whose reads by another profiler are copied
    /// (`CHANNEL_STARS_SOC_LOG_BUFFER`).
    pub soc_log_channel: u16,
    /// Bytes of the SQE header's task id: 2 (STARS v100, 16-bit per-stream ids) or 4 (STARS
    /// v2, the process's 32-bit task serial number).
    pub sqe_task_size: u16,
    /// Bytes of the CQE's task id (2 or 4). When it is narrower than the SQE's, the completion
    /// join (`TASKS`) keys tasks by the bits the CQE carries; the full id is kept in the
    /// entry ([`PendingTask`]). Task ids are read as u32 and masked to their size.
    pub cqe_task_size: u16,
    pub _pad: u16,
    pub handle_wrapper_magic: u64,
}

/// The mask of an integer field of `size` bytes (1..=4) read as a u32; computed without a
/// branch, which the BPF verifier would follow once per SQE.
#[inline(always)]
pub const fn width_mask(size: u16) -> u32 {
    1u64.wrapping_shl(size as u32 * 8).wrapping_sub(1) as u32
}

impl DeviceLayout {
    /// The mask of the SQE header's task id.
    #[inline(always)]
    pub const fn sqe_task_mask(&self) -> u32 {
        width_mask(self.sqe_task_size)
    }

    /// The mask of the CQE's task id.
    #[inline(always)]
    pub const fn cqe_task_mask(&self) -> u32 {
        width_mask(self.cqe_task_size)
    }

    /// The bits of a task id the completion join keys on: those both the SQE and the CQE
    /// carry.
    #[inline(always)]
    pub const fn task_key_mask(&self) -> u32 {
        self.sqe_task_mask() & self.cqe_task_mask()
    }
}

/// SQEs read per `halSqTaskSend` call.
pub const MAX_SQES: u32 = 16;
/// SQEs read per `halStreamTaskFill` call (a model stream's tasks).
pub const MAX_FILL_SQES: u32 = 256;
/// The SQE type field's bits in the header's first byte (`type : 6` in both
/// `rtStarsSqeHeader_t` and `rtDavidStarsSqeHeader_t`; the upper two bits are lock flags).
pub const SQE_TYPE_MASK: u8 = 0x3f;
/// Processes the kernel-side target filter (map `TARGETS`) can hold.
pub const MAX_TARGETS: u32 = 16_384;
/// CQEs read per `halCqReportRecv` call.
pub const MAX_CQES: u32 = 64;
/// Submitted tasks awaiting completion, over all traced processes.
pub const MAX_TASKS: u32 = 262_144;

/// Key of a submitted task (BPF hash `TASKS`): the task id keeps the bits the CQE carries
/// ([`DeviceLayout::task_key_mask`]), the stream is 0 when the SQE header names none. Task
/// ids wrap: a new submission with the same key replaces a stale entry instead of joining
/// it.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct TaskKey {
    pub tgid: u32,
    pub device_id: u32,
    pub task_id: u32,
    pub stream_id: u16,
    pub _pad: u16,
}

impl TaskKey {
    pub const fn new(tgid: u32, device_id: u32, stream_id: u16, task_id: u32) -> Self {
        Self {
            tgid,
            device_id,
            task_id,
            stream_id,
            _pad: 0,
        }
    }
}

/// What was known when a task was submitted (in `TASKS` entries and [`TaskSubmit`]).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TaskInfo {
    /// The outermost traced call in flight on the submitting thread, 0 when none.
    pub correlation_id: u64,
    pub submit_ns: u64,
    pub tid: u32,
    pub block_dim: u16,
    pub sqe_type: u8,
    /// [`TASK_FILLED`].
    pub flags: u8,
}

/// A submitted task waiting for its completion entry (value of `TASKS`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PendingTask {
    pub info: TaskInfo,
    /// The task id as the SQE header gave it (the key may keep fewer bits).
    pub task_id: u32,
    pub _pad: u32,
}

/// `TaskInfo::flags`: the task was loaded into a model's stream (`halStreamTaskFill`), not
/// sent to run; it runs each time the model executes.
pub const TASK_FILLED: u8 = 1;
/// `TaskInfo::flags`: the task was submitted outside a capture window (by a call that is
/// not recorded). Its submission still reaches the agent, so that the profiling channel's
/// records of it (which name no process) are known and dropped; its completion entry is
/// dropped in the kernel. No row comes of it.
pub const TASK_UNRECORDED: u8 = 2;

/// A task submission (one SQE of a `halSqTaskSend`), for joining device-side records
/// that carry no process: the profiling channel's begin/end records name only the device,
/// stream and task.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct TaskSubmit {
    /// The submitting thread; `ts_ns` is the submission time.
    pub header: RecordHeader,
    pub info: TaskInfo,
    pub device_id: u32,
    /// The driver's SQ the task went to (`halTaskSendInfo.sqId`).
    pub sq_id: u32,
    /// The SQE header's task id (16 bits per stream on STARS v100, the process's 32-bit
    /// serial number on STARS v2).
    pub task_id: u32,
    /// The header's stream id without flag bits; 0 when the header names none (STARS v2).
    pub stream_id: u16,
    pub _pad: u16,
}

/// A completion joined to its submission.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct TaskComplete {
    /// pid/tid of the thread that received the completion; `ts_ns` when it returned.
    pub header: RecordHeader,
    /// The submission; `info.submit_ns == 0` when it was not seen.
    pub info: TaskInfo,
    pub start_cnt: u64,
    pub end_cnt: u64,
    pub device_id: u32,
    pub status: u32,
    /// The submission's task id when it was seen, else the CQE's.
    pub task_id: u32,
    pub stream_id: u16,
    /// SQE type reported in the CQE.
    pub sqe_type: u8,
    pub _pad: u8,
}

/// Bytes of profiling-channel data per [`ChannelData`] record.
pub const CHANNEL_CHUNK: usize = 4096;
/// Chunks copied per `prof_channel_read`: msPTI and msprof read at most 2 MiB at a time.
pub const MAX_CHANNEL_CHUNKS: u32 = 512;

/// A piece of what another profiler read from a device's profiling channel: `len` bytes
/// at byte `offset` of one `prof_channel_read`. Records may straddle pieces and reads.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ChannelData {
    /// The reading thread; `ts_ns` when its read returned.
    pub header: RecordHeader,
    pub device_id: u32,
    /// Valid bytes in `data`.
    pub len: u32,
    pub offset: u32,
    pub _pad: u32,
    pub data: [u8; CHANNEL_CHUNK],
}

/// Device-binary bytes copied per `rtRegisterAllKernel`: a larger binary is cut short (its
/// kernels are then named from the process's memory, if it still holds the binary).
pub const MAX_BINARY_CHUNKS: u32 = 512;

/// A piece of a device binary being registered: `len` bytes at byte `offset` of the binary
/// of the call `correlation_id`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct BinaryPiece {
    /// The registering thread; `ts_ns` of the call's ENTER.
    pub header: RecordHeader,
    pub correlation_id: u64,
    /// Valid bytes in `data`.
    pub len: u32,
    pub offset: u32,
    /// The binary's whole length.
    pub total: u64,
    pub data: [u8; CHANNEL_CHUNK],
}

/// One traced call in flight on a thread.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Frame {
    pub correlation_id: u64,
    /// Out-parameter pointer saved at ENTER (arguments are gone at EXIT); for
    /// [`ProbeRole::CqRecv`] the `halReportRecvInfo` pointer, for
    /// [`ProbeRole::ChannelRead`] the buffer read into.
    pub out_ptr: u64,
    pub probe: u16,
    /// [`FRAME_COPY_CHANNEL`].
    pub flags: u16,
    /// [`ProbeRole::CqRecv`], [`ProbeRole::ChannelRead`]: the device id argument.
    pub aux: u32,
}

/// `Frame::flags`: a `prof_channel_read` of another profiler whose bytes are copied at EXIT.
pub const FRAME_COPY_CHANNEL: u16 = 1;
/// `Frame::flags`: the call is not recorded (its outermost call began outside a capture
/// window): no ENTER/EXIT records, and neither for the calls nested in it.
pub const FRAME_UNRECORDED: u16 = 2;
/// `Frame::flags`: this mstx range start opened its process's capture window; its return
/// value is the range id whose end closes it.
pub const FRAME_OPENS_WINDOW: u16 = 4;
/// `Frame::flags`: this mstx range end closes its process's capture window when it returns.
pub const FRAME_CLOSES_WINDOW: u16 = 8;

/// Per-thread call stack kept in the BPF map `THREADS`.
///
/// One-based: `frames[depth]` is the innermost call and `frames[0]` stays zero, so the
/// parent of a new call is always `frames[depth]` (the verifier rejects the negative
/// offsets that a `depth - 1` index compiles to).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ThreadState {
    pub depth: u32,
    pub _pad: u32,
    pub frames: [Frame; MAX_DEPTH + 1],
}

/// Global switches (BPF array `CONFIG`, index 0).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Config {
    /// Non-zero: only processes in `TARGETS` are traced (attach and record modes).
    pub filter_targets: u8,
    /// Non-zero: children forked by a target become targets (record mode).
    pub follow_children: u8,
    /// Offset of `child_pid` in the `sched/sched_process_fork` tracepoint record,
    /// read by the agent from the tracepoint's `format` file.
    pub fork_child_pid_offset: u16,
    /// The agent's own process: its profiling-channel reads are not copied back to it.
    pub agent_pid: u32,
    /// Bit `d` set: device `d`'s profiling channel is owned by another profiler, whose
    /// reads of it are copied ([`ProbeRole::ChannelRead`]); devices 0-63, as the driver's
    /// `DEV_NUM`.
    pub passive_devices: u64,
    /// Non-zero: recording is paused (`--delay`, SIGUSR2): calls that begin now are not
    /// recorded. Probes stay attached and keep their per-thread state.
    pub paused: u8,
    /// Non-zero: a call is recorded only inside an open mstx capture window of its process
    /// (`CAPTURE`), opened by a range start whose message matches [`CaptureMatch`].
    pub capture_mstx: u8,
    pub _pad: u16,
    /// Capture windows a process opens at most (`--capture-range-count`); 0: no limit.
    pub capture_ranges: u32,
}

/// The message an mstx range start must have to open a capture window (BPF array
/// `CAPTURE_MATCH`, index 0).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct CaptureMatch {
    /// Bytes of `text` to compare (at most [`TEXT_LEN`] - 2, so that a message cut short at
    /// [`TEXT_LEN`] - 1 bytes never equals it).
    pub len: u32,
    /// Non-zero: a message that starts with `text` matches; otherwise it must equal it.
    pub prefix: u32,
    pub text: [u8; TEXT_LEN],
}

impl Default for CaptureMatch {
    fn default() -> Self {
        Self {
            len: 0,
            prefix: 0,
            text: [0; TEXT_LEN],
        }
    }
}

/// A process's mstx capture state (BPF hash `CAPTURE`, keyed by tgid).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct CaptureState {
    /// Non-zero while the window is open.
    pub open: u32,
    /// Windows this process closed.
    pub ranges: u32,
    /// The id of the range that opened the window (0 until its start returned).
    pub range_id: u64,
}

/// A process's capture window opened (at the matching range start's ENTER) or closed (at
/// its range end's EXIT).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct WindowEdge {
    /// The thread of the mstx call; `ts_ns` when the window opened or closed.
    pub header: RecordHeader,
    /// The range's id (0 at opening: the start has not returned yet).
    pub range_id: u64,
    /// 1: opened; 0: closed.
    pub open: u32,
    /// Windows the process closed, this one included.
    pub ranges: u32,
}

/// Holding a process at its first open of a library file the agent has not attached yet
/// (BPF module `hold`, agent module `hold`): the switches and kernel offsets the BPF side
/// needs (BPF array `HOLD_CONFIG`, index 0).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct HoldConfig {
    /// Non-zero: hold processes (the agent sets it once its watchdog runs).
    pub enabled: u8,
    /// Non-zero: the mount namespace of a process can be read (the offsets below are
    /// known), so opens of paths already seen in it (`HOLD_KNOWN`) are not held.
    pub use_known: u8,
    /// Offset of `filename` in the `syscalls/sys_enter_openat` record.
    pub filename_offset: u16,
    /// Offset of `flags` in the same record.
    pub flags_offset: u16,
    /// Offset of `ret` in the `syscalls/sys_exit_openat` record.
    pub ret_offset: u16,
    /// `task_struct.nsproxy` and `nsproxy.mnt_ns`, from the kernel's BTF.
    pub nsproxy_offset: u32,
    pub mnt_ns_offset: u32,
    /// In `struct mnt_namespace`: the inode number (`ns.inum`, as `/proc/PID/ns/mnt` shows
    /// it, reused once a namespace is gone) and an id never reused (`ns.ns_id` since Linux
    /// 6.18, `seq` before).
    pub ns_inum_offset: u32,
    pub ns_id_offset: u32,
    /// Bit `n` set: some library name or pattern of the catalog begins with a literal of
    /// `n` bytes (before any wildcard), whose hash is a key of `HOLD_PREFIXES`.
    pub prefix_lengths: u64,
    /// The agent's own mount namespace (inode number): the key of its paths is 0.
    pub agent_mnt_ns: u32,
    pub _pad: u32,
}

/// Bytes of an opened path the BPF side reads (longer paths are read cut short).
pub const HOLD_PATH_LEN: usize = 256;
/// Bytes of a file's base name compared with the catalog's name prefixes.
pub const HOLD_PREFIX_MAX: usize = 63;
/// Threads held at once.
pub const MAX_HELD: u32 = 4096;
/// (mount namespace, path) pairs remembered as seen.
pub const MAX_HOLD_KNOWN: u32 = 16_384;

/// FNV-1a, the hash of paths and name prefixes both sides compute.
pub const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
pub const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// One FNV-1a step.
#[inline(always)]
pub const fn fnv_step(hash: u64, byte: u8) -> u64 {
    (hash ^ byte as u64).wrapping_mul(FNV_PRIME)
}

/// FNV-1a of `bytes` (the agent's side of the BPF programs' byte-by-byte hash).
pub const fn fnv(bytes: &[u8]) -> u64 {
    let mut hash = FNV_OFFSET;
    let mut i = 0;
    while i < bytes.len() {
        hash = fnv_step(hash, bytes[i]);
        i += 1;
    }
    hash
}

/// An opened path seen in a mount namespace (key of `HOLD_KNOWN`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct HoldKnown {
    /// The namespace's id that is never reused; 0 for the agent's own namespace.
    pub mnt_ns: u64,
    pub path_hash: u64,
}

/// A held thread (value of `HELD`, keyed by the tid whose open stopped its process).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Held {
    pub tgid: u32,
    pub _pad: u32,
    /// CLOCK_MONOTONIC ns when it was stopped.
    pub ts_ns: u64,
}

/// `HoldEvent::flags`: the path was absolute (so `(mnt_ns, path_hash)` names one file).
pub const HOLD_ABSOLUTE: u32 = 1;

/// A process stopped at the return of an `openat` of a file named like a CANN library
/// (ring buffer `HOLDS`): the agent attaches the file open as `fd` and continues it.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct HoldEvent {
    pub ts_ns: u64,
    pub tgid: u32,
    pub tid: u32,
    /// The file descriptor `openat` returned.
    pub fd: u32,
    /// [`HOLD_ABSOLUTE`].
    pub flags: u32,
    /// As in [`HoldKnown`].
    pub mnt_ns: u64,
    pub path_hash: u64,
}

/// Indexes of the per-CPU counters `HOLD_STATS`.
pub const HOLD_STAT_HELD: u32 = 0;
/// A process that should have been held was not (ring buffer or `HELD` full, signal
/// refused): its library is found by the periodic rescan.
pub const HOLD_STAT_MISSED: u32 = 1;
pub const HOLD_STAT_COUNT: u32 = 2;

#[cfg(feature = "user")]
mod pod {
    // SAFETY (each impl): a #[repr(C)] struct of integers and integer arrays with its
    // padding spelled out as `_pad` fields, so every bit pattern is a valid value and no
    // byte is uninitialized; the layout asserts above pin the sizes.
    // SAFETY: see above.
    unsafe impl aya::Pod for super::ProbeSpec {}
    // SAFETY: see above.
    unsafe impl aya::Pod for super::Config {}
    // SAFETY: see above.
    unsafe impl aya::Pod for super::ThreadState {}
    // SAFETY: see above.
    unsafe impl aya::Pod for super::DeviceLayout {}
    // SAFETY: see above.
    unsafe impl aya::Pod for super::TaskKey {}
    // SAFETY: see above.
    unsafe impl aya::Pod for super::TaskInfo {}
    // SAFETY: see above.
    unsafe impl aya::Pod for super::PendingTask {}
    // SAFETY: see above.
    unsafe impl aya::Pod for super::CaptureMatch {}
    // SAFETY: see above.
    unsafe impl aya::Pod for super::HoldConfig {}
    // SAFETY: see above.
    unsafe impl aya::Pod for super::HoldKnown {}
    // SAFETY: see above.
    unsafe impl aya::Pod for super::Held {}
    // SAFETY: see above.
    unsafe impl aya::Pod for super::CaptureState {}
}

/// The wire layout, checked at compile time in the BPF build and the agent's alike: both
/// sides read these bytes, and the agent reads them as any bit pattern (no implicit
/// padding), so a field added in the wrong place fails the build, not a trace.
const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<RecordHeader>() == 24);
    assert!(offset_of!(RecordHeader, ts_ns) == 16);
    assert!(offset_of!(ApiEnter, correlation_id) == 24);
    assert!(offset_of!(ApiEnter, args) == 40);
    assert!(offset_of!(ApiEnter, text) == 112);
    assert!(size_of::<ApiEnter>() == 176);
    assert!(size_of::<ApiExit>() == 56);
    assert!(size_of::<OutScan>() == 24 + 8 + 8 * SCAN_ARGS + 8);
    assert!(size_of::<ScannedCall>() == 16 * SCAN_ARGS + 8);
    assert!(size_of::<ProbeSpec>() == 8);
    assert!(size_of::<TaskKey>() == 16);
    assert!(offset_of!(TaskKey, stream_id) == 12);
    assert!(size_of::<TaskInfo>() == 24);
    assert!(size_of::<PendingTask>() == 24 + 8);
    assert!(size_of::<TaskComplete>() == 24 + 24 + 16 + 8 + 8);
    assert!(offset_of!(TaskComplete, task_id) == 72);
    assert!(offset_of!(TaskComplete, _pad) == 79);
    assert!(size_of::<TaskSubmit>() == 24 + 24 + 16);
    assert!(offset_of!(TaskSubmit, task_id) == 56);
    assert!(offset_of!(TaskSubmit, _pad) == 62);
    assert!(size_of::<ChannelData>() == 24 + 16 + CHANNEL_CHUNK);
    assert!(size_of::<BinaryPiece>() == 24 + 24 + CHANNEL_CHUNK);
    // 28 u16 fields (padding included), then the u64: no implicit padding.
    assert!(width_mask(2) == 0xffff && width_mask(4) == u32::MAX);
    assert!(offset_of!(DeviceLayout, handle_wrapper_magic) == 56);
    assert!(size_of::<DeviceLayout>() == 56 + 8);
    assert!(size_of::<ThreadState>() == 8 + (MAX_DEPTH + 1) * 24);
    assert!(size_of::<Config>() == 24);
    assert!(size_of::<CaptureMatch>() == 8 + TEXT_LEN);
    assert!(size_of::<CaptureState>() == 16);
    assert!(size_of::<WindowEdge>() == 24 + 16);
    assert!(size_of::<HoldConfig>() == 40);
    assert!(offset_of!(HoldConfig, prefix_lengths) == 24);
    assert!(size_of::<HoldKnown>() == 16);
    assert!(size_of::<Held>() == 16);
    assert!(size_of::<HoldEvent>() == 40);
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_kinds_round_trip() {
        for kind in [
            RecordKind::ApiEnter,
            RecordKind::ApiExit,
            RecordKind::ThreadExit,
        ] {
            assert_eq!(RecordKind::from_u8(kind as u8), Some(kind));
        }
        assert_eq!(RecordKind::from_u8(0), None);
    }
}
