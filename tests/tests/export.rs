//! `npu-bpftrace export --format chrome` of a recorded 2-rank training run: its events
//! against the Parquet tables of the same recording.
use std::{collections::HashMap, process::Command};

use serde_json::Value;
use tests::{Row, npu_bpftrace, record, sim_bin};

/// The recording's rows of `table` that have a value in `column`, and those that do not.
fn with_and_without(rows: &[Row], column: &str) -> (usize, usize) {
    let with = rows.iter().filter(|r| !r[column].is_null()).count();
    (with, rows.len() - with)
}

/// Events of phase `ph` and category `cat`.
fn of<'e>(events: &'e [Value], ph: &str, cat: &str) -> Vec<&'e Value> {
    events
        .iter()
        .filter(|e| e["ph"] == ph && e["cat"] == cat)
        .collect()
}

#[test]
fn export_matches_the_tables() {
    let workload = [
        sim_bin("npu-sim-run"),
        "--nproc".into(),
        "2".into(),
        "--".into(),
        "npu-sim-app".into(),
        "train".into(),
        "--steps".into(),
        "3".into(),
    ];
    let recording = record("export-train", &[], &workload);
    let out = recording.dir.with_file_name("trace.json");
    let run = Command::new(npu_bpftrace())
        .arg("export")
        .arg(&recording.dir)
        .args(["--format", "chrome", "-o"])
        .arg(&out)
        .output()
        .expect("running npu-bpftrace export");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.success(),
        "export failed: {}\n{stderr}",
        run.status
    );
    assert!(stderr.contains("npu-bpftrace: exported "), "{stderr}");
    let text = std::fs::read_to_string(&out).expect("the trace file");
    let trace: Value = serde_json::from_str(&text).expect("the trace is JSON");
    let events = trace["traceEvents"].as_array().expect("traceEvents");

    let api = recording.table("api");
    let (returned, open) = with_and_without(&api, "end_ns");
    assert!(returned > 0, "the workload made API calls");
    assert_eq!(of(events, "X", "api").len(), returned, "one X per call");
    assert_eq!(of(events, "B", "api").len(), open, "one B per open call");
    for table in ["kernel", "memcpy", "memset", "hccl", "sync"] {
        let rows = recording.table(table);
        let timed = rows
            .iter()
            .filter(|r| !r["start_ns"].is_null() && !r["end_ns"].is_null())
            .count();
        assert_eq!(
            of(events, "X", table).len(),
            timed,
            "one X per {table} task"
        );
    }
    let markers = recording.table("marker");
    let is_mark = |r: &&Row| r["kind"] == "mark";
    let marks = markers.iter().filter(is_mark).count();
    let ranges: Vec<Row> = markers.iter().filter(|r| !is_mark(r)).cloned().collect();
    assert!(
        marks > 0 && !ranges.is_empty(),
        "the workload marks with mstx"
    );
    assert_eq!(of(events, "i", "marker").len(), marks);
    assert_eq!(
        of(events, "X", "marker").len(),
        with_and_without(&ranges, "end_ns").0
    );
    // A counter value per allocation or release that changed memory in use.
    let memory = recording.table("memory");
    let changes = memory
        .iter()
        .filter(|r| r["return_value"] == 0 && !r["bytes"].is_null())
        .count();
    assert!(changes > 0, "the workload allocates memory");
    assert_eq!(of(events, "C", "memory").len(), changes);

    // Every kernel's arrow starts on the thread of the API call with its correlation id, at
    // the call's start.
    let calls: HashMap<u64, &Row> = api
        .iter()
        .map(|r| (r["correlation_id"].as_u64().expect("id"), r))
        .collect();
    let starts: HashMap<u64, &Value> = of(events, "s", "flow")
        .into_iter()
        .map(|s| (s["id"].as_u64().expect("flow id"), s))
        .collect();
    let mut ends: HashMap<String, Vec<&Value>> = HashMap::new();
    for f in of(events, "f", "flow") {
        ends.entry(place(f)).or_default().push(f);
    }
    assert_eq!(
        starts.len(),
        ends.values().map(Vec::len).sum::<usize>(),
        "an id per arrow"
    );
    let kernels = of(events, "X", "kernel");
    assert!(!kernels.is_empty(), "the workload launched kernels");
    for kernel in kernels {
        let id = kernel["args"]["correlation_id"].as_u64().expect("id");
        let call = calls
            .get(&id)
            .unwrap_or_else(|| panic!("kernel {kernel} without its API call"));
        let arrows = ends.get(&place(kernel)).map_or(&[][..], Vec::as_slice);
        assert_eq!(arrows.len(), 1, "one arrow to {kernel}");
        let from = starts[&arrows[0]["id"].as_u64().expect("flow id")];
        assert_eq!(
            (&from["pid"], &from["tid"]),
            (&call["pid"], &call["tid"]),
            "the arrow to {kernel} leaves the thread of {call:?}"
        );
        let start_us = call["start_ns"].as_u64().expect("start") as f64 / 1e3;
        assert!(
            (from["ts"].as_f64().expect("ts") - start_us).abs() < 1e-3,
            "the arrow leaves at the start of {call:?}: {from}"
        );
    }
}

/// Where an event is: its track and time.
fn place(e: &Value) -> String {
    format!("{}/{}@{}", e["pid"], e["tid"], e["ts"])
}
