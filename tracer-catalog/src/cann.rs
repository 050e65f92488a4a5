//! The CANN functions traced, one entry each. Signatures follow the public CANN headers
//! (`shared/reference/cann_abi.h`); msPTI callback domains and ids follow `mspti_cbid.h`.
use tracer_common::ProbeRole;
use tracer_schema::vocab::MemoryKind;

use crate::model::{
    Column, Domain, Library, MsptiDomain, Payload, ProbeDef, Ret, Role, TaskKind, Text, a, f,
};
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
    )
    .task(TaskKind::Sync),
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
    // Graphs (`acl/acl_mdl.h`): a model's tasks are loaded once and run by one
    // model-execute task per execution.
    f(
        AscendCl,
        "aclmdlLoadFromMem",
        Acl,
        &[a(1, "modelSize", Bytes)],
    )
    .out(2, 4, Value),
    f(AscendCl, "aclmdlExecute", Acl, &[a(0, "modelId", Value)]).task(TaskKind::Model),
    f(
        AscendCl,
        "aclmdlExecuteAsync",
        Acl,
        &[a(0, "modelId", Value), a(3, "stream", Stream)],
    )
    .task(TaskKind::Model),
    f(AscendCl, "aclmdlUnload", Acl, &[a(0, "modelId", Value)]),
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
    .kernel_name_from_handle(0)
    .role(Role::LaunchByHandle)
    .task(TaskKind::Kernel),
    f(AscendCl, "aclrtGetDevice", Acl, &[]).out(0, 4, DeviceId),
    f(AscendCl, "aclrtSynchronizeDevice", Acl, &[]).task(TaskKind::Sync),
    f(AscendCl, "aclrtCreateEvent", Acl, &[]).out(0, 8, Handle),
    f(AscendCl, "aclrtDestroyEvent", Acl, &[a(0, "event", Handle)]),
    f(
        AscendCl,
        "aclrtRecordEvent",
        Acl,
        &[a(0, "event", Handle), a(1, "stream", Stream)],
    )
    .task(TaskKind::Sync),
    f(
        AscendCl,
        "aclrtStreamWaitEvent",
        Acl,
        &[a(0, "stream", Stream), a(1, "event", Handle)],
    )
    .task(TaskKind::Sync),
    f(
        AscendCl,
        "aclrtSynchronizeEvent",
        Acl,
        &[a(0, "event", Handle)],
    )
    .task(TaskKind::Sync),
    // ---- libruntime.so ----
    f(RtL, "rtSetDevice", Rt, &[a(0, "devId", DeviceId)]).cb(CbRt, 1),
    f(RtL, "rtDeviceReset", Rt, &[a(0, "devId", DeviceId)]).cb(CbRt, 2),
    f(RtL, "rtStreamCreate", Rt, &[a(1, "priority", Value)])
        .out(0, 8, Stream)
        .cb(CbRt, 7),
    f(RtL, "rtStreamDestroy", Rt, &[a(0, "stm", Stream)]).cb(CbRt, 8),
    f(RtL, "rtStreamSynchronize", Rt, &[a(0, "stm", Stream)])
        .cb(CbRt, 9)
        .task(TaskKind::Sync),
    f(RtL, "rtEventCreate", Rt, &[]).out(0, 8, Handle),
    f(
        RtL,
        "rtEventRecord",
        Rt,
        &[a(0, "evt", Handle), a(1, "stm", Stream)],
    )
    .task(TaskKind::Sync),
    f(RtL, "rtEventSynchronize", Rt, &[a(0, "evt", Handle)]).task(TaskKind::Sync),
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
    // The kernel's name is the 4th argument, kernelInfoExt (the device function's name);
    // the 3rd, stubName, names the host stub (RT runtime.cc `Runtime::KernelRegister`).
    f(RtL, "rtFunctionRegister", Rt, &[a(1, "stubFunc", Handle)])
        .text(3, Text::KernelName)
        .role(Role::RegisterStub),
    f(RtL, "rtRegisterAllKernel", Rt, &[a(0, "bin", Address)])
        .text(0, Text::DevBinary)
        .out(1, 8, Handle)
        .role(Role::RegisterAllKernels)
        .device_role(ProbeRole::CaptureBinary),
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
    .kernel_name_from_handle(0)
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
    f(RtL, "rtDeviceSynchronize", Rt, &[]).task(TaskKind::Sync),
    f(
        RtL,
        "rtStreamWaitEvent",
        Rt,
        &[a(0, "stm", Stream), a(1, "evt", Handle)],
    )
    .task(TaskKind::Sync),
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
    // A model's tasks loaded in bulk (RT `Model::SendSqe`), run by model-execute tasks.
    f(
        AscendHal,
        "halStreamTaskFill",
        Driver,
        &[
            a(0, "dev_id", DeviceId),
            a(1, "stream_id", Value),
            a(4, "task_cnt", Count),
        ],
    )
    .device_role(ProbeRole::StreamFill),
    // Another profiler's reads of a profiling channel it owns (passive mode).
    f(
        AscendHal,
        "prof_channel_read",
        Driver,
        &[
            a(0, "device_id", DeviceId),
            a(1, "channel_id", Count),
            a(2, "out_buf", Address),
            a(3, "buf_size", Bytes),
        ],
    )
    .device_role(ProbeRole::ChannelRead),
];
