//! `npu-bpftrace report` on recorded 2-rank training runs: its figures against the
//! simulator's ground truth of the same run.
use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use tests::{Recording, read_truth, record, sim_bin};

fn train(name: &str, launcher_args: &[&str], steps: &str) -> Recording {
    let mut workload = vec![sim_bin("npu-sim-run"), "--nproc".into(), "2".into()];
    workload.extend(launcher_args.iter().map(|s| s.to_string()));
    workload.extend(["--", "npu-sim-app", "train", "--steps", steps].map(String::from));
    record(name, &[], &workload)
}

fn run_report(recording: &Recording, format: &str) -> String {
    recording.report(format)
}

fn json_report(recording: &Recording) -> Value {
    serde_json::from_str(&run_report(recording, "json")).expect("the JSON report parses")
}

/// Truth `task` lines of one kind (KERNEL, MEMCPY, HCCL, ...).
fn truth_tasks(recording: &Recording, kind: &str) -> Vec<Value> {
    read_truth(&recording.truth)
        .into_values()
        .flatten()
        .filter(|l| l["type"] == "task" && l["kind"] == kind)
        .collect()
}

/// The report's `section` rows as `key -> sum of value`.
fn by_key(report: &Value, section: &str, key: &str, value: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for row in report[section].as_array().expect("a section array") {
        let k = row[key].as_str().unwrap_or("").to_owned();
        *out.entry(k).or_default() += row[value].as_u64().expect("a count");
    }
    out
}

/// The truth's copy names, as the `copy_kind` the tracer reports (msPTI's names).
fn copy_kind(truth_name: &str) -> &str {
    match truth_name {
        "MEMCPY_H2D" => "HTOD",
        "MEMCPY_D2H" => "DTOH",
        "MEMCPY_D2D" => "DTOD",
        "MEMCPY_H2H" => "HTOH",
        other => other,
    }
}

#[test]
fn report_matches_truth() {
    let recording = train("report-train", &[], "5");
    let report = json_report(&recording);

    let traced = by_key(&report, "kernels", "name", "count");
    let mut kernels: BTreeMap<String, u64> = BTreeMap::new();
    for task in truth_tasks(&recording, "KERNEL") {
        *kernels
            .entry(task["name"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    assert!(!kernels.is_empty(), "the workload launched kernels");
    assert_eq!(traced, kernels, "kernel counts per name");

    let mut copied: BTreeMap<String, u64> = BTreeMap::new();
    for task in truth_tasks(&recording, "MEMCPY") {
        let kind = copy_kind(task["name"].as_str().unwrap()).to_owned();
        *copied.entry(kind).or_default() += task["bytes"].as_u64().unwrap();
    }
    assert_eq!(
        by_key(&report, "memcpy", "copy_kind", "bytes"),
        copied,
        "bytes per direction"
    );

    // Every rank logs its part of a collective (its notify and transfer tasks, all of one
    // call): n parts make one collective.
    let parts: BTreeSet<(String, u64, u64)> = truth_tasks(&recording, "HCCL")
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_owned(),
                t["pid"].as_u64().unwrap(),
                t["api_enter_ns"].as_u64().unwrap(),
            )
        })
        .collect();
    let mut collectives: BTreeMap<String, u64> = BTreeMap::new();
    for (name, _, _) in &parts {
        *collectives.entry(name.clone()).or_default() += 1;
    }
    for (op, n) in collectives.iter_mut() {
        assert_eq!(*n % 2, 0, "{op}: both ranks ran each collective");
        *n /= 2;
    }
    assert_eq!(by_key(&report, "hccl", "name", "collectives"), collectives);
    assert_eq!(
        by_key(&report, "hccl", "name", "count")
            .values()
            .sum::<u64>(),
        parts.len() as u64
    );

    let header = &report["header"];
    assert_eq!(header["processes"], 2, "two ranks: {header}");
    assert_eq!(header["rows"]["kernel"], kernels.values().sum::<u64>());
    let truth_calls = |fns: &[&str]| {
        let api = recording.truth_api();
        api.iter()
            .filter(|l| fns.iter().any(|f| l["fn"] == *f))
            .count() as u64
    };
    let markers = by_key(&report, "markers", "kind", "count");
    let ranges = truth_calls(&["mstxRangeStartA", "mstxDomainRangeStartA"]);
    let marks = truth_calls(&["mstxMarkA", "mstxDomainMarkA"]);
    assert_eq!(
        (markers["range"], markers["mark"]),
        (ranges, marks),
        "mstx ranges and marks"
    );
    let health = &report["health"];
    assert_eq!(
        (&health["total_drops"], &health["complete"]),
        (&0.into(), &true.into()),
        "{health}"
    );

    let table = run_report(&recording, "table");
    for name in kernels.keys() {
        assert!(
            table.contains(name.as_str()),
            "{name} missing from\n{table}"
        );
    }
}

/// A rank that arrives late at every collective (`npu-sim-run --straggler`) shows as
/// per-rank arrival skew of about that delay.
#[test]
fn straggler_shows_as_skew() {
    const LATE_MS: u64 = 20;
    let recording = train(
        "report-straggler",
        &["--straggler", &format!("1:{LATE_MS}")],
        "3",
    );
    let report = json_report(&recording);
    let hccl = report["hccl"].as_array().expect("hccl section");
    assert!(!hccl.is_empty(), "collectives in the report");
    for op in hccl {
        let mean = op["skew_mean_ns"].as_u64().expect("skew measured");
        let max = op["skew_max_ns"].as_u64().expect("skew measured");
        assert!(
            mean >= LATE_MS * 1_000_000 * 3 / 4,
            "skew {mean} ns below the delay: {op}"
        );
        assert!(
            max < 2_000_000_000,
            "skew {max} ns far above the delay: {op}"
        );
    }
}
