//! Checking device activity against the simulator's ground truth: every device task appears
//! exactly once, in the right table, joined to the outermost API call that produced it, with
//! the right name, stream, bytes and status, and device times aligned to the host clock.
use std::collections::HashMap;

use serde_json::Value;

use crate::{
    Recording, Row, int, read_truth,
    truth::{TASK_TABLES, task_table},
};

/// Device times must be as close to the truth as the clock model says it can be (its
/// reported error bound; 1 µs of rounding allowed). How tight that bound gets depends on how
/// precisely the agent could read the device clock, which a loaded machine degrades: the
/// median limit only catches a broken model, and the figures are printed.
const BOUND_SLACK_NS: f64 = 1_000.0;
const MEDIAN_LIMIT_NS: u64 = 10_000;

/// Truth tasks of the traced workload that have a table (all the simulator makes).
pub fn truth_tasks(recording: &Recording) -> Vec<Value> {
    read_truth(&recording.truth)
        .into_values()
        .flatten()
        .filter(|l| l["type"] == "task" && task_table(l["kind"].as_str().unwrap()).is_some())
        .collect()
}

/// Every truth task (event records and waits included) was timed by the device's
/// profiling channel, the way real hardware reports task times: each device the workload
/// used says so in session.json.
pub fn assert_timed_by_channel(recording: &Recording) {
    let session = recording.session();
    let tasks: Vec<Value> = read_truth(&recording.truth)
        .into_values()
        .flatten()
        .filter(|l| l["type"] == "task")
        .collect();
    assert!(!tasks.is_empty());
    for task in &tasks {
        let device = task["device"].as_u64().unwrap() as u32;
        assert_eq!(
            session.device_time_sources.get(&device).map(String::as_str),
            Some("profiling_channel"),
            "device {device}: {:?}",
            session.device_time_sources
        );
    }
    assert_eq!(
        session.activity.tasks_from_channel,
        tasks.len() as u64,
        "every task timed by its begin and end records: {:?}",
        session.activity
    );
}

/// An alignment error and the error bound the clock model claimed for it, in ns.
pub type Aligned = (u64, f64);

/// Checks every truth task against its row; returns the alignment errors with their bounds.
pub fn check_tasks(recording: &Recording) -> Vec<Aligned> {
    let session = recording.session();
    let api: HashMap<u64, Row> = recording
        .table("api")
        .into_iter()
        .map(|r| (r["correlation_id"].as_u64().unwrap(), r))
        .collect();
    let mut rows: HashMap<&str, Vec<Row>> = HashMap::new();
    for table in TASK_TABLES {
        rows.insert(table, recording.table(table));
    }
    let total_rows: usize = rows.values().map(Vec::len).sum();
    let tasks = truth_tasks(recording);
    assert_eq!(total_rows, tasks.len(), "one row per device task");
    let mut errors = Vec::new();
    for task in &tasks {
        let table = task_table(task["kind"].as_str().unwrap()).unwrap();
        let key = |r: &Row| {
            (
                r["pid"].clone(),
                r["device_id"].clone(),
                r["stream_id"].clone(),
                r["task_id"].clone(),
                r["device_start_cnt"].clone(),
            )
        };
        let want = (
            task["pid"].clone(),
            task["device"].clone(),
            task["stream"].clone(),
            task["task"].clone(),
            task["start_cnt"].clone(),
        );
        let matches: Vec<&Row> = rows[table].iter().filter(|r| key(r) == want).collect();
        assert_eq!(matches.len(), 1, "task {task} in {table}: {matches:?}");
        let row = matches[0];
        let ctx = format!("truth {task}\nrow {row:?}");
        assert_eq!(row["device_end_cnt"], task["end_cnt"], "{ctx}");
        assert_eq!(row["status"], task["status"], "status: {ctx}");
        assert_eq!(row["tid"], task["tid"], "submitting thread: {ctx}");
        let call = api
            .get(&row["correlation_id"].as_u64().unwrap())
            .unwrap_or_else(|| panic!("no api row for the correlation id: {ctx}"));
        assert_eq!(call["name"], task["api_fn"], "producing call: {ctx}");
        let (call_start, call_end) = (
            call["start_ns"].as_u64().unwrap(),
            call["end_ns"].as_u64().unwrap(),
        );
        let enter = task["api_enter_ns"].as_u64().unwrap();
        assert!(
            call_start <= enter && enter <= call_end,
            "the call the truth names: {ctx}"
        );
        assert!(
            call["parent_correlation_id"].is_null(),
            "the outermost call: {ctx}"
        );
        match table {
            "kernel" => {
                assert_eq!(row["name"], task["name"], "kernel name: {ctx}")
            }
            "memcpy" | "memset" | "hccl" => {
                assert_eq!(int(&row["bytes"]), int(&task["bytes"]), "bytes: {ctx}")
            }
            "sync" => {
                let kind = match task["sqe_type"].as_u64() {
                    Some(4) => "EVENT_RECORD",
                    Some(5) => "EVENT_WAIT",
                    other => panic!("an event task of SQE type {other:?}: {ctx}"),
                };
                assert_eq!(row["kind"], kind, "{ctx}");
            }
            _ => {}
        }
        for (ours, truth) in [("start_ns", "start_ns"), ("end_ns", "end_ns")] {
            let ours = row[ours]
                .as_u64()
                .unwrap_or_else(|| panic!("no {ours}: {ctx}"));
            let device = task["device"].as_u64().unwrap() as u32;
            let bound = session.clocks[&device]
                .error_bound_ns
                .unwrap_or_else(|| panic!("device {device} has no error bound: {ctx}"));
            errors.push((ours.abs_diff(task[truth].as_u64().unwrap()), bound));
        }
    }
    errors
}

pub fn assert_aligned(name: &str, errors: Vec<Aligned>) {
    for &(error, bound) in &errors {
        assert!(
            error as f64 <= bound + BOUND_SLACK_NS,
            "{name}: a device time {error} ns from the truth, beyond the model's bound {bound:.0} ns"
        );
    }
    let mut errors: Vec<u64> = errors.into_iter().map(|(e, _)| e).collect();
    errors.sort_unstable();
    let at = |q: f64| errors[((errors.len() - 1) as f64 * q) as usize];
    let (median, p99, max) = (at(0.5), at(0.99), errors[errors.len() - 1]);
    println!(
        "{name}: device time error vs truth over {} timestamps: median {median} ns, p99 {p99} ns, max {max} ns",
        errors.len()
    );
    assert!(median <= MEDIAN_LIMIT_NS, "{name}: median {median} ns");
}
