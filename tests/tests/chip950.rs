//! A 950 (STARS v2) host: the agent asks the driver which chip it is and reads the v2 device
//! path (SQE headers with a 32-bit task serial number and no stream id, 32-byte
//! `StarsSocLogV6` channel records, v2 SQE type numbers); every truth task is checked as on
//! 910B (see `tests::device`).
use serde_json::Value;
use tests::{
    Recording,
    device::{assert_aligned, assert_timed_by_channel, check_tasks, chips, truth_tasks},
    record_on_chip, sim_bin,
};

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// The session says the device path was read as a 950, which the truth says it was.
fn assert_read_as_950(recording: &Recording) {
    let chip = recording
        .session()
        .chip
        .expect("session.json names the chip");
    assert_eq!(
        (chip.layout.as_str(), chip.id, chip.fallback.as_deref()),
        ("950", Some(15), None)
    );
    let chips = chips(recording);
    assert!(
        !chips.is_empty() && chips.values().all(|c| c == "950"),
        "{chips:?}"
    );
}

/// Kernels of all three engines (with their own SQE types on v2), events (notify records and
/// waits), the stream-synchronize place holder, copies and a memset task, in one process
/// whose task serial numbers start 48 below the 31-bit wrap: ids above 16 bits, whose low 16
/// bits alone come back in completion entries, then small ones again.
#[test]
fn train_on_950_matches_truth() {
    let workload = [
        args(&["/usr/bin/env", "NPU_SIM_TASK_SN_START=2147483600"]),
        vec![sim_bin("npu-sim-app")],
        args(&["train", "--steps", "5"]),
    ]
    .concat();
    let recording = record_on_chip("chip950-train", "950", &[], &workload);
    assert_read_as_950(&recording);
    let tasks = truth_tasks(&recording);
    let has = |f: &dyn Fn(&Value) -> bool| tasks.iter().any(f);
    assert!(
        has(&|t| t["task"].as_u64() > Some(0xffff)) && has(&|t| t["task"].as_u64() < Some(48)),
        "task ids above 16 bits and past the 31-bit wrap"
    );
    for (engine, sqe_type) in [("AIC", 0), ("AIV", 1), ("AICPU", 5)] {
        assert!(
            has(&|t| t["engine"] == engine && t["sqe_type"] == sqe_type),
            "a kernel on {engine} (SQE type {sqe_type})"
        );
    }
    assert!(
        has(&|t| t["kind"] == "EVENT" && t["sqe_type"] == 6 && t["wr_cqe"] == true),
        "an event record that asks for a completion entry"
    );
    assert!(has(&|t| t["kind"] == "MEMSET"), "a memset task");
    assert_aligned("950 train", check_tasks(&recording));
    assert_timed_by_channel(&recording);
    let session = recording.session();
    assert_eq!(
        session.activity.channel_records_unmatched, 0,
        "{:?}",
        session.activity
    );
    assert_eq!(
        session.activity.missing_completions, 0,
        "{:?}",
        session.activity
    );
}

/// Two ranks, one device each: the collectives' notify and SDMA tasks fold into one hccl row
/// per call on each rank.
#[test]
fn collectives_on_950_match_truth() {
    let workload = [
        vec![sim_bin("npu-sim-run")],
        args(&["--nproc", "2", "--", "npu-sim-app", "collectives"]),
    ]
    .concat();
    let recording = record_on_chip("chip950-collectives", "950", &[], &workload);
    assert_read_as_950(&recording);
    let ranks: std::collections::BTreeSet<_> = recording
        .table("hccl")
        .iter()
        .filter_map(|r| r["pid"].as_u64())
        .collect();
    assert_eq!(ranks.len(), 2, "collectives of both ranks: {ranks:?}");
    assert_aligned("950 collectives", check_tasks(&recording));
    assert_timed_by_channel(&recording);
}

/// A faulting kernel's error comes back in a completion entry that carries only its task
/// id's low 16 bits (the serial numbers here are above 16 bits): the row still gets it.
#[test]
fn device_fault_on_950_is_a_failed_kernel() {
    let workload = [
        args(&["/usr/bin/env", "NPU_SIM_TASK_SN_START=1000000"]),
        vec![sim_bin("npu-sim-app")],
        args(&["faults"]),
    ]
    .concat();
    let recording = record_on_chip("chip950-faults", "950", &[], &workload);
    assert_read_as_950(&recording);
    check_tasks(&recording);
    assert_timed_by_channel(&recording);
    let failed: Vec<_> = recording
        .table("kernel")
        .into_iter()
        .filter(|k| k["status"].as_u64() != Some(0))
        .collect();
    assert!(
        failed
            .iter()
            .any(|k| k["status"] == 507_015 && k["task_id"].as_u64() > Some(0xffff)),
        "a kernel with ACL_ERROR_RT_AICORE_EXCEPTION: {failed:?}"
    );
    let critical = recording.table("critical_event");
    assert!(
        critical.iter().any(|c| c["kind"] == "device_error"),
        "{critical:?}"
    );
}

/// A graph's tasks, loaded by `halStreamTaskFill` with v2 headers, are rows of the
/// execution that ran them.
#[test]
fn graph_on_950_matches_truth() {
    let workload = [vec![sim_bin("npu-sim-app")], args(&["graph"])].concat();
    let recording = record_on_chip("chip950-graph", "950", &[], &workload);
    assert_read_as_950(&recording);
    let tasks = truth_tasks(&recording);
    assert!(tasks.iter().filter(|t| t["kind"] == "MODEL").count() > 1);
    assert_aligned("950 graph", check_tasks(&recording));
    assert_timed_by_channel(&recording);
}
