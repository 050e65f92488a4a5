//! Device activity against the simulator's ground truth (see `tests::device` for what is
//! checked per task).
use std::collections::HashMap;

use serde_json::Value;
use tests::{
    Row,
    device::{assert_aligned, assert_timed_by_channel, check_tasks, truth_tasks},
    read_truth, record, record_with, sim_bin,
};

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn train_tasks_match_truth() {
    let workload = [
        vec![sim_bin("npu-sim-run")],
        args(&["--nproc", "2", "--", "npu-sim-app", "train", "--steps", "5"]),
    ]
    .concat();
    let recording = record("device-train", &[], &workload);
    let chip = recording
        .session()
        .chip
        .expect("session.json names the chip");
    assert_eq!(
        (chip.layout.as_str(), chip.id),
        ("910B", Some(5)),
        "{chip:?}"
    );
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
    // Every stream starts 5 ids below the wrap (task ids run 0..=65534, RT
    // `(last + 1) % 0xFFFF`), so most of the run's ids reuse values that earlier tasks of
    // the same stream had, and the runtime inserts its flip task at each wrap.
    let workload = [
        args(&["/usr/bin/env", "NPU_SIM_TASK_ID_START=65530"]),
        vec![sim_bin("npu-sim-app")],
        args(&["train", "--steps", "4"]),
    ]
    .concat();
    let recording = record("device-wrap", &[], &workload);
    let tasks = truth_tasks(&recording);
    assert!(
        tasks.iter().any(|t| t["task"].as_u64() == Some(65534))
            && tasks.iter().any(|t| t["task"].as_u64() == Some(0))
            && tasks.iter().any(|t| t["kind"] == "FLIP"),
        "the run crosses the wrap, with flip tasks"
    );
    assert_aligned("wrap", check_tasks(&recording));
    assert_timed_by_channel(&recording);
}

/// A graph: its tasks are loaded once (`halStreamTaskFill`) and run by one model-execute task
/// per `aclmdlExecute*`; every task of every run is a row of that run's call.
#[test]
fn graph_runs_are_rows_of_their_execute_calls() {
    let recording = record(
        "device-graph",
        &[],
        &[sim_bin("npu-sim-app"), "graph".into()],
    );
    let tasks = truth_tasks(&recording);
    let runs = tasks.iter().filter(|t| t["kind"] == "MODEL").count();
    assert!(runs > 1, "the workload runs its model: {runs} runs");
    assert!(
        tasks.iter().filter(|t| t["kind"] == "KERNEL").count() >= 2 * runs,
        "each run runs the model's kernels"
    );
    assert_aligned("graph", check_tasks(&recording));
    assert_timed_by_channel(&recording);
}

/// A channel buffer too small for the device's records (the agent starts its channel with
/// `NPU_SIM_PROF_BUF_BYTES` of 32 records) overflows between reads: the agent says exactly
/// how many records were lost, as the driver counted them.
#[test]
fn a_full_channel_buffer_loses_records_and_says_how_many() {
    let recording = record_with(
        "device-overflow",
        &[("NPU_SIM_PROF_BUF_BYTES", "2048")],
        &[],
        &args(&[
            &sim_bin("npu-sim-app"),
            "burst",
            "--launches",
            "1500",
            "--threads",
            "2",
        ]),
    );
    let lost: u64 = read_truth(&recording.truth)
        .into_values()
        .flatten()
        .filter(|l| l["type"] == "prof")
        .map(|l| l["lost"].as_u64().unwrap())
        .sum();
    assert!(lost > 0, "the buffer overflowed");
    let session = recording.session();
    assert_eq!(
        session.activity.channel_records_lost, lost,
        "{:?}",
        session.activity
    );
    let critical = recording.table("critical_event");
    assert!(
        critical
            .iter()
            .any(|c| c["kind"] == "channel_records_lost" && c["count"] == lost),
        "{critical:?}"
    );
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
