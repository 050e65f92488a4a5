//! `libascend_hal.so`: the simulated Ascend driver. The runtime hands it every device task as
//! 64-byte SQEs (`halSqTaskSend`), learns which finished from the SQ head (`halSqCqQuery`) and
//! collects the few completion entries tasks write as 32-byte CQEs (`halCqReportRecv`);
//! `halGetDeviceInfo` reads the device clock. Behind it sits the simulated device.
#![allow(clippy::missing_safety_doc, non_snake_case)]

mod clock;
mod config;
mod cost;
mod device;
mod exec;
mod prof;
mod res;
mod task;
mod truth;

use std::time::Duration;

use npu_sim_common::abi::{
    self, CQE_SIZE, Cqe, HalReportRecvInfo, HalResourceIdInputInfo, HalResourceIdOutputInfo,
    HalSqCqFreeInfo, HalSqCqInputInfo, HalSqCqOutputInfo, HalSqCqQueryInfo, HalTaskSendInfo,
    SQE_SIZE, Sqe,
};
use npu_sim_common::time::{monotonic_ns, pid, tid};
use npu_sim_common::trace::api;

pub(crate) const LIB: &str = "libascend_hal.so";

/// A timeout field in ms: `None` (wait forever) when not positive.
fn timeout_ms(ms: i32) -> Option<Duration> {
    (ms > 0).then(|| Duration::from_millis(ms as u64))
}

// SAFETY: the C caller's contract: `value` is null or valid for what the prototype says it points
// to.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn halGetDeviceInfo(
    devId: u32,
    moduleType: i32,
    infoType: i32,
    value: *mut i64,
) -> i32 {
    api(
        LIB,
        "halGetDeviceInfo",
        || {
            if value.is_null() {
                return abi::DRV_ERROR_INVALID_VALUE;
            }
            let Some(dev) = device::get(devId) else {
                return abi::DRV_ERROR_INVALID_DEVICE;
            };
            let v = match (moduleType, infoType) {
                (abi::MODULE_TYPE_SYSTEM, abi::INFO_TYPE_SYS_COUNT) => {
                    dev.cfg.clock.cnt_at(monotonic_ns()) as i64
                }
                (abi::MODULE_TYPE_SYSTEM, abi::INFO_TYPE_DEV_OSC_FREQUE) => {
                    (dev.cfg.clock.freq_hz / 1000) as i64
                }
                (abi::MODULE_TYPE_SYSTEM, abi::INFO_TYPE_VERSION) => {
                    i64::from(dev.cfg.chip.chip_id() << 8)
                }
                _ => return abi::DRV_ERROR_NOT_SUPPORT,
            };
            // SAFETY: checked non-null; the caller provides a writable int64_t.
            unsafe { *value = v };
            abi::DRV_ERROR_NONE
        },
        |a| {
            a.u64("devId", devId.into())
                .i64("moduleType", moduleType.into())
                .i64("infoType", infoType.into());
            a.u64("value", value as u64);
            if !value.is_null() {
                // SAFETY: non-null out-parameter, written above or left as the caller set it.
                a.i64("out_value", unsafe { *value });
            }
        },
    )
}

/// `drvError_t drvGetDevNum(uint32_t *num_dev)` (hicann/driver `pkg_inc/ascend_hal.h`): the
/// devices of this host, as profilers enumerate them before starting channels.
// SAFETY: the C caller's contract: `num_dev` is null or a writable uint32_t.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn drvGetDevNum(num_dev: *mut u32) -> i32 {
    api(
        LIB,
        "drvGetDevNum",
        || {
            if num_dev.is_null() {
                return abi::DRV_ERROR_INVALID_VALUE;
            }
            // SAFETY: checked non-null; the caller provides a writable uint32_t.
            unsafe { *num_dev = config::get().device_count };
            abi::DRV_ERROR_NONE
        },
        |a| {
            a.u64("num_dev", num_dev as u64);
        },
    )
}

