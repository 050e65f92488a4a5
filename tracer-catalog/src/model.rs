//! The probe model: what a catalog entry says about a traced function.
use tracer_common::{
    NO_ARG, ProbeRole, ProbeSpec, SPEC_ALWAYS, SPEC_OUT_SCAN, SPEC_QUIET, SPEC_RANGE_END,
    SPEC_RANGE_START, TEXT_FUNC_HANDLE, TEXT_RAW,
};
use tracer_schema::{
    rows::{ApiArgs, RAW_ARGS},
    vocab::MemoryKind,
};

use crate::decode::{acl_memcpy_kind, hccl_data_type, hccl_reduce_op, rt_memcpy_kind};

/// The name a library file is known by: its file name without the version suffix that
/// follows `.so` (`libhccl.so.8.0` is `libhccl.so`).
pub fn library_base_name(file_name: &str) -> &str {
    match file_name.find(".so.") {
        Some(at) => &file_name[..at + 3],
        None => file_name,
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
    /// Operator calls: aclnn phases, aclop, and the executor calls that join them.
    Op,
    /// Functions of libraries the catalog gives no domain (known only by name).
    Other,
}

impl Domain {
    pub const ALL: [Domain; 7] = [
        Self::Acl,
        Self::Runtime,
        Self::Hccl,
        Self::Mstx,
        Self::Driver,
        Self::Op,
        Self::Other,
    ];
    /// Traced unless the user says otherwise; the driver layer is the runtime's own
    /// plumbing (its report thread polls it) and is opt-in, as are functions of libraries
    /// the catalog does not describe.
    pub const DEFAULT: [Domain; 5] = [Self::Acl, Self::Runtime, Self::Hccl, Self::Mstx, Self::Op];

    pub const fn name(self) -> &'static str {
        match self {
            Self::Acl => "ACL",
            Self::Runtime => "RUNTIME",
            Self::Hccl => "HCCL",
            Self::Mstx => "MSTX",
            Self::Driver => "DRIVER",
            Self::Op => "OP",
            Self::Other => "OTHER",
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

/// What a captured C string argument is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Text {
    KernelName,
    Message,
    /// A pointer to an `rtDevBinary_t` (u32 magic, u32 version, data pointer, u64 length):
    /// its bytes are captured as they are.
    DevBinary,
    /// An operator type (`aclopCompileAndExecuteV2`'s `opType`): names the call's row of
    /// table `op`.
    OpType,
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
    /// Unknown: the raw 64-bit register (functions known only by name).
    Raw,
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
    /// The first phase of a two-phase operator (`aclnnXxxGetWorkspaceSize(..., uint64_t
    /// *workspaceSize, aclOpExecutor **executor)`): its last two integer arguments are
    /// out-parameters at positions the catalog cannot know, so the probes read through every
    /// pointer argument at return ([`tracer_common::SPEC_OUT_SCAN`]) and the correlator finds
    /// the executor among the values by the second phase that runs it.
    OpPrepare,
    /// The second phase (`aclnnXxx(workspace, workspaceSize, executor, stream)`): one
    /// operator call (handle column: the executor; bytes: the workspace size).
    OpLaunch,
    /// An operator compiled and run in one call (`aclopCompileAndExecuteV2`).
    OpCompileExecute,
    /// A graph (model) execution (`aclmdlExecute*`): one operator call per run.
    OpModelExecute,
    /// The executor (handle column) may run more than once: its first phase serves every
    /// run until it is destroyed.
    OpExecutorRepeatable,
    /// The executor (handle column) is gone.
    OpExecutorDestroy,
    /// The executor (handle column) comes from the executor cache (`PTAGetExecCache`): a
    /// new object, whose run has no first phase.
    OpExecutorCached,
}

impl Role {
    /// The [`ProbeSpec`] flags this role sets: what the BPF programs do with such calls
    /// besides recording them.
    pub const fn spec_flags(self) -> u8 {
        match self {
            Self::OpPrepare => SPEC_OUT_SCAN,
            // They name what later calls do: recorded outside capture windows too.
            Self::RegisterStub
            | Self::RegisterFunction
            | Self::RegisterAllKernels
            | Self::CommInit
            | Self::DomainCreate => SPEC_ALWAYS,
            Self::RangeStartA | Self::DomainRangeStart => SPEC_RANGE_START,
            Self::RangeEnd | Self::DomainRangeEnd => SPEC_RANGE_END,
            _ => 0,
        }
    }

    /// Roles of calls that are one operator call each (a row of table `op`).
    pub const fn is_operator_call(self) -> bool {
        matches!(
            self,
            Self::OpLaunch | Self::OpCompileExecute | Self::OpModelExecute
        )
    }
}

/// How an operator call's operator is named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpNaming {
    /// The function name without a prefix and suffix (`aclnnAdd` -> `Add`).
    Symbol {
        strip_prefix: &'static str,
        strip_suffix: &'static str,
    },
    /// The text argument (`aclopCompileAndExecuteV2`'s `opType`).
    Text,
    /// The value of a column after a prefix (`model 3` for `aclmdlExecute`'s model id).
    Column {
        column: Column,
        prefix: &'static str,
    },
}

/// One traced function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeDef {
    /// The library file name (`libascendcl.so`; for a catalog entry, maybe a glob).
    pub library: &'static str,
    /// The function name (for a catalog entry, maybe a glob).
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
    /// How the operator of an operator role is named.
    pub op: Option<OpNaming>,
    /// Known only by name: the first six integer arguments are kept raw.
    pub raw_args: bool,
    /// An argument past the registers' that the probe reads from the stack into
    /// [`tracer_common::FAR_ARG_SLOT`] (its [`Arg::index`] is that slot).
    pub far_arg: Option<u8>,
}

