//! How long a task occupies the device. Every figure is multiplied by `NPU_SIM_TIME_SCALE`.
use npu_sim_common::abi::{self, engine};

use crate::config::Config;

/// Base durations (µs per wave of blocks) of AI Core / AI Vector kernels, matched by the first
/// listed key contained in the lower-cased kernel name.
const KERNEL_US: &[(&str, f64)] = &[
    ("noop", 2.0),
    ("matmul", 60.0),
    ("gemm", 60.0),
    ("conv", 80.0),
    ("attention", 90.0),
    ("softmax", 25.0),
    ("layernorm", 20.0),
    ("rmsnorm", 15.0),
    ("adam", 30.0),
    ("sgd", 15.0),
    ("gelu", 10.0),
    ("relu", 6.0),
    ("add", 8.0),
    ("mul", 8.0),
];
/// Kernels with an unknown name.
const DEFAULT_KERNEL_US: f64 = 15.0;
/// AI CPU kernels (per wave as well).
const AICPU_KERNEL_US: f64 = 30.0;
/// Blocks the AI Cores run at once; more blocks take more waves.
pub(crate) const AICORE_NUM: u64 = 24;
/// Fixed cost of starting any task.
const TASK_OVERHEAD_US: f64 = 1.0;

/// Bytes per µs (= MB/s) by copy direction.
fn copy_bandwidth(kind: u32) -> f64 {
    match kind {
        abi::RT_MEMCPY_HOST_TO_DEVICE | abi::RT_MEMCPY_HOST_TO_DEVICE_EX => 25_000.0,
        abi::RT_MEMCPY_DEVICE_TO_HOST | abi::RT_MEMCPY_DEVICE_TO_HOST_EX => 25_000.0,
        abi::RT_MEMCPY_DEVICE_TO_DEVICE => 500_000.0,
        _ => 10_000.0,
    }
}
const MEMSET_BANDWIDTH: f64 = 500_000.0;
/// HCCL link bandwidth (bytes per µs) and per-collective latency.
const LINK_BANDWIDTH: f64 = 50_000.0;
const HCCL_LATENCY_US: f64 = 8.0;

/// Base duration of kernel `name` for one wave.
pub(crate) fn kernel_base_us(cfg: &Config, eng: u32, name: &str) -> f64 {
    if let Some(us) = cfg.kernel_us.get(name) {
        return *us;
    }
    if eng == engine::AICPU {
        return AICPU_KERNEL_US;
    }
    let lower = name.to_ascii_lowercase();
    KERNEL_US
        .iter()
        .find(|(k, _)| lower.contains(k))
        .map_or(DEFAULT_KERNEL_US, |(_, us)| *us)
}

/// A kernel of `block_dim` blocks.
pub(crate) fn kernel_ns(cfg: &Config, eng: u32, name: &str, block_dim: u16) -> u64 {
    let waves = u64::from(block_dim.max(1)).div_ceil(AICORE_NUM) as f64;
    scaled(
        cfg,
        TASK_OVERHEAD_US + kernel_base_us(cfg, eng, name) * waves,
    )
}

pub(crate) fn memcpy_ns(cfg: &Config, kind: u32, bytes: u64) -> u64 {
    scaled(
        cfg,
        TASK_OVERHEAD_US + 1.0 + bytes as f64 / copy_bandwidth(kind),
    )
}

/// A synchronous driver copy (`drvMemcpy`): the driver does not know the direction, so every
/// byte goes at the host link's rate.
pub(crate) fn dma_ns(cfg: &Config, bytes: u64) -> u64 {
    memcpy_ns(cfg, abi::RT_MEMCPY_HOST_TO_DEVICE, bytes)
}

pub(crate) fn memset_ns(cfg: &Config, bytes: u64) -> u64 {
    scaled(cfg, TASK_OVERHEAD_US + bytes as f64 / MEMSET_BANDWIDTH)
}

pub(crate) fn event_ns(cfg: &Config) -> u64 {
    scaled(cfg, 0.5)
}

/// Transfer time of a collective moving `bytes` per rank among `nranks` (ring algorithm:
/// each rank sends 2(n-1)/n of the data), counted from the moment the last rank arrived.
pub(crate) fn hccl_ns(cfg: &Config, bytes: u64, nranks: u32) -> u64 {
    let n = f64::from(nranks.max(1));
    let moved = bytes as f64 * 2.0 * (n - 1.0) / n;
    scaled(cfg, HCCL_LATENCY_US + moved / LINK_BANDWIDTH)
}

fn scaled(cfg: &Config, us: f64) -> u64 {
    (us * cfg.time_scale * 1000.0) as u64
}
