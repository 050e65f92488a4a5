//! This process's side of the profiling channels. The real libascend_hal keeps a per-process
//! state for each (device, channel) it started (`prof_chan_mng`, src/ascend_hal/dmc/prof/core/
//! prof_chan.c): reading, flushing and stopping only work in the process that started the
//! channel. The channel itself (`shm`) is host-wide.
use std::collections::BTreeSet;
use std::ffi::CString;
use std::sync::{Mutex, MutexGuard, OnceLock};

use npu_sim_common::abi::PROF_CHANNEL_STARS_SOC_LOG;

use crate::config;
use crate::prof::shm::SharedChannel;

/// (device, channel) pairs this process started and has not stopped.
static STARTED: Mutex<BTreeSet<(u32, u32)>> = Mutex::new(BTreeSet::new());

fn started_set() -> MutexGuard<'static, BTreeSet<(u32, u32)>> {
    STARTED.lock().unwrap_or_else(|e| e.into_inner())
}

pub(super) fn is_started(dev: u32, ch: u32) -> bool {
    started_set().contains(&(dev, ch))
}

pub(super) fn mark_started(dev: u32, ch: u32) {
    started_set().insert((dev, ch));
}

pub(super) fn mark_stopped(dev: u32, ch: u32) {
    started_set().remove(&(dev, ch));
}

/// Every channel this process started, in (device, channel) order.
pub(super) fn started() -> Vec<(u32, u32)> {
    started_set().iter().copied().collect()
}

/// Channel 50 of device `dev` on this simulated host, mapped on first use; `None` for a device
/// the host does not have, or when /dev/shm is unusable.
pub(super) fn channel(dev: u32) -> Option<&'static SharedChannel> {
    static CHANNELS: OnceLock<Vec<OnceLock<Option<SharedChannel>>>> = OnceLock::new();
    let cfg = config::get();
    let slots = CHANNELS.get_or_init(|| (0..cfg.device_count).map(|_| OnceLock::new()).collect());
    slots
        .get(dev as usize)?
        .get_or_init(|| open(&cfg.host, dev))
        .as_ref()
}

fn open(host: &str, dev: u32) -> Option<SharedChannel> {
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let chip = config::get().chip;
    // The user id keeps two users' simulated hosts apart; `v2` is the layout version; the chip
    // decides the record format.
    let name = format!(
        "/npu-sim-u{uid}-{host}-prof-v2-{}-dev{dev}-ch{PROF_CHANNEL_STARS_SOC_LOG}",
        chip.tag()
    );
    SharedChannel::open(&CString::new(name).ok()?, record_size(chip))
}

/// Bytes of one channel-50 record on `chip`: `StarsSocLog` (910B) or `StarsSocLogV6` (950).
pub(super) fn record_size(chip: npu_sim_common::abi::Chip) -> usize {
    match chip {
        npu_sim_common::abi::Chip::Ascend910B => npu_sim_common::abi::STARS_SOC_LOG_SIZE,
        npu_sim_common::abi::Chip::Ascend950 => npu_sim_common::abi::STARS_SOC_LOG_V6_SIZE,
    }
}
