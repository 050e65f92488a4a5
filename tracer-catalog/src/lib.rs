//! The probe catalog: every traced CANN function as data. One generic BPF program pair
//! serves all of them; an entry's index is its probe id (the attach cookie) and says what
//! the BPF side captures (`ProbeSpec`) and how the agent turns the raw values into columns.
//!
//! Signatures follow the public CANN headers (`shared/reference/cann_abi.h`); msPTI
//! callback domains and ids follow `mspti_cbid.h`. The same catalog serves a real CANN host
//! and the simulator.
use tracer_common::{DeviceLayout, NO_ARG, ProbeRole, ProbeSpec, SPEC_QUIET, TEXT_INDIRECT};

use tracer_schema::{
    rows::ApiArgs,
    vocab::{HcclDataType, KernelType, MemcpyKind, MemoryKind, ReduceOp},
};

/// CANN libraries whose functions are traced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Library {
    AscendCl,
    Runtime,
    Hccl,
    MsToolsExt,
    AscendHal,
}

impl Library {
    pub const ALL: [Library; 5] = [
        Self::AscendCl,
        Self::Runtime,
        Self::Hccl,
        Self::MsToolsExt,
        Self::AscendHal,
    ];

    pub const fn file_name(self) -> &'static str {
        match self {
            Self::AscendCl => "libascendcl.so",
            Self::Runtime => "libruntime.so",
            Self::Hccl => "libhccl.so",
            Self::MsToolsExt => "libms_tools_ext.so",
            Self::AscendHal => "libascend_hal.so",
        }
    }

    /// The library a mapped file name belongs to (`libhccl.so.8` counts as `libhccl.so`).
    pub fn from_file_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|lib| {
            name.strip_prefix(lib.file_name())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
        })
    }
}

/// The layer a function belongs to; users enable and disable by domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Domain {
    Acl,
    Runtime,
    Hccl,
    Mstx,
    Driver,
}

impl Domain {
    pub const ALL: [Domain; 5] = [
        Self::Acl,
        Self::Runtime,
        Self::Hccl,
        Self::Mstx,
        Self::Driver,
    ];
    /// Traced unless the user says otherwise; the driver layer is the runtime's own
    /// plumbing (its report thread polls it) and is opt-in.
    pub const DEFAULT: [Domain; 4] = [Self::Acl, Self::Runtime, Self::Hccl, Self::Mstx];

    pub const fn name(self) -> &'static str {
        match self {
            Self::Acl => "ACL",
            Self::Runtime => "RUNTIME",
            Self::Hccl => "HCCL",
            Self::Mstx => "MSTX",
            Self::Driver => "DRIVER",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|d| d.name().eq_ignore_ascii_case(s))
    }
}

/// msPTI callback domains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MsptiDomain {
    Runtime,
    Hccl,
}

impl MsptiDomain {
    pub const fn name(self) -> &'static str {
        match self {
            Self::Runtime => "RUNTIME",
            Self::Hccl => "HCCL",
        }
    }
}

/// Which `api` column an integer argument (or out-parameter) lands in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    DeviceId,
    Stream,
    Bytes,
    Count,
    AclMemcpyKind,
    RtMemcpyKind,
    Address,
    SrcAddress,
    Value,
    BlockDim,
    Handle,
    DataType,
    ReduceOp,
    Rank,
    RangeId,
}

/// A captured integer argument: register/stack position and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arg {
    pub index: u8,
    /// Parameter name in the CANN header.
    pub name: &'static str,
    pub column: Column,
}

const fn a(index: u8, name: &'static str, column: Column) -> Arg {
    Arg {
        index,
        name,
        column,
    }
}

/// What a captured C string argument is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Text {
    KernelName,
    Message,
}

/// A C string reached through a pointer field of the struct an argument points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Indirect {
    /// Byte offset of the `const char *` field.
    pub offset: u16,
}

/// Layout description: where a function handle (`aclrtFuncHandle`, `rtFuncHandle`) keeps
/// its kernel-name pointer, in the CANN ABI this catalog is validated against (see
/// `docs/simulator.md`); another CANN release supplies its own. It names kernels whose
/// handles were created before tracing began, which no registration call can tell.
pub const FUNC_HANDLE_NAME: Indirect = Indirect { offset: 0 };

/// The device task a call submits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskKind {
    Kernel,
    Memcpy,
    Memset,
    Collective,
}

/// What one rank puts into a collective, from its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payload {
    /// `count` elements of `dataType`.
    Count,
    /// `count` elements per peer, one block per rank (ReduceScatter, AlltoAll).
    PerPeer,
    /// No data (Barrier).
    Nothing,
}

