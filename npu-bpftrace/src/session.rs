//! Starting a dataset's `session.json` (the type is `tracer_schema::session::Session`):
//! where and when this host recorded, and the clocks it recorded on.
use std::{collections::BTreeMap, fs};

use anyhow::{Context, Result};

use tracer_common::DropKind;
use tracer_schema::{
    SCHEMA_VERSION,
    session::{ActivityStats, ClockSample, CorrelateStats, Session},
};

use crate::outdir::OutDir;

/// Where the final session.json is written from: made (with space reserved) when the
/// session starts, so that it can be written when the disk has filled up since.
const SESSION_TMP: &str = ".session.json.tmp";
/// Space reserved for the final session.json (a few tens of KiB in practice).
const SESSION_RESERVE: u64 = 256 << 10;

/// Writes `dir/session.json` atomically, through the space reserved before (never through a
/// link); `reserve_next` keeps space for a later write.
pub fn write(session: &Session, dir: &OutDir, reserve_next: bool) -> Result<()> {
    let json = serde_json::to_vec_pretty(session)?;
    dir.write_atomic("session.json", SESSION_TMP, &json)
        .with_context(|| format!("writing {}", dir.path().join("session.json").display()))?;
    if reserve_next {
        dir.reserve(SESSION_TMP, SESSION_RESERVE).with_context(|| {
            format!(
                "reserving space for the final session.json in {}",
                dir.path().display()
            )
        })?;
    }
    Ok(())
}

/// A session that has just started recording on this host.
pub fn start(host: String, mode: String, targets: Vec<u32>) -> Session {
    Session {
        schema_version: SCHEMA_VERSION,
        tool: "npu-bpftrace".to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        host,
        boot_id: read_trimmed("/proc/sys/kernel/random/boot_id"),
        kernel_release: read_trimmed("/proc/sys/kernel/osrelease"),
        command_line: std::env::args().collect(),
        mode,
        targets,
        clock_start: clock_sample(),
        clock_end: None,
        complete: false,
        attached: Vec::new(),
        drops: counters(|k| !k.is_read_failure()),
        read_failures: counters(DropKind::is_read_failure),
        correlation: CorrelateStats::default(),
        activity: ActivityStats::default(),
        clocks: BTreeMap::new(),
        device_time_sources: BTreeMap::new(),
        chip: None,
        rows: BTreeMap::new(),
        files: 0,
        bytes: 0,
        output: Default::default(),
        capture: Default::default(),
        bpf_maps: Default::default(),
        holds: Default::default(),
    }
}

/// Zero counters for the drop kinds `pick` selects.
fn counters(pick: impl Fn(DropKind) -> bool) -> BTreeMap<String, u64> {
    DropKind::ALL
        .into_iter()
        .filter(|&k| pick(k))
        .map(|k| (k.name().to_owned(), 0))
        .collect()
}

/// Records the kernel-side counters, indexed like `DropKind::ALL`: losses in `drops`, read
/// failures in `read_failures`.
pub fn set_drops(session: &mut Session, drops: &[u64]) {
    for (kind, &count) in DropKind::ALL.iter().zip(drops) {
        let map = if kind.is_read_failure() {
            &mut session.read_failures
        } else {
            &mut session.drops
        };
        map.insert(kind.name().to_owned(), count);
    }
}

/// CLOCK_REALTIME read between two CLOCK_MONOTONIC reads, paired with their midpoint.
pub fn clock_sample() -> ClockSample {
    let m1 = clock_ns(libc::CLOCK_MONOTONIC);
    let realtime_ns = clock_ns(libc::CLOCK_REALTIME);
    let m2 = clock_ns(libc::CLOCK_MONOTONIC);
    let monotonic_ns = m1 + (m2 - m1) / 2;
    ClockSample {
        monotonic_ns,
        realtime_ns,
        realtime_minus_monotonic_ns: i128::from(realtime_ns) - i128::from(monotonic_ns),
    }
}

/// The time of `clock` in ns.
pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime only writes it, and fails
    // (leaving it zero) for an unknown clock id, which callers never pass.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn read_trimmed(path: &str) -> String {
    fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}