/// `drvError_t drvGetDevIDs(uint32_t *devices, uint32_t len)`: the logical ids of the
/// host's devices, 0..count here.
// SAFETY: the C caller's contract: `devices` is null or writable for `len` ids.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn drvGetDevIDs(devices: *mut u32, len: u32) -> i32 {
    api(
        LIB,
        "drvGetDevIDs",
        || {
            let count = config::get().device_count;
            if devices.is_null() || len < count {
                return abi::DRV_ERROR_INVALID_VALUE;
            }
            for id in 0..count {
                // SAFETY: `id < count <= len`, and the caller's buffer holds `len` ids.
                unsafe { *devices.add(id as usize) = id };
            }
            abi::DRV_ERROR_NONE
        },
        |a| {
            a.u64("devices", devices as u64).u64("len", len.into());
        },
    )
}

// SAFETY: the C caller's contract: `info` is null or valid for what the prototype says it points
// to.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn halSqTaskSend(devId: u32, info: *mut HalTaskSendInfo) -> i32 {
    api(
        LIB,
        "halSqTaskSend",
        || {
            // SAFETY: the caller passes null or a valid halTaskSendInfo.
            let Some(info) = (unsafe { info.as_mut() }) else {
                return abi::DRV_ERROR_INVALID_VALUE;
            };
            if info.sqe_addr.is_null() || info.sqe_num == 0 {
                return abi::DRV_ERROR_INVALID_VALUE;
            }
            let Some(dev) = device::get(devId) else {
                return abi::DRV_ERROR_INVALID_DEVICE;
            };
            let sqes: Vec<Sqe> = (0..info.sqe_num as usize)
                .map(|i| {
                    let mut s = Sqe::default();
                    // SAFETY: the caller provides sqe_num SQEs of 64 bytes at sqe_addr.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            info.sqe_addr.add(i * SQE_SIZE),
                            s.0.as_mut_ptr(),
                            SQE_SIZE,
                        )
                    };
                    s
                })
                .collect();
            if info.type_ != abi::DRV_NORMAL_TYPE {
                return abi::DRV_ERROR_NOT_SUPPORT;
            }
            match dev.submit(info.sq_id, &sqes, timeout_ms(info.timeout), tid()) {
                Some(Ok(pos)) => {
                    info.pos = pos;
                    abi::DRV_ERROR_NONE
                }
                Some(Err(())) => abi::DRV_ERROR_INVALID_VALUE,
                None => abi::DRV_ERROR_WAIT_TIMEOUT,
            }
        },
        |a| {
            a.u64("devId", devId.into()).u64("info", info as u64);
            // SAFETY: as above.
            if let Some(i) = unsafe { info.as_ref() } {
                a.i64("type", i.type_.into())
                    .u64("tsId", i.ts_id.into())
                    .u64("sqId", i.sq_id.into());
                a.i64("timeout", i.timeout.into())
                    .u64("sqe_num", i.sqe_num.into())
                    .u64("pos", i.pos.into());
                if !i.sqe_addr.is_null() && i.sqe_num > 0 {
                    let mut s = Sqe::default();
                    // SAFETY: at least one SQE at sqe_addr.
                    unsafe {
                        std::ptr::copy_nonoverlapping(i.sqe_addr, s.0.as_mut_ptr(), SQE_SIZE)
                    };
                    let chip = config::get().chip;
                    a.u64("sqe_type", s.ty().into());
                    if let Some(f) = s.header_stream_field(chip) {
                        a.u64("stream_id", (f & !abi::RT_SYNC_TASK_FLAG).into());
                    }
                    a.u64("task_id", s.header_task_id(chip).into())
                        .bool("wr_cqe", s.wr_cqe(chip));
                }
            }
        },
    )
}