/// Layout description of the driver's task interface (`ascend_hal_base.h`: struct
/// halTaskSendInfo, struct halReportRecvInfo; `rtStarsSqeHeader_t`), and of the logic CQE
/// in the format the simulator documents (`docs/simulator.md`); a CANN release whose CQE
/// differs supplies its own.
pub const DEVICE_LAYOUT: DeviceLayout = DeviceLayout {
    send_sqe_addr: 16,
    send_sqe_num: 24,
    send_sq_id: 8,
    sqe_size: 64,
    sqe_type: 0,
    sqe_block_dim: 2,
    sqe_stream: 4,
    sqe_task: 6,
    sqe_wr_cqe_byte: 1,
    sqe_wr_cqe_mask: 1 << 6,
    recv_cqe_addr: 16,
    recv_report_num: 28,
    cqe_size: 32,
    cqe_stream: 0,
    cqe_task: 2,
    cqe_status: 4,
    cqe_sqe_type: 9,
    cqe_end_cnt: 16,
    cqe_start_cnt: 24,
};

/// The driver's profiling channel that carries a begin and an end record per device task on
/// Atlas A2/A3 (STARS): `CHANNEL_STARS_SOC_LOG_BUFFER` (hicann/driver
/// `pkg_inc/ascend_hal_base.h`), the one msPTI and msprof read kernel times from.
pub const SOC_LOG_CHANNEL: u32 = 50;

/// Layout description of one profiling-channel record, `StarsSocLog` (Ascend/mspti
/// `csrc/activity/ascend/channel/channel_data.h`, `#pragma pack(4)`, 64 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocLogLayout {
    pub record_size: usize,
    /// u16 whose low 6 bits are the function type (0 begin, 1 end).
    pub func_type: usize,
    /// u16 stream and task id fields, in the encoded forms [`soc_log_ids`] decodes.
    pub stream_id: usize,
    pub task_id: usize,
    /// u64 device system counter.
    pub timestamp: usize,
}

/// `StarsSocLog` as msPTI declares it.
pub const SOC_LOG: SocLogLayout = SocLogLayout {
    record_size: 64,
    func_type: 0,
    stream_id: 4,
    task_id: 6,
    timestamp: 8,
};

/// `funcType` of a task's begin and end records (0x22/0x23 are FFTS+ subtasks).
pub const SOC_FUNC_BEGIN: u8 = 0;
pub const SOC_FUNC_END: u8 = 1;

/// The (stream, task) a record's id fields stand for, decoded as msPTI does
/// (`StarsCommon::GetStreamId` / `GetTaskId`, `csrc/activity/ascend/channel/stars_common.cpp`):
/// the stream is kept modulo 2048; bit 12 of the stream field carries the task's top three
/// bits in bits 13-15; bit 13 swaps the low 12 bits of the two fields.
pub const fn soc_log_ids(stream_field: u16, task_field: u16) -> (u16, u16) {
    const BIT12: u16 = 1 << 12;
    const BIT13: u16 = 1 << 13;
    if stream_field & BIT12 != 0 {
        (
            stream_field % 2048,
            (task_field & 0x1fff) | (stream_field & 0xe000),
        )
    } else if stream_field & BIT13 != 0 {
        (
            (task_field & 0x0fff) % 2048,
            (stream_field & 0x0fff) | (task_field & 0xf000),
        )
    } else {
        (stream_field % 2048, task_field)
    }
}

/// Device error codes a completion can carry, with their `acl_base_rt.h` names.
pub const DEVICE_ERRORS: &[(u32, &str)] = &[
    (507_015, "ACL_ERROR_RT_AICORE_EXCEPTION"),
    (507_000, "ACL_ERROR_RT_INTERNAL_ERROR"),
    (107_020, "ACL_ERROR_RT_TASK_TIMEOUT"),
];

/// What a task's SQE type says it is (numbering as the layout above): the task kind, used
/// when the API call that submitted it is unknown, and the compute unit of kernels.
pub fn sqe_task_kind(sqe_type: u8) -> Option<(TaskKind, KernelType)> {
    match sqe_type {
        0 => Some((TaskKind::Kernel, KernelType::AiCore)),
        1 => Some((TaskKind::Kernel, KernelType::AiCpu)),
        2 => Some((TaskKind::Kernel, KernelType::AiVector)),
        11 => Some((TaskKind::Memcpy, KernelType::Unknown)),
        12 => Some((TaskKind::Memset, KernelType::Unknown)),
        13 => Some((TaskKind::Collective, KernelType::Unknown)),
        _ => None,
    }
}

/// An out-parameter read at EXIT through the pointer passed in argument `index`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Out {
    pub index: u8,
    pub size: u8,
    pub column: Column,
}

/// How the return register is interpreted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ret {
    /// A 32-bit status (`aclError`, `rtError_t`, `HcclResult`, `drvError_t`), 0 = success.
    Status,
    Void,
    /// A 64-bit value that is also a column (mstx range id, mstx domain handle).
    Value(Column),
}

