//! `libascend_hal.so`: the simulated Ascend driver. The runtime hands it every device task as
//! 64-byte SQEs (`halSqTaskSend`) and collects completions as 32-byte CQEs (`halCqReportRecv`);
//! `halGetDeviceInfo` reads the device clock. Behind it sits the simulated device.
#![allow(clippy::missing_safety_doc, non_snake_case)]

mod clock;
mod config;
mod cost;
mod device;
mod exec;
mod prof;
mod task;
mod truth;

use std::time::Duration;

use npu_sim_common::abi::{self, CQE_SIZE, Cqe, HalReportRecvInfo, HalTaskSendInfo, SQE_SIZE, Sqe};
use npu_sim_common::time::{monotonic_ns, tid};
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
            match dev.submit(info.sq_id, &sqes, timeout_ms(info.timeout), tid()) {
                Some(pos) => {
                    info.pos = pos;
                    abi::DRV_ERROR_NONE
                }
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
                    a.u64("sqe_type", s.ty().into())
                        .u64("stream_id", s.stream_id().into());
                    a.u64("task_id", s.task_id().into());
                }
            }
        },
    )
}

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
            info.report_cqe_num = 0;
            if info.cqe_addr.is_null() || info.cqe_num == 0 {
                return abi::DRV_ERROR_INVALID_VALUE;
            }
            let Some(dev) = device::get(devId) else {
                return abi::DRV_ERROR_INVALID_DEVICE;
            };
            let cqes = dev.receive(info.cqe_num as usize, timeout_ms(info.timeout));
            if cqes.is_empty() {
                return abi::DRV_ERROR_WAIT_TIMEOUT;
            }
            for (i, cqe) in cqes.iter().enumerate() {
                // SAFETY: the caller provides room for cqe_num CQEs; Cqe is packed plain data.
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
                a.u64("report_cqe_num", i.report_cqe_num.into());
            }
        },
    )
}