/// `drvError_t halCqReportRecv(uint32_t devId, struct halReportRecvInfo *info)`: CQEs of the
/// logic CQ `info->cqId` (`DRV_LOGIC_TYPE`), as the driver's version-1 receive hands them out
/// (see `Device::receive` in `device.rs`). `timeout` is in ms: -1 waits forever, 0 returns at once
/// (success with `report_cqe_num` 0 when there is nothing).
// SAFETY: the C caller's contract: `info` is null or valid for what the prototype says it points
// to.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn halCqReportRecv(devId: u32, info: *mut HalReportRecvInfo) -> i32 {
    api(
        LIB,
        "halCqReportRecv",
        || {
            // SAFETY: the caller passes null or a valid halReportRecvInfo.
            let Some(info) = (unsafe { info.as_mut() }) else {
                return abi::DRV_ERROR_INVALID_VALUE;
            };
            // The user-space driver marks the call as the "version 1" (match-aware) receive.
            info.res[0] = 1;
            info.report_cqe_num = 0;
            if info.cqe_addr.is_null() || info.cqe_num == 0 || info.timeout < -1 {
                return abi::DRV_ERROR_INVALID_VALUE;
            }
            if info.type_ != abi::DRV_LOGIC_TYPE {
                return abi::DRV_ERROR_NOT_SUPPORT;
            }
            let Some(dev) = device::get(devId) else {
                return abi::DRV_ERROR_INVALID_DEVICE;
            };
            let timeout = (info.timeout >= 0).then(|| Duration::from_millis(info.timeout as u64));
            let cqes = match dev.receive(
                info.cq_id,
                info.stream_id,
                info.task_id,
                info.cqe_num as usize,
                timeout,
            ) {
                Ok(c) => c,
                Err(device::RecvError::Timeout) => return abi::DRV_ERROR_WAIT_TIMEOUT,
                Err(device::RecvError::NoCq) => return abi::DRV_ERROR_INVALID_VALUE,
            };
            for (i, cqe) in cqes.iter().enumerate() {
                // SAFETY: the caller provides room for cqe_num CQEs (cqes.len() <= cqe_num);
                // Cqe is plain data.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        (cqe as *const Cqe).cast::<u8>(),
                        info.cqe_addr.add(i * CQE_SIZE),
                        CQE_SIZE,
                    )
                };
            }
            info.report_cqe_num = cqes.len() as u32;
            abi::DRV_ERROR_NONE
        },
        |a| {
            a.u64("devId", devId.into()).u64("info", info as u64);
            // SAFETY: as above.
            if let Some(i) = unsafe { info.as_ref() } {
                a.i64("type", i.type_.into())
                    .u64("tsId", i.ts_id.into())
                    .u64("cqId", i.cq_id.into());
                a.i64("timeout", i.timeout.into())
                    .u64("cqe_num", i.cqe_num.into());
                a.u64("stream_id", i.stream_id.into())
                    .u64("task_id", i.task_id.into());
                a.u64("report_cqe_num", i.report_cqe_num.into());
            }
        },
    )
}

/// `drvError_t halSqCqQuery(uint32_t devId, struct halSqCqQueryInfo *info)` (DRV
/// pkg_inc/ascend_hal_base.h): a property of a normal SQ in `value[0]`: its head (the position
/// of its oldest unfinished task), tail, depth, status, or whether it wrote a CQE since the last
/// query (read clear).
// SAFETY: the C caller's contract: `info` is null or a valid halSqCqQueryInfo.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn halSqCqQuery(devId: u32, info: *mut HalSqCqQueryInfo) -> i32 {
    api(
        LIB,
        "halSqCqQuery",
        || {
            // SAFETY: the caller passes null or a valid halSqCqQueryInfo.
            let Some(info) = (unsafe { info.as_mut() }) else {
                return abi::DRV_ERROR_INVALID_VALUE;
            };
            let Some(dev) = device::get(devId) else {
                return abi::DRV_ERROR_INVALID_VALUE;
            };
            if info.type_ != abi::DRV_NORMAL_TYPE {
                return abi::DRV_ERROR_NOT_SUPPORT;
            }
            if !matches!(
                info.prop,
                abi::DRV_SQCQ_PROP_SQ_STATUS
                    | abi::DRV_SQCQ_PROP_SQ_HEAD
                    | abi::DRV_SQCQ_PROP_SQ_TAIL
                    | abi::DRV_SQCQ_PROP_SQ_CQE_STATUS
                    | abi::DRV_SQCQ_PROP_SQ_DEPTH
            ) {
                return abi::DRV_ERROR_NOT_SUPPORT;
            }
            match dev.query_sq(info.sq_id, info.prop) {
                Some(v) => {
                    info.value[0] = v;
                    abi::DRV_ERROR_NONE
                }
                None => abi::DRV_ERROR_INVALID_VALUE,
            }
        },
        |a| {
            a.u64("devId", devId.into()).u64("info", info as u64);
            // SAFETY: as above.
            if let Some(i) = unsafe { info.as_ref() } {
                a.i64("type", i.type_.into())
                    .u64("sqId", i.sq_id.into())
                    .i64("prop", i.prop.into());
                a.u64("value", i.value[0].into());
            }
        },
    )
}