/// Calls the pipeline treats specially (kernel naming, mstx markers, memory, communicators).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Plain,
    /// Allocates memory of this kind: the address column is the new block, bytes its size.
    Alloc(MemoryKind),
    /// Releases the block at the address column.
    Free(MemoryKind),
    /// Creates an HCCL communicator (handle column) of `count` ranks, this process's rank
    /// in the rank column.
    CommInit,
    /// `rtFunctionRegister(binHandle, stubFunc, stubName, ...)`: the stub (handle column) is
    /// named by the text argument, and the name is the next function of `binHandle`.
    RegisterStub,
    /// `aclrtBinaryGetFunction`: the returned function handle is named by the text argument.
    RegisterFunction,
    /// Launch whose handle column is a function handle named by [`Role::RegisterFunction`].
    LaunchByHandle,
    /// Launch whose handle column is a stub named by [`Role::RegisterStub`] or its ELF symbol.
    LaunchByStub,
    /// `rtKernelLaunchWithHandleV2(hdl, tilingKey, ...)`: the kernel is function number
    /// `tilingKey` (value column) registered on binary `hdl`, in registration order.
    LaunchByTilingKey,
    MarkA,
    RangeStartA,
    RangeEnd,
    DomainCreate,
    DomainMark,
    DomainRangeStart,
    DomainRangeEnd,
}

/// One traced function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeDef {
    pub library: Library,
    pub symbol: &'static str,
    pub domain: Domain,
    pub mspti: Option<(MsptiDomain, u32)>,
    pub args: &'static [Arg],
    pub text: Option<(u8, Text)>,
    /// The text argument is a struct pointer; the string is behind this field.
    pub text_via: Option<Indirect>,
    pub out: Option<Out>,
    pub ret: Ret,
    pub role: Role,
    /// The kind of device task the call submits, if any.
    pub task: Option<TaskKind>,
    /// The call returns before its task ran (the `*Async` variants).
    pub is_async: bool,
    /// For collectives: how the bytes one rank contributes follow from the arguments.
    pub payload: Payload,
    /// Device-task work of the driver's SQ/CQ functions.
    pub device_role: ProbeRole,
}

const fn f(
    library: Library,
    symbol: &'static str,
    domain: Domain,
    args: &'static [Arg],
) -> ProbeDef {
    ProbeDef {
        library,
        symbol,
        domain,
        mspti: None,
        args,
        text: None,
        text_via: None,
        out: None,
        ret: Ret::Status,
        role: Role::Plain,
        task: None,
        is_async: false,
        payload: Payload::Count,
        device_role: ProbeRole::Api,
    }
}

impl ProbeDef {
    const fn cb(mut self, domain: MsptiDomain, id: u32) -> Self {
        self.mspti = Some((domain, id));
        self
    }
    const fn text(mut self, index: u8, text: Text) -> Self {
        self.text = Some((index, text));
        self
    }
    const fn text_via(mut self, index: u8, via: Indirect, text: Text) -> Self {
        self.text = Some((index, text));
        self.text_via = Some(via);
        self
    }
    const fn out(mut self, index: u8, size: u8, column: Column) -> Self {
        self.out = Some(Out {
            index,
            size,
            column,
        });
        self
    }
    const fn ret(mut self, ret: Ret) -> Self {
        self.ret = ret;
        self
    }
    const fn role(mut self, role: Role) -> Self {
        self.role = role;
        self
    }
    const fn task(mut self, task: TaskKind) -> Self {
        self.task = Some(task);
        self
    }
    const fn asynchronous(mut self) -> Self {
        self.is_async = true;
        self
    }
    const fn payload(mut self, payload: Payload) -> Self {
        self.payload = payload;
        self
    }
    const fn device_role(mut self, role: ProbeRole) -> Self {
        self.device_role = role;
        self
    }

    /// What the BPF programs capture for this function; `quiet` attaches it for its
    /// device role only, without API records.
    pub fn spec(&self, quiet: bool) -> ProbeSpec {
        let (out_arg, out_size) = self.out.map_or((NO_ARG, 0), |o| (o.index, o.size));
        ProbeSpec {
            text_arg: self.text.map_or(NO_ARG, |(i, _)| i),
            out_arg,
            out_size,
            text_flags: if self.text_via.is_some() {
                TEXT_INDIRECT
            } else {
                0
            },
            text_offset: self.text_via.map_or(0, |v| v.offset),
            role: self.device_role as u8,
            flags: if quiet { SPEC_QUIET } else { 0 },
        }
    }

    /// Typed columns from raw captured values.
    pub fn decode_args(&self, raw: &[u64], out_value: Option<u64>, ret: Option<u64>) -> ApiArgs {
        let mut args = ApiArgs::default();
        for arg in self.args {
            if let Some(&v) = raw.get(arg.index as usize) {
                set_column(&mut args, arg.column, v);
            }
        }
        if let (Some(out), Some(v)) = (self.out, out_value) {
            set_column(&mut args, out.column, v);
        }
        if let (Ret::Value(column), Some(ret)) = (self.ret, ret) {
            set_column(&mut args, column, ret);
        }
        args
    }

