//! The probe model: what a catalog entry says about a traced function.
use tracer_common::{NO_ARG, ProbeRole, ProbeSpec, SPEC_QUIET, TEXT_FUNC_HANDLE, TEXT_RAW};
use tracer_schema::{rows::ApiArgs, vocab::MemoryKind};

use crate::decode::{acl_memcpy_kind, hccl_data_type, hccl_reduce_op, rt_memcpy_kind};

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

pub(crate) const fn a(index: u8, name: &'static str, column: Column) -> Arg {
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
    /// A pointer to an `rtDevBinary_t` (u32 magic, u32 version, data pointer, u64 length):
    /// its bytes are captured as they are.
    DevBinary,
}

/// The device task a call submits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskKind {
    Kernel,
    Memcpy,
    Memset,
    Collective,
    /// Event record or wait, notify: ordering between streams, no data.
    Sync,
    /// A model (graph) execution: the model-execute task and the model's tasks it runs,
    /// each of the kind its SQE type says.
    Model,
}

impl TaskKind {
    /// Kinds whose tasks of one call make one row: the runtime performs a memset as one or
    /// more copies, and a collective as notifies and transfers.
    pub const FOLDED: [TaskKind; 2] = [TaskKind::Memset, TaskKind::Collective];

    pub fn folds(self) -> bool {
        Self::FOLDED.contains(&self)
    }
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
    /// `rtRegisterAllKernel(bin, hdl)`: every kernel symbol of the device ELF that `bin`
    /// (an `rtDevBinary_t`, address column) carries becomes a function of the returned
    /// binary handle, found by the tiling key its name ends in (`_<digits>`, RT
    /// `program.cc` `ElfProgram::BuildNewKernel`).
    RegisterAllKernels,
    /// Launch whose handle column is a function handle named by [`Role::RegisterFunction`].
    LaunchByHandle,
    /// Launch whose handle column is a stub named by [`Role::RegisterStub`] or its ELF symbol.
    LaunchByStub,
    /// `rtKernelLaunchWithHandleV2(hdl, tilingKey, ...)`: on a binary of
    /// [`Role::RegisterAllKernels`] the kernel whose name ends in `_<tilingKey>`; otherwise
    /// function number `tilingKey` registered on binary `hdl`, in registration order.
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
    /// The text argument is a function handle, named through the handle layout (the chip's
    /// `DeviceLayout`): it names kernels whose handles were created before tracing began,
    /// which no registration call can tell.
    pub text_from_handle: bool,
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

pub(crate) const fn f(
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
        text_from_handle: false,
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
    pub(crate) const fn cb(mut self, domain: MsptiDomain, id: u32) -> Self {
        self.mspti = Some((domain, id));
        self
    }
    pub(crate) const fn text(mut self, index: u8, text: Text) -> Self {
        self.text = Some((index, text));
        self
    }
    pub(crate) const fn kernel_name_from_handle(mut self, index: u8) -> Self {
        self.text = Some((index, Text::KernelName));
        self.text_from_handle = true;
        self
    }
    pub(crate) const fn out(mut self, index: u8, size: u8, column: Column) -> Self {
        self.out = Some(Out {
            index,
            size,
            column,
        });
        self
    }
    pub(crate) const fn ret(mut self, ret: Ret) -> Self {
        self.ret = ret;
        self
    }
    pub(crate) const fn role(mut self, role: Role) -> Self {
        self.role = role;
        self
    }
    pub(crate) const fn task(mut self, task: TaskKind) -> Self {
        self.task = Some(task);
        self
    }
    pub(crate) const fn asynchronous(mut self) -> Self {
        self.is_async = true;
        self
    }
    pub(crate) const fn payload(mut self, payload: Payload) -> Self {
        self.payload = payload;
        self
    }
    pub(crate) const fn device_role(mut self, role: ProbeRole) -> Self {
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
            text_flags: match self.text {
                _ if self.text_from_handle => TEXT_FUNC_HANDLE,
                Some((_, Text::DevBinary)) => TEXT_RAW,
                _ => 0,
            },
            _pad: 0,
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
