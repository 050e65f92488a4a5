//! Executing one task on a core: doing its work (copies really copy, memsets really set,
//! collectives run libhccl's exchange) and holding the core for the modelled duration.
use std::collections::HashMap;
use std::sync::Mutex;

use npu_sim_common::abi::{self, sqe_off, sqe_type};
use npu_sim_common::time::monotonic_ns;

use crate::config::Config;
use crate::cost;
use crate::prof::emit;
use crate::task::{Outcome, Task, name_of};

/// The device-side function libhccl puts in an HCCL SQE: runs the exchange, returns a CQE error.
type HcclExec = unsafe extern "C" fn(ctx: u64) -> u32;

/// Runs `task` on a core of device `dev`. Its begin and end times go through `prof::emit`,
/// which logs them on the device's profiling channel when that is on.
pub(crate) fn run(dev: u32, cfg: &Config, task: &Task) -> Outcome {
    let sqe = &task.sqe;
    if sqe.ty() == sqe_type::HCCL && cfg.straggler_ms > 0 {
        // A straggler's device is late to every collective: idle time before the task starts.
        std::thread::sleep(std::time::Duration::from_millis(cfg.straggler_ms));
    }
    let start_ns = emit::stamp(dev, cfg, task, abi::STARS_FUNC_TYPE_BEGIN);
    let mut status = 0u32;
    let busy_until = match sqe.ty() {
        ty @ (sqe_type::AICORE | sqe_type::AICPU | sqe_type::AIV) => {
            let name = name_of(sqe, sqe_off::KERNEL_NAME);
            if kernel_faults(cfg, &name) {
                status = abi::ACL_ERROR_RT_AICORE_EXCEPTION as u32;
            }
            start_ns + cost::kernel_ns(cfg, ty, &name, sqe.block_dim())
        }
        sqe_type::SDMA => {
            let (src, dst) = (sqe.u64_at(sqe_off::COPY_SRC), sqe.u64_at(sqe_off::COPY_DST));
            let bytes = sqe.u64_at(sqe_off::COPY_BYTES);
            if src == 0 || dst == 0 {
                status = abi::ACL_ERROR_RT_INTERNAL_ERROR as u32;
            } else {
                // SAFETY: the runtime validated both ranges; device memory is host memory.
                unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, bytes as usize) };
            }
            start_ns + cost::memcpy_ns(cfg, sqe.u32_at(sqe_off::COPY_KIND), bytes)
        }
        sqe_type::MEMSET => {
            let (ptr, bytes) = (sqe.u64_at(sqe_off::SET_PTR), sqe.u64_at(sqe_off::SET_BYTES));
            if ptr == 0 {
                status = abi::ACL_ERROR_RT_INTERNAL_ERROR as u32;
            } else {
                let value = sqe.u32_at(sqe_off::SET_VALUE) as u8;
                // SAFETY: the runtime validated the range.
                unsafe { std::ptr::write_bytes(ptr as *mut u8, value, bytes as usize) };
            }
            start_ns + cost::memset_ns(cfg, bytes)
        }
        sqe_type::HCCL => {
            let exec = sqe.u64_at(sqe_off::HCCL_EXEC);
            if exec == 0 {
                status = abi::ACL_ERROR_RT_INTERNAL_ERROR as u32;
            } else {
                // SAFETY: libhccl put a function of type `HcclExec` and its context here.
                status = unsafe {
                    let f = std::mem::transmute::<usize, HcclExec>(exec as usize);
                    f(sqe.u64_at(sqe_off::HCCL_CTX))
                };
            }
            // The transfer starts once the exchange saw every rank arrive.
            monotonic_ns()
                + cost::hccl_ns(
                    cfg,
                    sqe.u64_at(sqe_off::HCCL_BYTES),
                    sqe.u32_at(sqe_off::HCCL_NRANKS),
                )
        }
        _ => start_ns + cost::event_ns(cfg),
    };
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