    /// The return value as recorded: sign-extended status, raw value, or none.
    pub fn return_value(&self, ret: u64) -> Option<i64> {
        match self.ret {
            Ret::Status => Some(i64::from(ret as i32)),
            Ret::Void => None,
            Ret::Value(_) => Some(ret as i64),
        }
    }
}

fn set_column(args: &mut ApiArgs, column: Column, v: u64) {
    match column {
        Column::DeviceId => args.device_id = Some(v as i32),
        Column::Stream => args.stream = Some(v),
        Column::Bytes => args.bytes = Some(v),
        Column::Count => args.count = Some(v),
        Column::AclMemcpyKind => args.memcpy_kind = Some(acl_memcpy_kind(v as u32)),
        Column::RtMemcpyKind => args.memcpy_kind = Some(rt_memcpy_kind(v as u32)),
        Column::Address => args.address = Some(v),
        Column::SrcAddress => args.src_address = Some(v),
        Column::Value => args.value = Some(v as i64),
        Column::BlockDim => args.block_dim = Some(v as u32),
        Column::Handle => args.handle = Some(v),
        Column::DataType => args.data_type = Some(hccl_data_type(v as u32)),
        Column::ReduceOp => args.reduce_op = Some(hccl_reduce_op(v as u32)),
        Column::Rank => args.rank = Some(v as u32),
        Column::RangeId => args.range_id = Some(v),
    }
}

/// `aclrtMemcpyKind`.
pub const fn acl_memcpy_kind(kind: u32) -> MemcpyKind {
    match kind {
        0 => MemcpyKind::HostToHost,
        1 => MemcpyKind::HostToDevice,
        2 => MemcpyKind::DeviceToHost,
        3 => MemcpyKind::DeviceToDevice,
        4 => MemcpyKind::Default,
        5 => MemcpyKind::HostToBufToDevice,
        6 => MemcpyKind::InnerDeviceToDevice,
        7 => MemcpyKind::InterDeviceToDevice,
        _ => MemcpyKind::Unknown,
    }
}

/// `rtMemcpyKind_t`.
pub const fn rt_memcpy_kind(kind: u32) -> MemcpyKind {
    match kind {
        0 => MemcpyKind::HostToHost,
        1 => MemcpyKind::HostToDevice,
        2 => MemcpyKind::DeviceToHost,
        3 => MemcpyKind::DeviceToDevice,
        4 => MemcpyKind::Managed,
        5 => MemcpyKind::AddrDeviceToDevice,
        6 => MemcpyKind::HostToDeviceEx,
        7 => MemcpyKind::DeviceToHostEx,
        8 => MemcpyKind::Default,
        _ => MemcpyKind::Unknown,
    }
}

/// `HcclDataType`, in the header's numbering.
pub fn hccl_data_type(t: u32) -> HcclDataType {
    use HcclDataType::*;
    const NUMBERED: [HcclDataType; 18] = [
        Int8, Int16, Int32, Fp16, Fp32, Int64, Uint64, Uint8, Uint16, Uint32, Fp64, Bfp16, Int128,
        Unknown, Hif8, Fp8E4m3, Fp8E5m2, Fp8E8m0,
    ];
    NUMBERED.get(t as usize).copied().unwrap_or(Unknown)
}

/// `HcclReduceOp`.
pub const fn hccl_reduce_op(op: u32) -> ReduceOp {
    match op {
        0 => ReduceOp::Sum,
        1 => ReduceOp::Prod,
        2 => ReduceOp::Max,
        3 => ReduceOp::Min,
        _ => ReduceOp::Unknown,
    }
}

use Column::*;
use Domain::{Acl, Driver, Hccl as HcclD, Mstx, Runtime as Rt};
use Library::{AscendCl, AscendHal, Hccl as HcclL, MsToolsExt, Runtime as RtL};
use MsptiDomain::{Hccl as CbHccl, Runtime as CbRt};