/// `DVresult drvMemcpy(DVdeviceptr dst, size_t dest_max, DVdeviceptr src, size_t byte_count)`
/// (DRV pkg_inc/ascend_hal_base.h): the synchronous copy behind `rtMemcpy` on 910B (RT
/// npu_driver_mem.cc `MemCopySync`): the driver moves the bytes on the calling thread; no
/// stream, no SQE.
#[unsafe(no_mangle)]
pub extern "C" fn drvMemcpy(dst: u64, dest_max: usize, src: u64, byte_count: usize) -> i32 {
    api(
        LIB,
        "drvMemcpy",
        || {
            if dst == 0 || src == 0 || byte_count > dest_max {
                return abi::DRV_ERROR_INVALID_VALUE;
            }
            let start = monotonic_ns();
            // SAFETY: the runtime checked both ranges against its allocations; device memory
            // is host memory here.
            unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, byte_count) };
            exec::sleep_until(start + cost::dma_ns(config::get(), byte_count as u64));
            abi::DRV_ERROR_NONE
        },
        |a| {
            a.u64("dst", dst).u64("dest_max", dest_max as u64);
            a.u64("src", src).u64("byte_count", byte_count as u64);
        },
    )
}

/// `DVresult drvMemsetD8(DVdeviceptr dst, size_t destMax, UINT8 value, size_t num)`: the
/// synchronous memset behind `rtMemset` (RT npu_driver_mem.cc `MemSetSync`); no stream, no SQE.
#[unsafe(no_mangle)]
pub extern "C" fn drvMemsetD8(dst: u64, destMax: usize, value: u8, num: usize) -> i32 {
    api(
        LIB,
        "drvMemsetD8",
        || {
            if dst == 0 || num > destMax {
                return abi::DRV_ERROR_INVALID_VALUE;
            }
            let start = monotonic_ns();
            // SAFETY: the runtime checked the range lies in one device allocation.
            unsafe { std::ptr::write_bytes(dst as *mut u8, value, num) };
            exec::sleep_until(start + cost::memset_ns(config::get(), num as u64));
            abi::DRV_ERROR_NONE
        },
        |a| {
            a.u64("dst", dst).u64("destMax", destMax as u64);
            a.u64("value", value.into()).u64("num", num as u64);
        },
    )
}

/// The id space of a `drvIdType_t`, for the types the simulator hands out.
fn id_kind(ty: i32) -> Option<res::Kind> {
    match ty {
        abi::DRV_STREAM_ID => Some(res::Kind::Stream),
        abi::DRV_MODEL_ID => Some(res::Kind::Model),
        _ => None,
    }
}

/// `drvError_t halResourceIdAlloc(uint32_t devId, struct halResourceIdInputInfo *in, struct
/// halResourceIdOutputInfo *out)` (DRV pkg_inc/ascend_hal_base.h): a device-wide stream id
/// (`DRV_STREAM_ID`, RT `NpuDriver::StreamIdAlloc`) or model id (`DRV_MODEL_ID`), unique among
/// all processes of the simulated host using the device.
// SAFETY: the C caller's contract: `input` and `out` are null or valid structs.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn halResourceIdAlloc(
    devId: u32,
    input: *mut HalResourceIdInputInfo,
    out: *mut HalResourceIdOutputInfo,
) -> i32 {
    api(
        LIB,
        "halResourceIdAlloc",
        || {
            // SAFETY: null or valid, per the contract.
            let (Some(i), Some(o)) = (unsafe { input.as_ref() }, unsafe { out.as_mut() }) else {
                return abi::DRV_ERROR_INVALID_VALUE;
            };
            if device::get(devId).is_none() {
                return abi::DRV_ERROR_INVALID_VALUE;
            }
            let Some(kind) = id_kind(i.type_) else {
                return abi::DRV_ERROR_NOT_SUPPORT;
            };
            let Some(ids) = res::of(devId) else {
                return abi::DRV_ERROR_INNER_ERR;
            };
            match ids.alloc(kind, pid()) {
                Some(id) => {
                    o.resource_id = id;
                    abi::DRV_ERROR_NONE
                }
                None => abi::DRV_ERROR_NO_RESOURCES,
            }
        },
        |a| {
            a.u64("devId", devId.into()).u64("in", input as u64);
            // SAFETY: as above.
            if let Some(i) = unsafe { input.as_ref() } {
                a.i64("type", i.type_.into()).u64("tsId", i.ts_id.into());
            }
            a.u64("out", out as u64);
            // SAFETY: as above.
            if let Some(o) = unsafe { out.as_ref() } {
                a.u64("resourceId", o.resource_id.into());
            }
        },
    )
}

