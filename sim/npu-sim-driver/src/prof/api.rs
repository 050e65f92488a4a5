//! The exported profiling functions, with the argument checks and return codes of the real
//! user-space driver (src/ascend_hal/dmc/prof/prof_interface.c, core/prof_chan.c,
//! core/prof_poll.c). Only channel 50 exists; starting any other returns
//! `DRV_ERROR_NOT_SUPPORT`, as the real driver does for a channel the device does not offer.
use std::ffi::c_char;
use std::time::Duration;

use npu_sim_common::abi::{
    self, ChannelList, PROF_CHANNEL_NUM_MAX, PROF_CHANNEL_STARS_SOC_LOG, PROF_DEV_NUM,
    ProfPollInfo, ProfStartPara, StarsSocLogConfig,
};
use npu_sim_common::json::Obj;
use npu_sim_common::time::{monotonic_ns, pid};
use npu_sim_common::trace::api;

use crate::config;
use crate::prof::local;
use crate::prof::shm::Session;
use crate::truth;

const LIB: &str = crate::LIB;
/// `prof_channel_poll` waits at most this long whatever its timeout says (prof_poll.c).
const POLL_MAX_S: i32 = 5;

/// Ids inside the API's bounds (`DEV_NUM`, `PROF_CHANNEL_NUM_MAX`).
fn in_range(dev: u32, ch: u32) -> bool {
    dev < PROF_DEV_NUM && (ch as usize) < PROF_CHANNEL_NUM_MAX
}

fn ids(a: &mut Obj, dev: u32, ch: u32) {
    a.u64("device_id", dev.into()).u64("channel_id", ch.into());
}

// SAFETY: the C caller's contract: `channels` is null or a writable channel_list_t.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn prof_drv_get_channels(
    device_id: u32,
    channels: *mut ChannelList,
) -> i32 {
    api(
        LIB,
        "prof_drv_get_channels",
        || {
            if device_id >= PROF_DEV_NUM || channels.is_null() {
                return abi::DRV_ERROR_INVALID_VALUE;
            }
            if device_id >= config::get().device_count {
                return abi::DRV_ERROR_INVALID_DEVICE;
            }
            // Like prof_get_chan_list, only the count and the ids are written. Raw writes: the
            // caller's struct may be uninitialized.
            // SAFETY: non-null and writable per the contract; both fields are plain integers.
            unsafe {
                std::ptr::addr_of_mut!((*channels).channel_num).write(1);
                std::ptr::addr_of_mut!((*channels).channel[0].channel_id)
                    .write(PROF_CHANNEL_STARS_SOC_LOG);
            }
            abi::DRV_ERROR_NONE
        },
        |a| {
            a.u64("device_id", device_id.into())
                .u64("channels", channels as u64);
        },
    )
}

// SAFETY: the C caller's contract: `start_para` is null or a readable prof_start_para whose
// `user_data` is null or holds `user_data_size` readable bytes.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn prof_drv_start(
    device_id: u32,
    channel_id: u32,
    start_para: *mut ProfStartPara,
) -> i32 {
    api(
        LIB,
        "prof_drv_start",
        // SAFETY: `start_para` is null or readable, per the contract.
        || match unsafe { start_para.as_ref() } {
            Some(p) if in_range(device_id, channel_id) => start(device_id, channel_id, p),
            _ => abi::DRV_ERROR_INVALID_VALUE,
        },
        |a| {
            ids(a, device_id, channel_id);
            a.u64("start_para", start_para as u64);
            // SAFETY: as above.
            if let Some(p) = unsafe { start_para.as_ref() } {
                a.i64("channel_type", p.channel_type.into())
                    .u64("sample_period", p.sample_period.into());
                a.u64("real_time", p.real_time.into())
                    .u64("user_data_size", p.user_data_size.into());
            }
        },
    )
}