/// Every traced function. The index of an entry is its probe id.
pub static CATALOG: &[ProbeDef] = &[
    // ---- libascendcl.so ----
    f(AscendCl, "aclInit", Acl, &[]).text(0, Text::Message),
    f(AscendCl, "aclFinalize", Acl, &[]),
    f(
        AscendCl,
        "aclrtSetDevice",
        Acl,
        &[a(0, "deviceId", DeviceId)],
    ),
    f(
        AscendCl,
        "aclrtResetDevice",
        Acl,
        &[a(0, "deviceId", DeviceId)],
    ),
    f(AscendCl, "aclrtCreateStream", Acl, &[]).out(0, 8, Stream),
    f(
        AscendCl,
        "aclrtDestroyStream",
        Acl,
        &[a(0, "stream", Stream)],
    ),
    f(
        AscendCl,
        "aclrtSynchronizeStream",
        Acl,
        &[a(0, "stream", Stream)],
    ),
    f(
        AscendCl,
        "aclrtMalloc",
        Acl,
        &[a(1, "size", Bytes), a(2, "policy", Value)],
    )
    .out(0, 8, Address),
    f(AscendCl, "aclrtFree", Acl, &[a(0, "devPtr", Address)]),
    f(AscendCl, "aclrtMallocHost", Acl, &[a(1, "size", Bytes)]).out(0, 8, Address),
    f(AscendCl, "aclrtFreeHost", Acl, &[a(0, "hostPtr", Address)]),
    f(
        AscendCl,
        "aclrtMemcpy",
        Acl,
        &[
            a(0, "dst", Address),
            a(2, "src", SrcAddress),
            a(3, "count", Bytes),
            a(4, "kind", AclMemcpyKind),
        ],
    )
    .task(TaskKind::Memcpy),
    f(
        AscendCl,
        "aclrtMemcpyAsync",
        Acl,
        &[
            a(0, "dst", Address),
            a(2, "src", SrcAddress),
            a(3, "count", Bytes),
            a(4, "kind", AclMemcpyKind),
            a(5, "stream", Stream),
        ],
    )
    .task(TaskKind::Memcpy)
    .asynchronous(),
    f(
        AscendCl,
        "aclrtMemset",
        Acl,
        &[
            a(0, "devPtr", Address),
            a(2, "value", Value),
            a(3, "count", Bytes),
        ],
    )
    .task(TaskKind::Memset),
    f(
        AscendCl,
        "aclrtMemsetAsync",
        Acl,
        &[
            a(0, "devPtr", Address),
            a(2, "value", Value),
            a(3, "count", Bytes),
            a(4, "stream", Stream),
        ],
    )
    .task(TaskKind::Memset)
    .asynchronous(),
    f(
        AscendCl,
        "aclrtBinaryLoadFromData",
        Acl,
        &[a(1, "length", Bytes)],
    )
    .out(3, 8, Handle),
    f(AscendCl, "aclrtBinaryGetFunction", Acl, &[])
        .text(1, Text::KernelName)
        .out(2, 8, Handle)
        .role(Role::RegisterFunction),
    f(
        AscendCl,
        "aclrtLaunchKernel",
        Acl,
        &[
            a(0, "funcHandle", Handle),
            a(1, "blockDim", BlockDim),
            a(3, "argsSize", Bytes),
            a(4, "stream", Stream),
        ],
    )
    .text_via(0, FUNC_HANDLE_NAME, Text::KernelName)
    .role(Role::LaunchByHandle)
    .task(TaskKind::Kernel),
    f(AscendCl, "aclrtGetDevice", Acl, &[]).out(0, 4, DeviceId),
    f(AscendCl, "aclrtSynchronizeDevice", Acl, &[]),
    f(AscendCl, "aclrtCreateEvent", Acl, &[]).out(0, 8, Handle),
    f(AscendCl, "aclrtDestroyEvent", Acl, &[a(0, "event", Handle)]),
    f(
        AscendCl,
        "aclrtRecordEvent",
        Acl,
        &[a(0, "event", Handle), a(1, "stream", Stream)],
    ),
    f(
        AscendCl,
        "aclrtStreamWaitEvent",
        Acl,
        &[a(0, "stream", Stream), a(1, "event", Handle)],
    ),
    f(
        AscendCl,
        "aclrtSynchronizeEvent",
        Acl,
        &[a(0, "event", Handle)],
    ),
    // ---- libruntime.so ----
    f(RtL, "rtSetDevice", Rt, &[a(0, "devId", DeviceId)]).cb(CbRt, 1),
    f(RtL, "rtDeviceReset", Rt, &[a(0, "devId", DeviceId)]).cb(CbRt, 2),
    f(RtL, "rtStreamCreate", Rt, &[a(1, "priority", Value)])
        .out(0, 8, Stream)
        .cb(CbRt, 7),
    f(RtL, "rtStreamDestroy", Rt, &[a(0, "stm", Stream)]).cb(CbRt, 8),
    f(RtL, "rtStreamSynchronize", Rt, &[a(0, "stm", Stream)]).cb(CbRt, 9),
    f(RtL, "rtEventCreate", Rt, &[]).out(0, 8, Handle),
    f(
        RtL,
        "rtEventRecord",
        Rt,
        &[a(0, "evt", Handle), a(1, "stm", Stream)],
    ),
    f(RtL, "rtEventSynchronize", Rt, &[a(0, "evt", Handle)]),
    f(
        RtL,
        "rtMalloc",
        Rt,
        &[a(1, "size", Bytes), a(2, "type", Value)],
    )
    .out(0, 8, Address)
    .cb(CbRt, 15)
    .role(Role::Alloc(MemoryKind::Device)),
    f(RtL, "rtFree", Rt, &[a(0, "devPtr", Address)])
        .cb(CbRt, 16)
        .role(Role::Free(MemoryKind::Device)),
    f(RtL, "rtMallocHost", Rt, &[a(1, "size", Bytes)])
        .out(0, 8, Address)
        .cb(CbRt, 17)
        .role(Role::Alloc(MemoryKind::Host)),
    f(RtL, "rtFreeHost", Rt, &[a(0, "hostPtr", Address)])
        .cb(CbRt, 18)
        .role(Role::Free(MemoryKind::Host)),
    f(
        RtL,
        "rtMemcpy",
        Rt,
        &[
            a(0, "dst", Address),
            a(2, "src", SrcAddress),
            a(3, "cnt", Bytes),
            a(4, "kind", RtMemcpyKind),
        ],
    )
    .cb(CbRt, 22)
    .task(TaskKind::Memcpy),
    f(
        RtL,
        "rtMemcpyAsync",
        Rt,
        &[
            a(0, "dst", Address),
            a(2, "src", SrcAddress),
            a(3, "cnt", Bytes),
            a(4, "kind", RtMemcpyKind),
            a(5, "stm", Stream),
        ],
    )
    .cb(CbRt, 24)
    .task(TaskKind::Memcpy)
    .asynchronous(),
    f(
        RtL,
        "rtMemset",
        Rt,
        &[
            a(0, "devPtr", Address),
            a(2, "val", Value),
            a(3, "cnt", Bytes),
        ],
    )
    .cb(CbRt, 27)
    .task(TaskKind::Memset),
    f(
        RtL,
        "rtMemsetAsync",
        Rt,
        &[
            a(0, "ptr", Address),
            a(2, "val", Value),
            a(3, "cnt", Bytes),
            a(4, "stm", Stream),
        ],
    )
    .cb(CbRt, 28)
    .task(TaskKind::Memset)
    .asynchronous(),
    f(RtL, "rtDevBinaryRegister", Rt, &[]).out(1, 8, Handle),
    f(RtL, "rtFunctionRegister", Rt, &[a(1, "stubFunc", Handle)])
        .text(2, Text::KernelName)
        .role(Role::RegisterStub),
    f(
        RtL,
        "rtKernelLaunch",
        Rt,
        &[
            a(0, "stubFunc", Handle),
            a(1, "blockDim", BlockDim),
            a(3, "argsSize", Bytes),
            a(5, "stm", Stream),
        ],
    )
    .cb(CbRt, 10)
    .role(Role::LaunchByStub)
    .task(TaskKind::Kernel),
    f(
        RtL,
        "rtKernelLaunchWithHandleV2",
        Rt,
        &[
            a(0, "hdl", Handle),
            a(1, "tilingKey", Value),
            a(2, "blockDim", BlockDim),
            a(5, "stm", Stream),
        ],
    )
    .cb(CbRt, 10)
    .role(Role::LaunchByTilingKey)
    .task(TaskKind::Kernel),
    f(
        RtL,
        "rtLaunchKernelByFuncHandleV3",
        Rt,
        &[
            a(0, "funcHandle", Handle),
            a(1, "blockDim", BlockDim),
            a(3, "stm", Stream),
        ],
    )
    .cb(CbRt, 10)
    .text_via(0, FUNC_HANDLE_NAME, Text::KernelName)
    .role(Role::LaunchByHandle)
    .task(TaskKind::Kernel),
    f(
        RtL,
        "rtCpuKernelLaunch",
        Rt,
        &[
            a(2, "blockDim", BlockDim),
            a(4, "argsSize", Bytes),
            a(6, "stm", Stream),
        ],
    )
    .text(1, Text::KernelName)
    .cb(CbRt, 11)
    .task(TaskKind::Kernel),
    f(RtL, "rtGetTaskIdAndStreamID", Rt, &[]).out(0, 4, Value),
    f(RtL, "rtGetDevice", Rt, &[]).out(0, 4, DeviceId),
    f(RtL, "rtGetDeviceCount", Rt, &[]).out(0, 4, Count),
    f(RtL, "rtDeviceSynchronize", Rt, &[]),
    f(
        RtL,
        "rtStreamWaitEvent",
        Rt,
        &[a(0, "stm", Stream), a(1, "evt", Handle)],
    ),
    f(RtL, "rtEventDestroy", Rt, &[a(0, "evt", Handle)]),
    f(RtL, "rtBinaryLoad", Rt, &[]).out(1, 8, Handle),
    f(RtL, "rtBinaryGetFunctionByName", Rt, &[])
        .text(1, Text::KernelName)
        .out(2, 8, Handle)
        .role(Role::RegisterFunction),
    // ---- libhccl.so ----
    f(HcclL, "HcclGetRootInfo", HcclD, &[]),
    f(
        HcclL,
        "HcclCommInitRootInfo",
        HcclD,
        &[a(0, "nRanks", Count), a(2, "rank", Rank)],
    )
    .out(3, 8, Handle)
    .role(Role::CommInit),
    f(
        HcclL,
        "HcclAllReduce",
        HcclD,
        &[
            a(0, "sendBuf", SrcAddress),
            a(1, "recvBuf", Address),
            a(2, "count", Count),
            a(3, "dataType", DataType),
            a(4, "op", ReduceOp),
            a(5, "comm", Handle),
            a(6, "stream", Stream),
        ],
    )
    .cb(CbHccl, 1)
    .task(TaskKind::Collective),
    f(
        HcclL,
        "HcclBroadcast",
        HcclD,
        &[
            a(0, "buf", Address),
            a(1, "count", Count),
            a(2, "dataType", DataType),
            a(3, "root", Rank),
            a(4, "comm", Handle),
            a(5, "stream", Stream),
        ],
    )
    .cb(CbHccl, 2)
    .task(TaskKind::Collective),
    f(
        HcclL,
        "HcclAllGather",
        HcclD,
        &[
            a(0, "sendBuf", SrcAddress),
            a(1, "recvBuf", Address),
            a(2, "sendCount", Count),
            a(3, "dataType", DataType),
            a(4, "comm", Handle),
            a(5, "stream", Stream),
        ],
    )
    .cb(CbHccl, 3)
    .task(TaskKind::Collective),
    f(
        HcclL,
        "HcclReduceScatter",
        HcclD,
        &[
            a(0, "sendBuf", SrcAddress),
            a(1, "recvBuf", Address),
            a(2, "recvCount", Count),
            a(3, "dataType", DataType),
            a(4, "op", ReduceOp),
            a(5, "comm", Handle),
            a(6, "stream", Stream),
        ],
    )
    .cb(CbHccl, 4)
    .task(TaskKind::Collective)
    .payload(Payload::PerPeer),
    f(
        HcclL,
        "HcclReduce",
        HcclD,
        &[
            a(0, "sendBuf", SrcAddress),
            a(1, "recvBuf", Address),
            a(2, "count", Count),
            a(3, "dataType", DataType),
            a(4, "op", ReduceOp),
            a(5, "root", Rank),
            a(6, "comm", Handle),
            a(7, "stream", Stream),
        ],
    )
    .cb(CbHccl, 5)
    .task(TaskKind::Collective),
    f(
        HcclL,
        "HcclAlltoAll",
        HcclD,
        &[
            a(0, "sendBuf", SrcAddress),
            a(1, "sendCount", Count),
            a(2, "sendType", DataType),
            a(3, "recvBuf", Address),
            a(6, "comm", Handle),
            a(7, "stream", Stream),
        ],
    )
    .cb(CbHccl, 6)
    .task(TaskKind::Collective)
    .payload(Payload::PerPeer),
    f(
        HcclL,
        "HcclSend",
        HcclD,
        &[
            a(0, "sendBuf", SrcAddress),
            a(1, "count", Count),
            a(2, "dataType", DataType),
            a(3, "destRank", Rank),
            a(4, "comm", Handle),
            a(5, "stream", Stream),
        ],
    )
    .cb(CbHccl, 10)
    .task(TaskKind::Collective),
    f(
        HcclL,
        "HcclRecv",
        HcclD,
        &[
            a(0, "recvBuf", Address),
            a(1, "count", Count),
            a(2, "dataType", DataType),
            a(3, "srcRank", Rank),
            a(4, "comm", Handle),
            a(5, "stream", Stream),
        ],
    )
    .cb(CbHccl, 11)
    .task(TaskKind::Collective),
    f(
        HcclL,
        "HcclBarrier",
        HcclD,
        &[a(0, "comm", Handle), a(1, "stream", Stream)],
    )
    .cb(CbHccl, 8)
    .task(TaskKind::Collective)
    .payload(Payload::Nothing),
    f(HcclL, "HcclGetRankId", HcclD, &[a(0, "comm", Handle)]).out(1, 4, Rank),
    f(HcclL, "HcclGetRankSize", HcclD, &[a(0, "comm", Handle)]).out(1, 4, Count),
    f(HcclL, "HcclCommDestroy", HcclD, &[a(0, "comm", Handle)]),
    // ---- libms_tools_ext.so ----
    f(MsToolsExt, "mstxMarkA", Mstx, &[a(1, "stream", Stream)])
        .text(0, Text::Message)
        .ret(Ret::Void)
        .role(Role::MarkA),
    f(
        MsToolsExt,
        "mstxRangeStartA",
        Mstx,
        &[a(1, "stream", Stream)],
    )
    .text(0, Text::Message)
    .ret(Ret::Value(RangeId))
    .role(Role::RangeStartA),
    f(MsToolsExt, "mstxRangeEnd", Mstx, &[a(0, "id", RangeId)])
        .ret(Ret::Void)
        .role(Role::RangeEnd),
    f(MsToolsExt, "mstxDomainCreateA", Mstx, &[])
        .text(0, Text::Message)
        .ret(Ret::Value(Handle))
        .role(Role::DomainCreate),
    f(
        MsToolsExt,
        "mstxDomainDestroy",
        Mstx,
        &[a(0, "handle", Handle)],
    )
    .ret(Ret::Void),
    f(
        MsToolsExt,
        "mstxDomainMarkA",
        Mstx,
        &[a(0, "handle", Handle), a(2, "stream", Stream)],
    )
    .text(1, Text::Message)
    .ret(Ret::Void)
    .role(Role::DomainMark),
    f(
        MsToolsExt,
        "mstxDomainRangeStartA",
        Mstx,
        &[a(0, "handle", Handle), a(2, "stream", Stream)],
    )
    .text(1, Text::Message)
    .ret(Ret::Value(RangeId))
    .role(Role::DomainRangeStart),
    f(
        MsToolsExt,
        "mstxDomainRangeEnd",
        Mstx,
        &[a(0, "handle", Handle), a(1, "id", RangeId)],
    )
    .ret(Ret::Void)
    .role(Role::DomainRangeEnd),
    // ---- libascend_hal.so (driver) ----
    f(
        AscendHal,
        "halGetDeviceInfo",
        Driver,
        &[
            a(0, "devId", DeviceId),
            a(1, "moduleType", Count),
            a(2, "infoType", Rank),
        ],
    )
    .out(3, 8, Value),
    f(
        AscendHal,
        "halSqTaskSend",
        Driver,
        &[a(0, "devId", DeviceId), a(1, "info", Handle)],
    )
    .device_role(ProbeRole::SqSend),
    f(
        AscendHal,
        "halCqReportRecv",
        Driver,
        &[a(0, "devId", DeviceId), a(1, "info", Handle)],
    )
    .device_role(ProbeRole::CqRecv),
];