/// `drvError_t halResourceIdFree(uint32_t devId, struct halResourceIdInputInfo *in)`.
// SAFETY: the C caller's contract: `input` is null or a valid struct.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn halResourceIdFree(devId: u32, input: *mut HalResourceIdInputInfo) -> i32 {
    api(
        LIB,
        "halResourceIdFree",
        || {
            // SAFETY: null or valid, per the contract.
            let Some(i) = (unsafe { input.as_ref() }) else {
                return abi::DRV_ERROR_INVALID_VALUE;
            };
            let Some(kind) = id_kind(i.type_) else {
                return abi::DRV_ERROR_NOT_SUPPORT;
            };
            match res::of(devId) {
                Some(ids) if ids.free(kind, i.resource_id, pid()) => abi::DRV_ERROR_NONE,
                _ => abi::DRV_ERROR_INVALID_VALUE,
            }
        },
        |a| {
            a.u64("devId", devId.into()).u64("in", input as u64);
            // SAFETY: as above.
            if let Some(i) = unsafe { input.as_ref() } {
                a.i64("type", i.type_.into())
                    .u64("resourceId", i.resource_id.into());
            }
        },
    )
}

/// `drvError_t halSqCqAllocate(uint32_t devId, struct halSqCqInputInfo *in, struct
/// halSqCqOutputInfo *out)`: for `DRV_NORMAL_TYPE` an SQ and its CQ for the stream in
/// `in->info[0]` (RT `NpuDriver::NormalSqCqAllocate`); for `DRV_LOGIC_TYPE` the logic CQ that
/// receives that stream's CQEs (`LogicCqAllocateV2`, `out->sqId` = UINT32_MAX). Ids are
/// device-wide.
// SAFETY: the C caller's contract: `input` and `out` are null or valid structs.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn halSqCqAllocate(
    devId: u32,
    input: *mut HalSqCqInputInfo,
    out: *mut HalSqCqOutputInfo,
) -> i32 {
    api(
        LIB,
        "halSqCqAllocate",
        || {
            // SAFETY: null or valid, per the contract.
            let (Some(i), Some(o)) = (unsafe { input.as_ref() }, unsafe { out.as_mut() }) else {
                return abi::DRV_ERROR_INVALID_VALUE;
            };
            let Some(dev) = device::get(devId) else {
                return abi::DRV_ERROR_INVALID_VALUE;
            };
            let Some(ids) = res::of(devId) else {
                return abi::DRV_ERROR_INNER_ERR;
            };
            let Ok(stream) = u16::try_from(i.info[0]) else {
                return abi::DRV_ERROR_INVALID_VALUE;
            };
            let me = pid();
            match i.type_ {
                abi::DRV_NORMAL_TYPE => {
                    let Some(sq) = ids.alloc(res::Kind::Sq, me) else {
                        return abi::DRV_ERROR_SQID_FULL;
                    };
                    let Some(cq) = ids.alloc(res::Kind::Cq, me) else {
                        ids.free(res::Kind::Sq, sq, me);
                        return abi::DRV_ERROR_NO_RESOURCES;
                    };
                    dev.add_sq(sq, stream);
                    *o = HalSqCqOutputInfo {
                        sq_id: sq,
                        cq_id: cq,
                        ..HalSqCqOutputInfo::default()
                    };
                    abi::DRV_ERROR_NONE
                }
                abi::DRV_LOGIC_TYPE => {
                    let Some(cq) = ids.alloc(res::Kind::LogicCq, me) else {
                        return abi::DRV_ERROR_NO_RESOURCES;
                    };
                    dev.add_logic_cq(cq, stream);
                    *o = HalSqCqOutputInfo {
                        sq_id: u32::MAX,
                        cq_id: cq,
                        ..HalSqCqOutputInfo::default()
                    };
                    abi::DRV_ERROR_NONE
                }
                _ => abi::DRV_ERROR_NOT_SUPPORT,
            }
        },
        |a| {
            a.u64("devId", devId.into()).u64("in", input as u64);
            // SAFETY: as above.
            if let Some(i) = unsafe { input.as_ref() } {
                a.i64("type", i.type_.into())
                    .u64("tsId", i.ts_id.into())
                    .u64("stream_id", i.info[0].into());
            }
            a.u64("out", out as u64);
            // SAFETY: as above.
            if let Some(o) = unsafe { out.as_ref() } {
                a.u64("sqId", o.sq_id.into()).u64("cqId", o.cq_id.into());
            }
        },
    )
}

