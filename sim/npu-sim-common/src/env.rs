//! Reading the simulator's documented environment variables.
use std::str::FromStr;

/// `name` parsed as `T`, or `default` when unset. A value that does not parse is reported once
/// on stderr and replaced by the default, so a typo never silently changes behaviour.
pub fn parse<T: FromStr + Copy>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(v) => v.trim().parse().unwrap_or_else(|_| {
            eprintln!("npu-sim: ignoring {name}={v:?}: not a valid value");
            default
        }),
        Err(_) => default,
    }
}

/// `name` when set and non-empty.
pub fn string(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Devices the simulated host has (`NPU_SIM_DEVICE_COUNT`, default 8).
pub fn device_count() -> u32 {
    parse("NPU_SIM_DEVICE_COUNT", 8u32).clamp(1, 64)
}

/// The simulated chip (`NPU_SIM_CHIP`: `910B`, the default, or `950`).
pub fn chip() -> crate::abi::Chip {
    use crate::abi::Chip;
    static C: std::sync::OnceLock<Chip> = std::sync::OnceLock::new();
    *C.get_or_init(|| match string("NPU_SIM_CHIP").as_deref() {
        None | Some("910B") | Some("910b") => Chip::Ascend910B,
        Some("950") => Chip::Ascend950,
        Some(v) => {
            eprintln!("npu-sim: ignoring NPU_SIM_CHIP={v:?}: not 910B or 950");
            Chip::Ascend910B
        }
    })
}
