//! Device activity against the simulator's ground truth: every device task appears exactly
//! once, in the right table, joined to the outermost API call that produced it, with the
//! right name, stream, bytes and status, and device times aligned to the host clock.
use std::collections::HashMap;

use npu_sim_app::{prof, test_host};
use serde_json::Value;
use tests::{
    Recording, Row, int, read_truth, record, scratch_dir, sim_bin,
    truth::{TASK_TABLES, task_table},
};

/// Device times must be as close to the truth as the clock model says it can be (its
/// reported error bound; 1 µs of rounding allowed). How tight that bound gets depends on how
/// precisely the agent could read the device clock, which a loaded machine degrades: the
/// median limit only catches a broken model, and the figures are printed.
const BOUND_SLACK_NS: f64 = 1_000.0;
const MEDIAN_LIMIT_NS: u64 = 10_000;

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// Truth tasks of the traced workload that have a table (all the simulator makes).
fn truth_tasks(recording: &Recording) -> Vec<Value> {
    read_truth(&recording.truth)
        .into_values()
        .flatten()
        .filter(|l| l["type"] == "task" && task_table(l["kind"].as_str().unwrap()).is_some())
        .collect()
}

/// Every truth task (event records and waits included) was timed by the device's
/// profiling channel, the way real hardware reports task times: each device the workload
/// used says so in session.json.
fn assert_timed_by_channel(recording: &Recording) {
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
type Aligned = (u64, f64);

/// Checks every truth task against its row; returns the alignment errors with their bounds.
fn check_tasks(recording: &Recording) -> Vec<Aligned> {
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

fn assert_aligned(name: &str, errors: Vec<Aligned>) {
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

#[test]
fn train_tasks_match_truth() {
    let workload = [
        vec![sim_bin("npu-sim-run")],
        args(&["--nproc", "2", "--", "npu-sim-app", "train", "--steps", "5"]),
    ]
    .concat();
    let recording = record("device-train", &[], &workload);
    let errors = check_tasks(&recording);
    assert_aligned("train", errors);
    assert_timed_by_channel(&recording);
    let hccl = recording.table("hccl");
    let seqs: Vec<_> = hccl
        .iter()
        .map(|r| (r["rank"].clone(), r["seq"].clone(), r["comm_name"].clone()))
        .collect();
    for rank0 in seqs.iter().filter(|s| s.0 == 0) {
        assert!(
            seqs.iter()
                .any(|s| s.0 == 1 && s.1 == rank0.1 && s.2 == rank0.2),
            "collective {rank0:?} on both ranks"
        );
    }
}

#[test]
fn collectives_match_truth() {
    let workload = [
        vec![sim_bin("npu-sim-run")],
        args(&["--nproc", "2", "--", "npu-sim-app", "collectives"]),
    ]
    .concat();
    let recording = record("device-collectives", &[], &workload);
    assert_aligned("collectives", check_tasks(&recording));
    assert_timed_by_channel(&recording);
}

#[test]
fn device_fault_is_a_failed_kernel_and_a_critical_event() {
    let recording = record(
        "device-faults",
        &[],
        &[sim_bin("npu-sim-app"), "faults".into()],
    );
    check_tasks(&recording);
    assert_timed_by_channel(&recording);
    let failed: Vec<Row> = recording
        .table("kernel")
        .into_iter()
        .filter(|k| k["status"].as_u64() != Some(0))
        .collect();
    assert!(
        failed.iter().any(|k| k["status"] == 507_015),
        "a kernel with ACL_ERROR_RT_AICORE_EXCEPTION: {failed:?}"
    );
    let critical = recording.table("critical_event");
    assert!(
        critical
            .iter()
            .any(|c| c["kind"] == "device_error"
                && c["message"].as_str().unwrap().contains("507015")),
        "{critical:?}"
    );
}

#[test]
fn task_ids_that_wrap_join_the_right_calls() {
    // Every stream starts 6 ids below the 16-bit wrap, so most of the run's ids reuse
    // values that earlier tasks of the same stream had.
    let workload = [
        args(&["/usr/bin/env", "NPU_SIM_TASK_ID_START=65530"]),
        vec![sim_bin("npu-sim-app")],
        args(&["train", "--steps", "4"]),
    ]
    .concat();
    let recording = record("device-wrap", &[], &workload);
    let tasks = truth_tasks(&recording);
    assert!(
        tasks.iter().any(|t| t["task"].as_u64() == Some(65535))
            && tasks.iter().any(|t| t["task"].as_u64() == Some(0)),
        "the run crosses the wrap"
    );
    assert_aligned("wrap", check_tasks(&recording));
    assert_timed_by_channel(&recording);
}

/// Another profiler (npu-sim-prof, as msprof or msPTI) owns device 0's channel: the driver
/// refuses it to the agent, which says so and times that device's tasks from completion
/// entries instead; nothing is lost.
#[test]
fn a_channel_owned_by_another_profiler_falls_back_to_completions() {
    let scratch = scratch_dir("device-prof-owner");
    let profiler = prof::start(&test_host(), &scratch, &[], &["--device", "0"])
        .unwrap_or_else(|end| panic!("npu-sim-prof did not start: {}", end.stderr));
    let recording = record(
        "device-prof-owner",
        &[],
        &[
            sim_bin("npu-sim-app"),
            "train".into(),
            "--steps".into(),
            "3".into(),
        ],
    );
    let end = profiler.stop();
    assert!(end.success, "npu-sim-prof: {}", end.stderr);
    let session = recording.session();
    let source = &session.device_time_sources[&0];
    assert!(source.starts_with("completion_queue: "), "{source}");
    let critical = recording.table("critical_event");
    assert!(
        critical
            .iter()
            .any(|c| c["kind"] == "device_time_source" && c["device_id"] == 0),
        "{critical:?}"
    );
    assert_aligned("profiler-owned channel", check_tasks(&recording));
    assert_eq!(session.activity.tasks_from_channel, 0);
}

#[test]
fn allocations_become_memory_rows() {
    let recording = record(
        "device-alloc",
        &[],
        &[sim_bin("npu-sim-app"), "alloc".into()],
    );
    let memory = recording.table("memory");
    let api: HashMap<u64, Row> = recording
        .table("api")
        .into_iter()
        .map(|r| (r["correlation_id"].as_u64().unwrap(), r))
        .collect();
    let calls: Vec<Value> = recording
        .truth_api()
        .into_iter()
        .filter(|c| {
            ["rtMalloc", "rtFree", "rtMallocHost", "rtFreeHost"]
                .contains(&c["fn"].as_str().unwrap())
        })
        .filter(|c| c["ret"] == 0)
        .collect();
    assert!(!calls.is_empty());
    assert_eq!(
        memory.len(),
        calls.len(),
        "one memory row per runtime allocation call"
    );
    for call in &calls {
        let allocation = call["fn"].as_str().unwrap().contains("Malloc");
        let address = if allocation {
            &call["args"]["out_ptr"]
        } else {
            call["args"].as_object().unwrap().values().next().unwrap()
        };
        let row = memory
            .iter()
            .find(|m| {
                m["address"] == *address
                    && m["api_name"] == call["fn"]
                    && m["tid"] == call["tid"]
                    && m["start_ns"].as_u64() <= call["enter_ns"].as_u64()
                    && call["exit_ns"].as_u64() <= m["end_ns"].as_u64()
            })
            .unwrap_or_else(|| panic!("no memory row for {call}"));
        assert_eq!(
            row["operation"],
            if allocation { "ALLOCATION" } else { "RELEASE" }
        );
        if allocation {
            assert_eq!(row["bytes"], call["args"]["size"], "{call}");
        }
        let outer = &api[&row["correlation_id"].as_u64().unwrap()];
        assert!(
            outer["parent_correlation_id"].is_null(),
            "attributed to the outermost call: {row:?}"
        );
    }
}