/// `drvError_t halSqCqFree(uint32_t devId, struct halSqCqFreeInfo *info)`.
// SAFETY: the C caller's contract: `info` is null or a valid struct.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn halSqCqFree(devId: u32, info: *mut HalSqCqFreeInfo) -> i32 {
    api(
        LIB,
        "halSqCqFree",
        || {
            // SAFETY: null or valid, per the contract.
            let Some(i) = (unsafe { info.as_ref() }) else {
                return abi::DRV_ERROR_INVALID_VALUE;
            };
            let (Some(dev), Some(ids)) = (device::get(devId), res::of(devId)) else {
                return abi::DRV_ERROR_INVALID_VALUE;
            };
            let me = pid();
            match i.type_ {
                abi::DRV_NORMAL_TYPE => {
                    if !dev.remove_sq(i.sq_id) {
                        return abi::DRV_ERROR_INVALID_VALUE;
                    }
                    ids.free(res::Kind::Sq, i.sq_id, me);
                    ids.free(res::Kind::Cq, i.cq_id, me);
                    abi::DRV_ERROR_NONE
                }
                abi::DRV_LOGIC_TYPE => {
                    if !dev.remove_logic_cq(i.cq_id) {
                        return abi::DRV_ERROR_INVALID_VALUE;
                    }
                    ids.free(res::Kind::LogicCq, i.cq_id, me);
                    abi::DRV_ERROR_NONE
                }
                _ => abi::DRV_ERROR_NOT_SUPPORT,
            }
        },
        |a| {
            a.u64("devId", devId.into()).u64("info", info as u64);
            // SAFETY: as above.
            if let Some(i) = unsafe { info.as_ref() } {
                a.i64("type", i.type_.into())
                    .u64("sqId", i.sq_id.into())
                    .u64("cqId", i.cq_id.into());
            }
        },
    )
}

/// `drvError_t halStreamTaskFill(uint32_t dev_id, uint32_t stream_id, void *stream_mem, void
/// *task_info, uint32_t task_cnt)` (DRV pkg_inc/ascend_hal_base.h): loads `task_cnt` 64-byte
/// SQEs at `task_info` as the tasks of model stream `stream_id` in one call (RT
/// `Model::SendSqe`); a model-execute task naming the stream runs them. `stream_mem` (the SQ
/// memory) is not needed by the simulated device.
// SAFETY: the C caller's contract: `task_info` is null or holds `task_cnt` SQEs.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn halStreamTaskFill(
    dev_id: u32,
    stream_id: u32,
    stream_mem: *mut std::ffi::c_void,
    task_info: *mut std::ffi::c_void,
    task_cnt: u32,
) -> i32 {
    api(
        LIB,
        "halStreamTaskFill",
        || {
            if task_info.is_null() || task_cnt == 0 {
                return abi::DRV_ERROR_INVALID_VALUE;
            }
            let (Some(dev), Ok(stream)) = (device::get(dev_id), u16::try_from(stream_id)) else {
                return abi::DRV_ERROR_INVALID_VALUE;
            };
            let sqes: Vec<Sqe> = (0..task_cnt as usize)
                .map(|i| {
                    let mut s = Sqe::default();
                    // SAFETY: the caller provides task_cnt SQEs of 64 bytes at task_info.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            task_info.cast::<u8>().add(i * SQE_SIZE),
                            s.0.as_mut_ptr(),
                            SQE_SIZE,
                        )
                    };
                    s
                })
                .collect();
            if dev.fill(stream, sqes) {
                abi::DRV_ERROR_NONE
            } else {
                abi::DRV_ERROR_INVALID_VALUE
            }
        },
        |a| {
            a.u64("dev_id", dev_id.into())
                .u64("stream_id", stream_id.into())
                .u64("stream_mem", stream_mem as u64);
            a.u64("task_info", task_info as u64)
                .u64("task_cnt", task_cnt.into());
        },
    )
}
