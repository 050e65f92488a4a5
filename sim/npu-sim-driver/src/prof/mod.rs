//! The driver's profiling channels (`prof_*` in pkg_inc/ascend_hal_base.h). Channel 50,
//! `CHANNEL_STARS_SOC_LOG_BUFFER`, carries a 64-byte StarsSocLog record when each device task
//! begins and ends; it is what msprof and msPTI read for device-side task times.
//!
//! - `shm`: the host-wide channel state and buffer, shared by every process using the device;
//! - `record`: the records as the hardware writes them;
//! - `local`: what this process started, and its mapping of each device's channel;
//! - `emit`: the device's hook that timestamps tasks and logs them;
//! - `api`: the exported functions.
pub(crate) mod api;
pub(crate) mod emit;
mod local;
mod record;
mod shm;
