//! Injected API errors: `NPU_SIM_FAIL_API=fn[:nth[:code]][,...]` makes the `nth` call (1-based;
//! `*` or 0 = every call; default 1) of the exported function `fn` return `code` without doing
//! anything (default: an internal-error code of that function's library).
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::abi;

struct Fault {
    func: String,
    nth: u64,
    code: Option<i32>,
    calls: AtomicU64,
}

fn faults() -> &'static [Fault] {
    static F: OnceLock<Vec<Fault>> = OnceLock::new();
    F.get_or_init(|| {
        crate::env::string("NPU_SIM_FAIL_API")
            .map(|v| parse(&v))
            .unwrap_or_default()
    })
}

fn parse(spec: &str) -> Vec<Fault> {
    let mut out = Vec::new();
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let mut parts = item.split(':');
        let func = parts.next().unwrap_or_default().to_string();
        let nth = match parts.next() {
            None | Some("") => Some(1),
            Some("*") => Some(0),
            Some(n) => n.parse().ok(),
        };
        let code = match parts.next() {
            None => Some(None),
            Some(c) => c.parse().ok().map(Some),
        };
        match (nth, code) {
            (Some(nth), Some(code)) => out.push(Fault {
                func,
                nth,
                code,
                calls: AtomicU64::new(0),
            }),
            _ => eprintln!("npu-sim: ignoring malformed NPU_SIM_FAIL_API entry {item:?}"),
        }
    }
    out
}

/// The error code `func` must return for this call, if a fault is injected.
pub fn check(func: &str) -> Option<i32> {
    let f = faults().iter().find(|f| f.func == func)?;
    let n = f.calls.fetch_add(1, Ordering::Relaxed) + 1;
    (f.nth == 0 || f.nth == n).then(|| f.code.unwrap_or_else(|| default_code(func)))
}

fn default_code(func: &str) -> i32 {
    if func.starts_with("Hccl") {
        abi::HCCL_E_INTERNAL
    } else if func.starts_with("hal") || func.starts_with("prof_") {
        abi::DRV_ERROR_INNER_ERR
    } else {
        abi::ACL_ERROR_RT_INTERNAL_ERROR
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_specs() {
        let f = parse("aclrtMalloc, rtFree:3:107000 ,HcclAllReduce:*,bad:x");
        assert_eq!(f.len(), 3);
        assert_eq!(
            (f[0].func.as_str(), f[0].nth, f[0].code),
            ("aclrtMalloc", 1, None)
        );
        assert_eq!((f[1].nth, f[1].code), (3, Some(107000)));
        assert_eq!(f[2].nth, 0);
    }
}