impl ProbeDef {
    /// A function known only by name: its first six integer arguments and its return
    /// register, raw.
    pub fn generic(library: &'static str, symbol: &'static str, domain: Domain) -> Self {
        Self {
            library,
            symbol,
            domain,
            mspti: None,
            args: &[],
            text: None,
            text_from_handle: false,
            out: None,
            ret: Ret::Raw,
            role: Role::Plain,
            task: None,
            is_async: false,
            payload: Payload::Count,
            device_role: ProbeRole::Api,
            op: None,
            raw_args: true,
            far_arg: None,
        }
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
            range_id_arg: match self.role {
                Role::RangeEnd | Role::DomainRangeEnd => self
                    .args
                    .iter()
                    .find(|a| a.column == Column::RangeId)
                    .map_or(NO_ARG, |a| a.index),
                _ => NO_ARG,
            },
            far_arg: self.far_arg.unwrap_or(NO_ARG),
            role: self.device_role as u8,
            flags: if quiet { SPEC_QUIET } else { 0 } | self.role.spec_flags(),
        }
    }

    /// The operator an operator call runs, from its function name, text argument or
    /// columns (see [`OpNaming`]).
    pub fn operator_name(&self, text: &[u8], args: &ApiArgs) -> Option<String> {
        match self.op? {
            OpNaming::Symbol {
                strip_prefix,
                strip_suffix,
            } => {
                let name = self
                    .symbol
                    .strip_prefix(strip_prefix)
                    .unwrap_or(self.symbol);
                Some(name.strip_suffix(strip_suffix).unwrap_or(name).to_owned())
            }
            OpNaming::Text => {
                (!text.is_empty()).then(|| String::from_utf8_lossy(text).into_owned())
            }
            OpNaming::Column { column, prefix } => {
                column_value(args, column).map(|v| format!("{prefix}{v}"))
            }
        }
    }

    /// Typed columns from raw captured values.
    pub fn decode_args(
        &self,
        raw_values: &[u64],
        out_value: Option<u64>,
        ret: Option<u64>,
    ) -> ApiArgs {
        let mut args = ApiArgs::default();
        for arg in self.args {
            if let Some(&v) = raw_values.get(arg.index as usize) {
                set_column(&mut args, arg.column, v);
            }
        }
        if let (Some(out), Some(v)) = (self.out, out_value) {
            set_column(&mut args, out.column, v);
        }
        if let (Ret::Value(column), Some(ret)) = (self.ret, ret) {
            set_column(&mut args, column, ret);
        }
        if self.raw_args {
            let mut raw = [0u64; RAW_ARGS];
            for (slot, v) in raw.iter_mut().zip(raw_values) {
                *slot = *v;
            }
            args.raw = Some(raw);
        }
        args
    }

    /// The return value as recorded: sign-extended status, raw value, or none.
    pub fn return_value(&self, ret: u64) -> Option<i64> {
        match self.ret {
            Ret::Status => Some(i64::from(ret as i32)),
            Ret::Void => None,
            Ret::Value(_) | Ret::Raw => Some(ret as i64),
        }
    }
}

/// A column's value as text (operator names of [`OpNaming::Column`]).
fn column_value(args: &ApiArgs, column: Column) -> Option<String> {
    Some(match column {
        Column::DeviceId => args.device_id?.to_string(),
        Column::Stream => args.stream?.to_string(),
        Column::Bytes => args.bytes?.to_string(),
        Column::Count => args.count?.to_string(),
        Column::AclMemcpyKind | Column::RtMemcpyKind => args.memcpy_kind?.to_string(),
        Column::Address => args.address?.to_string(),
        Column::SrcAddress => args.src_address?.to_string(),
        Column::Value => args.value?.to_string(),
        Column::BlockDim => args.block_dim?.to_string(),
        Column::Handle => args.handle?.to_string(),
        Column::DataType => args.data_type?.to_string(),
        Column::ReduceOp => args.reduce_op?.to_string(),
        Column::Rank => args.rank?.to_string(),
        Column::RangeId => args.range_id?.to_string(),
    })
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
