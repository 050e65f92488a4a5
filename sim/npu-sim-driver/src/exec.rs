//! Executing one task on a core: doing its work (copies really copy, memsets really set,
//! collectives run libhccl's exchange) and holding the core for the modelled duration.
use std::collections::HashMap;
use std::sync::Mutex;

use npu_sim_common::abi::{self, annot, kind, pl};
use npu_sim_common::time::monotonic_ns;

use crate::config::Config;
use crate::cost;
use crate::prof::emit;
use crate::task::{Outcome, Task, name_of};

/// A device-side function a library put in an SQE (libhccl's collective steps): runs on the
/// core, returns a CQE error code.
type DeviceCall = unsafe extern "C" fn(ctx: u64) -> u32;

/// Calls the device function in `fn_addr` with `ctx`; 507000 for a null function.
fn call(fn_addr: u64, ctx: u64) -> u32 {
    if fn_addr == 0 {
        return abi::ACL_ERROR_RT_INTERNAL_ERROR as u32;
    }
    // SAFETY: the submitting library put a function of type `DeviceCall` and its context in
    // this SQE, for exactly one execution.
    unsafe {
        let f = std::mem::transmute::<usize, DeviceCall>(fn_addr as usize);
        f(ctx)
    }
}

/// Whether `task` is an SDMA task on its chip (the same type, 11, on v100 and v2).
fn is_sdma(task: &Task) -> bool {
    task.sqe.ty() == abi::v100::SDMA
}

/// Runs `task` on a core of device `dev`. Its begin and end times go through `prof::emit`,
/// which logs them on the device's profiling channel when that is on.
pub(crate) fn run(dev: u32, cfg: &Config, task: &Task) -> Outcome {
    let sqe = &task.sqe;
    let k = sqe.kind();
    if k == kind::HCCL && sqe.u32_at(pl::HCCL_STEP) == 0 && cfg.straggler_ms > 0 {
        // A straggler's device is late to every collective: idle time before its first task.
        std::thread::sleep(std::time::Duration::from_millis(cfg.straggler_ms));
    }
    let start_ns = emit::stamp(dev, cfg, task, abi::STARS_FUNC_TYPE_BEGIN);
    let mut status = 0u32;
    let busy_until = match k {
        kind::KERNEL => {
            let name = name_of(sqe, annot::NAME);
            if kernel_faults(cfg, &name) {
                status = abi::ACL_ERROR_RT_AICORE_EXCEPTION as u32;
            }
            let engine = sqe.u32_at(pl::KERNEL_ENGINE);
            start_ns + cost::kernel_ns(cfg, engine, &name, sqe.block_dim())
        }
        kind::MEMCPY | kind::MEMSET | kind::HCCL if is_sdma(task) => {
            let (a, b) = (sqe.u64_at(pl::COPY_SRC), sqe.u64_at(pl::COPY_DST));
            let bytes = sqe.u64_at(pl::COPY_BYTES);
            match sqe.u32_at(pl::SDMA_OP) {
                abi::SDMA_OP_CALL => {
                    status = call(a, b);
                    // The transfer starts once the exchange saw every rank arrive.
                    monotonic_ns() + cost::hccl_ns(cfg, bytes, sqe.u32_at(annot::AUX))
                }
                abi::SDMA_OP_FILL => {
                    if b == 0 {
                        status = abi::ACL_ERROR_RT_INTERNAL_ERROR as u32;
                    } else {
                        let value = sqe.u32_at(pl::FILL_VALUE) as u8;
                        // SAFETY: the runtime validated the range.
                        unsafe { std::ptr::write_bytes(b as *mut u8, value, bytes as usize) };
                    }
                    start_ns + cost::memset_ns(cfg, bytes)
                }
                _ => {
                    if a == 0 || b == 0 {
                        status = abi::ACL_ERROR_RT_INTERNAL_ERROR as u32;
                    } else {
                        // SAFETY: the runtime validated both ranges; device memory is host
                        // memory.
                        unsafe { std::ptr::copy(a as *const u8, b as *mut u8, bytes as usize) };
                    }
                    start_ns + cost::memcpy_ns(cfg, sqe.u32_at(pl::COPY_KIND), bytes)
                }
            }
        }
        kind::HCCL => {
            // A notify record or wait of a collective: libhccl's step on the device.
            status = call(sqe.u64_at(pl::CALL_FN), sqe.u64_at(pl::CALL_CTX));
            monotonic_ns().max(start_ns + cost::event_ns(cfg))
        }
        _ => start_ns + cost::event_ns(cfg),
    };
    finish(dev, cfg, task, start_ns, busy_until, status)
}

/// Holds the core until `busy_until`, then stamps the end.
pub(crate) fn finish(
    dev: u32,
    cfg: &Config,
    task: &Task,
    start_ns: u64,
    busy_until: u64,
    status: u32,
) -> Outcome {
    sleep_until(busy_until);
    let error_type = if status == 0 {
        abi::CQE_ERROR_TYPE_NONE
    } else {
        abi::CQE_ERROR_TYPE_EXCEPTION
    };
    let end_ns = emit::stamp(dev, cfg, task, abi::STARS_FUNC_TYPE_END);
    Outcome {
        status,
        error_type,
        start_ns,
        end_ns,
    }
}

/// Whether this launch of `name` is one `NPU_SIM_FAULT_KERNEL` makes fail.
fn kernel_faults(cfg: &Config, name: &str) -> bool {
    static LAUNCHES: Mutex<Option<HashMap<String, u64>>> = Mutex::new(None);
    let Some((_, nth)) = cfg.fault_kernels.iter().find(|(n, _)| n == name) else {
        return false;
    };
    let mut launches = LAUNCHES.lock().unwrap_or_else(|e| e.into_inner());
    let count = launches
        .get_or_insert_with(HashMap::new)
        .entry(name.to_string())
        .or_insert(0);
    *count += 1;
    *nth == 0 || *nth == *count
}

pub(crate) fn sleep_until(deadline_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    while monotonic_ns() < deadline_ns {
        // SAFETY: absolute CLOCK_MONOTONIC sleep with a valid timespec and no remainder
        // pointer; an EINTR just ends it early, which this loop covers.
        unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
    }
}