/// Probe id of a catalog entry (its index; the catalog is far smaller than u16::MAX).
pub fn probe_id(index: usize) -> u16 {
    index as u16
}

/// The entry of probe id `probe`.
pub fn by_probe(probe: u16) -> Option<&'static ProbeDef> {
    CATALOG.get(probe as usize)
}

/// The probe id of function `symbol`.
pub fn find(symbol: &str) -> Option<u16> {
    CATALOG
        .iter()
        .position(|d| d.symbol == symbol)
        .map(probe_id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use tracer_common::{MAX_ARGS, MAX_PROBES};

    #[test]
    fn catalog_is_consistent() {
        assert!(CATALOG.len() < MAX_PROBES as usize);
        let mut seen = HashSet::new();
        for def in CATALOG {
            assert!(seen.insert(def.symbol), "{} listed twice", def.symbol);
            for arg in def.args {
                assert!(
                    (arg.index as usize) < MAX_ARGS,
                    "{}: {}",
                    def.symbol,
                    arg.name
                );
            }
            if let Some((i, _)) = def.text {
                assert!((i as usize) < MAX_ARGS);
            }
            if let Some(out) = def.out {
                assert!((1..=8).contains(&out.size) && (out.index as usize) < MAX_ARGS);
            }
        }
    }

    #[test]
    fn decodes_memcpy_and_status() {
        let def = by_probe(find("aclrtMemcpyAsync").unwrap()).unwrap();
        let args = def.decode_args(&[0x10, 64, 0x20, 48, 1, 0x99, 0, 0], None, None);
        assert_eq!(args.address, Some(0x10));
        assert_eq!(args.src_address, Some(0x20));
        assert_eq!(args.bytes, Some(48));
        assert_eq!(args.memcpy_kind, Some(MemcpyKind::HostToDevice));
        assert_eq!(args.stream, Some(0x99));
        assert_eq!(def.return_value(u64::from(107_000u32)), Some(107_000));
        assert_eq!(
            def.return_value(u64::MAX),
            Some(-1),
            "status is a sign-extended i32"
        );
    }

    #[test]
    fn library_names_match_versioned_files() {
        assert_eq!(Library::from_file_name("libhccl.so"), Some(Library::Hccl));
        assert_eq!(
            Library::from_file_name("libhccl.so.8.0"),
            Some(Library::Hccl)
        );
        assert_eq!(Library::from_file_name("libhccl_plf.so"), None);
        assert_eq!(Domain::parse("acl"), Some(Domain::Acl));
    }
}