/// `prof_drv_start` after the range checks.
fn start(dev: u32, ch: u32, p: &ProfStartPara) -> i32 {
    if p.user_data.is_null() && p.user_data_size != 0 {
        return abi::DRV_ERROR_INVALID_VALUE;
    }
    if local::is_started(dev, ch) {
        // prof_chan_start: this process's channel is not DISABLE.
        return abi::DRV_ERROR_STATUS_FAIL;
    }
    let cfg = config::get();
    if dev >= cfg.device_count || ch != PROF_CHANNEL_STARS_SOC_LOG {
        return abi::DRV_ERROR_NOT_SUPPORT;
    }
    if p.user_data_size > abi::PROF_USER_DATA_LEN {
        // The start message holds PROF_USER_DATA_LEN bytes; memcpy_s refuses more.
        return abi::DRV_ERROR_MEMORY_OPT_FAIL;
    }
    let Some(shared) = local::channel(dev) else {
        return abi::DRV_ERROR_INNER_ERR;
    };
    let locked = shared.lock();
    let owner = locked.owner();
    if owner != 0 && owner != pid() && alive(owner) {
        // Another process owns the channel: see docs/simulator.md for why this code.
        return abi::DRV_ERROR_INNER_ERR;
    }
    locked.start(&Session {
        owner_pid: pid(),
        // SAFETY: `user_data` holds `user_data_size` readable bytes, per the contract.
        logging: unsafe { acsq_task_on(p) },
        cap_records: cfg.prof_buf_bytes / shared.record_size() as u64,
        period_ns: period_ns(p.sample_period),
        start_ns: monotonic_ns(),
    });
    local::mark_started(dev, ch);
    abi::DRV_ERROR_NONE
}

/// Whether the StarsSocLogConfig in `p.user_data` turns task begin/end logging on.
///
/// # Safety
/// `p.user_data` is null or holds `p.user_data_size` readable bytes.
// SAFETY: unsafe because of the `user_data` contract above.
unsafe fn acsq_task_on(p: &ProfStartPara) -> bool {
    if p.user_data.is_null() || (p.user_data_size as usize) < std::mem::size_of::<u32>() {
        return false;
    }
    // SAFETY: at least the first field (acsq_task) is readable; read unaligned since the
    // caller's buffer need not be aligned.
    let acsq = unsafe {
        std::ptr::read_unaligned(
            p.user_data
                .cast::<u8>()
                .add(std::mem::offset_of!(StarsSocLogConfig, acsq_task))
                .cast::<u32>(),
        )
    };
    acsq == abi::TS_PROFILE_ENABLE
}

/// Delivery period: the sampling period, within the driver's bounds (prof_ioctl.h).
fn period_ns(sample_period_ms: u32) -> u64 {
    let ms = sample_period_ms.clamp(abi::PROF_PERIOD_MIN_MS, abi::PROF_PERIOD_MAX_MS);
    u64::from(ms) * 1_000_000
}

/// Whether process `pid` still exists (the real driver releases a channel when its owner's
/// file descriptor closes; here a dead owner's channel may be taken over).
fn alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks whether the process exists.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[unsafe(no_mangle)]
pub(crate) extern "C" fn prof_stop(device_id: u32, channel_id: u32) -> i32 {
    api(
        LIB,
        "prof_stop",
        || stop(device_id, channel_id),
        |a| ids(a, device_id, channel_id),
    )
}

fn stop(dev: u32, ch: u32) -> i32 {
    if !in_range(dev, ch) {
        return abi::DRV_ERROR_INVALID_VALUE;
    }
    if !local::is_started(dev, ch) {
        // prof_chan_stop: the channel is not ENABLE in this process.
        return abi::DRV_ERROR_STATUS_FAIL;
    }
    local::mark_stopped(dev, ch);
    let Some(shared) = local::channel(dev) else {
        return abi::DRV_ERROR_INNER_ERR;
    };
    let locked = shared.lock();
    // A channel taken over after this process was presumed dead is no longer ours to stop.
    let stats = if locked.owner() == pid() {
        locked.stop()
    } else {
        locked.stats()
    };
    drop(locked);
    truth::prof_line(dev, ch, stats.produced, stats.read, stats.lost);
    if stats.lost > 0 {
        eprintln!(
            "[WARNING] PROF({}): device {dev} channel {ch}: buffer full, {} of {} records lost",
            pid(),
            stats.lost,
            stats.produced
        );
    }
    abi::DRV_ERROR_NONE
}

// SAFETY: the C caller's contract: `out_buf` is null or has `buf_size` writable bytes.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn prof_channel_read(
    device_id: u32,
    channel_id: u32,
    out_buf: *mut c_char,
    buf_size: u32,
) -> i32 {
    api(
        LIB,
        "prof_channel_read",
        || {
            if !in_range(device_id, channel_id) || out_buf.is_null() {
                return abi::PROF_ERROR;
            }
            if !local::is_started(device_id, channel_id) {
                return abi::PROF_STOPPED_ALREADY;
            }
            let Some(shared) = local::channel(device_id) else {
                return abi::PROF_ERROR;
            };
            let len = buf_size.min(i32::MAX as u32) as usize;
            // SAFETY: non-null with `buf_size` writable bytes, per the contract.
            let out = unsafe { std::slice::from_raw_parts_mut(out_buf.cast::<u8>(), len) };
            shared.lock().read(out, monotonic_ns()) as i32
        },
        |a| {
            ids(a, device_id, channel_id);
            a.u64("out_buf", out_buf as u64)
                .u64("buf_size", buf_size.into());
        },
    )
}

