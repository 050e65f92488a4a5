//! Device-side settings from the environment (read once per process).
use std::collections::HashMap;
use std::sync::OnceLock;

use npu_sim_common::env;

use crate::clock::Clock;

pub(crate) struct Config {
    /// Devices this host has (`NPU_SIM_DEVICE_COUNT`).
    pub device_count: u32,
    /// Tasks a device executes at once, across streams (`NPU_SIM_CORES`).
    pub cores: u32,
    /// SQEs an SQ holds before `halSqTaskSend` blocks (`NPU_SIM_SQ_DEPTH`).
    pub sq_depth: u32,
    /// Multiplier on every modelled duration (`NPU_SIM_TIME_SCALE`).
    pub time_scale: f64,
    /// Per-kernel-name base durations in µs (`NPU_SIM_KERNEL_US=name=us,...`).
    pub kernel_us: HashMap<String, f64>,
    /// Kernels whose CQE reports a device fault (`NPU_SIM_FAULT_KERNEL=name[:nth|*],...`).
    pub fault_kernels: Vec<(String, u64)>,
    /// This process's device starts each collective this late (`NPU_SIM_STRAGGLER_MS`).
    pub straggler_ms: u64,
    pub clock: Clock,
    /// The simulated host (`NPU_SIM_HOST`): processes with the same value share their devices'
    /// profiling channels. Only `[A-Za-z0-9_-]` are kept.
    pub host: String,
    /// Bytes of a profiling channel buffer started by this process (`NPU_SIM_PROF_BUF_BYTES`).
    pub prof_buf_bytes: u64,
    /// The simulated chip (`NPU_SIM_CHIP`).
    pub chip: npu_sim_common::abi::Chip,
}

pub(crate) fn get() -> &'static Config {
    static C: OnceLock<Config> = OnceLock::new();
    C.get_or_init(|| Config {
        device_count: env::device_count(),
        cores: env::parse("NPU_SIM_CORES", 4u32).clamp(1, 64),
        sq_depth: env::parse("NPU_SIM_SQ_DEPTH", 1024u32).clamp(2, 65535),
        time_scale: env::parse("NPU_SIM_TIME_SCALE", 1.0f64).max(0.0),
        kernel_us: env::string("NPU_SIM_KERNEL_US")
            .map(|v| parse_kernel_us(&v))
            .unwrap_or_default(),
        fault_kernels: env::string("NPU_SIM_FAULT_KERNEL")
            .map(|v| parse_faults(&v))
            .unwrap_or_default(),
        straggler_ms: env::parse("NPU_SIM_STRAGGLER_MS", 0u64),
        host: host_name(env::string("NPU_SIM_HOST").as_deref().unwrap_or("default")),
        prof_buf_bytes: env::parse("NPU_SIM_PROF_BUF_BYTES", DEFAULT_PROF_BUF_BYTES),
        chip: env::chip(),
        clock: Clock {
            // Bounded so the count fits comfortably in the clock's 128-bit arithmetic.
            freq_hz: env::parse("NPU_SIM_DEV_FREQ_HZ", 50_000_000u64).clamp(1000, 10_000_000_000),
            offset_ns: env::parse("NPU_SIM_CLOCK_OFFSET_NS", 12_600_000_000_000i64),
            drift_ppm: Some(env::parse("NPU_SIM_CLOCK_DRIFT_PPM", 35.0f64))
                .filter(|d| d.is_finite() && d.abs() < 1e6)
                .unwrap_or(35.0),
        },
    })
}

impl Config {
    /// The chip as it appears in shared-memory names: processes simulating different chips on
    /// one simulated host do not share devices.
    pub(crate) fn chip_tag(&self) -> &'static str {
        self.chip.tag()
    }
}

/// The real driver's channel buffer: 4 MiB less its 4 KiB head (`prof_buff_init`).
const DEFAULT_PROF_BUF_BYTES: u64 = (4 << 20) - 4096;

/// `name` reduced to characters that are safe in a /dev/shm file name.
fn host_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn parse_kernel_us(v: &str) -> HashMap<String, f64> {
    let mut m = HashMap::new();
    for item in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match item
            .split_once('=')
            .map(|(k, us)| (k, us.trim().parse::<f64>()))
        {
            Some((k, Ok(us))) if us >= 0.0 => {
                m.insert(k.trim().to_string(), us);
            }
            _ => eprintln!("npu-sim: ignoring malformed NPU_SIM_KERNEL_US entry {item:?}"),
        }
    }
    m
}

/// `name[:nth]` entries; nth is 1-based, `*` (stored as 0) faults every launch.
fn parse_faults(v: &str) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for item in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, nth) = match item.split_once(':') {
            None => (item, Some(1)),
            Some((n, "*")) => (n, Some(0)),
            Some((n, k)) => (n, k.parse().ok()),
        };
        match nth {
            Some(nth) => out.push((name.to_string(), nth)),
            None => eprintln!("npu-sim: ignoring malformed NPU_SIM_FAULT_KERNEL entry {item:?}"),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lists() {
        let k = parse_kernel_us("matmul=12.5, bad, relu=3");
        assert_eq!(k.get("matmul"), Some(&12.5));
        assert_eq!(k.len(), 2);
        let f = parse_faults("a,b:3,c:*,d:x");
        assert_eq!(f, vec![("a".into(), 1), ("b".into(), 3), ("c".into(), 0)]);
        assert_eq!(host_name("ci/job 7"), "ci_job_7");
    }
}