// SAFETY: the C caller's contract: `out_buf` is null or has room for `num` prof_poll_info.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn prof_channel_poll(
    out_buf: *mut ProfPollInfo,
    num: i32,
    timeout: i32,
) -> i32 {
    api(
        LIB,
        "prof_channel_poll",
        || {
            if out_buf.is_null() || num <= 0 || num as usize > PROF_CHANNEL_NUM_MAX {
                return abi::PROF_ERROR;
            }
            if local::started().is_empty() {
                return abi::PROF_STOPPED_ALREADY;
            }
            let ready = poll_wait(num as usize, timeout);
            for (i, info) in ready.iter().enumerate() {
                // SAFETY: i < num entries of room, per the contract.
                unsafe { out_buf.add(i).write(*info) };
            }
            ready.len() as i32
        },
        |a| {
            a.u64("out_buf", out_buf as u64)
                .i64("num", num.into())
                .i64("timeout", timeout.into());
        },
    )
}

/// Up to `max` channels of this process with readable data, waiting up to `timeout_s` seconds
/// (5 when not in 1..=5) for one; empty on timeout or when a signal interrupts the wait, as
/// the real poll's `sem_timedwait` returns.
fn poll_wait(max: usize, timeout_s: i32) -> Vec<ProfPollInfo> {
    let wait_s = if (1..=POLL_MAX_S).contains(&timeout_s) {
        timeout_s
    } else {
        POLL_MAX_S
    };
    let deadline = monotonic_ns() + Duration::from_secs(wait_s as u64).as_nanos() as u64;
    loop {
        let now = monotonic_ns();
        let mut ready = Vec::new();
        let mut wake = deadline;
        for (dev, ch) in local::started() {
            let Some(shared) = local::channel(dev) else {
                continue;
            };
            let locked = shared.lock();
            if locked.readable_bytes(now) > 0 {
                ready.push(ProfPollInfo {
                    device_id: dev,
                    channel_id: ch,
                });
            } else {
                wake = wake.min(locked.next_delivery(now));
            }
        }
        if !ready.is_empty() || now >= deadline || local::started().is_empty() {
            ready.truncate(max);
            return ready;
        }
        if !sleep_until(wake) {
            return Vec::new();
        }
    }
}

/// Sleeps until CLOCK_MONOTONIC `ns`; false if a signal interrupted the sleep.
fn sleep_until(ns: u64) -> bool {
    let ts = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: absolute sleep with a valid timespec and no remainder pointer.
    let rc = unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    };
    rc != libc::EINTR
}

// SAFETY: the C caller's contract: `data_len` is null or a writable unsigned int.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn halProfDataFlush(
    device_id: u32,
    channel_id: u32,
    data_len: *mut u32,
) -> i32 {
    api(
        LIB,
        "halProfDataFlush",
        || {
            if !in_range(device_id, channel_id) || data_len.is_null() {
                return abi::DRV_ERROR_INVALID_VALUE;
            }
            if !local::is_started(device_id, channel_id) {
                return abi::PROF_STOPPED_ALREADY;
            }
            let Some(shared) = local::channel(device_id) else {
                return abi::DRV_ERROR_INNER_ERR;
            };
            let bytes = shared.lock().flush(monotonic_ns());
            // SAFETY: non-null and writable, per the contract.
            unsafe { data_len.write(u32::try_from(bytes).unwrap_or(u32::MAX)) };
            abi::DRV_ERROR_NONE
        },
        |a| {
            ids(a, device_id, channel_id);
            a.u64("data_len", data_len as u64);
        },
    )
}

/// Simulator-only (not a CANN function, never recorded as an API call): the current or last
/// session's produced and lost record counts of a channel, from any process. The real driver
/// only logs lost data; `npu-sim-prof` uses this to report it.
// SAFETY: the C caller's contract: `produced` and `lost` are null or writable u64s.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn npu_sim_prof_stats(
    device_id: u32,
    channel_id: u32,
    produced: *mut u64,
    lost: *mut u64,
) -> i32 {
    if produced.is_null() || lost.is_null() || channel_id != PROF_CHANNEL_STARS_SOC_LOG {
        return abi::DRV_ERROR_INVALID_VALUE;
    }
    let Some(shared) = local::channel(device_id) else {
        return abi::DRV_ERROR_INVALID_DEVICE;
    };
    let stats = shared.lock().stats();
    // SAFETY: both non-null and writable, per the contract.
    unsafe {
        produced.write(stats.produced);
        lost.write(stats.lost);
    }
    abi::DRV_ERROR_NONE
}
