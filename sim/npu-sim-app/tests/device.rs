//! The device model: in-order streams, concurrency bounded by cores, event waits, task ids
//! wrapping at 65535, the STARS completion path (SQ head, CQEs only where asked for, received on
//! API threads), synchronous copies as driver calls, injected faults.
use std::collections::BTreeMap;

use npu_sim_app::*;
use serde_json::Value;

/// Tasks of one process grouped by (device, stream), in submission order.
fn by_stream(lines: &[Value]) -> BTreeMap<(u64, u64), Vec<&Value>> {
    let mut m: BTreeMap<(u64, u64), Vec<&Value>> = BTreeMap::new();
    for t in of_type(lines, "task") {
        m.entry((u(t, "device"), u(t, "stream")))
            .or_default()
            .push(t);
    }
    for ts in m.values_mut() {
        ts.sort_by_key(|t| u(t, "submit_ns"));
    }
    m
}

#[test]
fn streams_run_in_order_and_concurrently_within_the_core_limit() {
    let dir = scratch_dir("streams");
    run_ok(
        sim_command("npu-sim-app", &dir)
            .env("NPU_SIM_CORES", "2")
            .args(["burst", "--threads", "4", "--launches", "400"]),
    );
    let truth = read_truth(&dir);
    let lines = truth.values().next().unwrap();
    let streams = by_stream(lines);
    assert!(streams.len() >= 4, "one stream per thread");
    for ts in streams.values() {
        for w in ts.windows(2) {
            assert!(
                u(w[1], "start_ns") >= u(w[0], "end_ns"),
                "stream overlaps itself: {} then {}",
                w[0],
                w[1]
            );
            assert_eq!(
                (u(w[0], "task") + 1) % 65535,
                u(w[1], "task"),
                "task ids are consecutive"
            );
        }
    }
    // Sweep all task intervals: never more than 2 at once, and 2 at some point.
    let mut edges: Vec<(u64, i32)> = of_type(lines, "task")
        .iter()
        .flat_map(|t| [(u(t, "start_ns"), 1), (u(t, "end_ns"), -1)])
        .collect();
    edges.sort_by_key(|&(ns, d)| (ns, d));
    let (mut now, mut max) = (0, 0);
    for (_, d) in edges {
        now += d;
        max = max.max(now);
    }
    assert_eq!(
        max, 2,
        "concurrency is bounded by NPU_SIM_CORES=2 and reached"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn event_waits_follow_their_records_and_sync_apis_wait() {
    let dir = scratch_dir("events");
    run_ok(sim_command("npu-sim-app", &dir).args(["train", "--steps", "3"]));
    let truth = read_truth(&dir);
    let lines = truth.values().next().unwrap();
    let tasks = of_type(lines, "task");
    let waits: Vec<_> = tasks.iter().filter(|t| t["name"] == "EVENT_WAIT").collect();
    assert_eq!(waits.len(), 3);
    for w in waits {
        let rec = tasks
            .iter()
            .filter(|t| {
                t["name"] == "EVENT_RECORD"
                    && t["event"] == w["event"]
                    && u(t, "submit_ns") < u(w, "submit_ns")
            })
            .max_by_key(|t| u(t, "submit_ns"))
            .expect("a record before the wait");
        assert!(
            u(w, "end_ns") >= u(rec, "end_ns"),
            "wait {w} ended before record {rec}"
        );
    }
    // Synchronous copies and memsets are driver calls inside their API call: no task.
    for t in &tasks {
        let f = t["api_fn"].as_str().unwrap_or("");
        assert!(!["aclrtMemcpy", "aclrtMemset"].contains(&f), "{t}");
    }
    for (outer, drv) in [("aclrtMemcpy", "drvMemcpy"), ("aclrtMemset", "drvMemsetD8")] {
        let calls: Vec<_> = lines.iter().filter(|l| l["fn"] == outer).collect();
        assert!(!calls.is_empty(), "no {outer}");
        for c in calls {
            assert!(
                lines.iter().any(|l| l["fn"] == drv
                    && l["tid"] == c["tid"]
                    && u(l, "enter_ns") >= u(c, "enter_ns")
                    && u(l, "exit_ns") <= u(c, "exit_ns")),
                "{outer} without {drv}: {c}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn completion_entries_only_where_the_runtime_asks_for_them() {
    let dir = scratch_dir("cqes");
    run_ok(sim_command("npu-sim-app", &dir).args(["train", "--steps", "3"]));
    run_ok(sim_command("npu-sim-app", &dir).arg("faults"));
    let truth = read_truth(&dir);
    let mut synced = 0;
    for lines in truth.values() {
        check_consistency(lines);
        for t in of_type(lines, "task") {
            let record = t["name"] == "EVENT_RECORD";
            // Event records (RT_EVENT_TIME_LINE) and synchronize records ask for a CQE; ordinary
            // tasks only write one when they fail.
            assert_eq!(t["wr_cqe"], record, "{t}");
            assert_eq!(t["cqe"] == true, record || u(t, "status") != 0, "{t}");
            if t["sync_flag"] == true {
                synced += 1;
                assert_eq!(
                    u(t, "sqe_type"),
                    3,
                    "a synchronize record is a place holder: {t}"
                );
                assert_eq!(t["api_fn"], "aclrtSynchronizeStream", "{t}");
            }
        }
        // Completion entries are received on API threads, inside the calls that wait.
        for a in lines.iter().filter(|l| l["fn"] == "halCqReportRecv") {
            assert!(u(a, "depth") > 0, "{a}");
            assert_eq!(a["args"]["type"], 2, "DRV_LOGIC_TYPE: {a}");
            assert!(u(&a["args"], "cqe_num") <= 32, "{a}");
        }
        assert!(
            lines.iter().any(|l| l["fn"] == "halSqCqQuery"),
            "no SQ head reads"
        );
    }
    assert!(synced > 0, "no stream synchronize needed its record task");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn task_ids_wrap_at_65535() {
    let dir = scratch_dir("wrap");
    run_ok(
        sim_command("npu-sim-app", &dir)
            .env("NPU_SIM_TASK_ID_START", "65530")
            .args(["train", "--steps", "3"]),
    );
    let truth = read_truth(&dir);
    let lines = truth.values().next().unwrap();
    check_consistency(lines);
    let mut wrapped = 0;
    for ts in by_stream(lines).values() {
        assert_eq!(
            u(ts[0], "task"),
            65530,
            "every stream starts at NPU_SIM_TASK_ID_START"
        );
        for w in ts.windows(2) {
            assert_eq!((u(w[0], "task") + 1) % 65535, u(w[1], "task"));
            assert_ne!(
                u(w[1], "task"),
                65535,
                "(last + 1) % 0xFFFF never gives 65535"
            );
            if u(w[0], "task") == 65534 {
                assert_eq!(u(w[1], "task"), 0);
                wrapped += 1;
            }
        }
    }
    assert!(wrapped >= 2, "streams wrapped");
    // rtGetTaskIdAndStreamID reports the thread's last task with its flip count:
    // (flip << 16) | task id.
    for a in lines.iter().filter(|l| l["fn"] == "rtGetTaskIdAndStreamID") {
        let (task, stream) = (&a["args"]["out_task_id"], &a["args"]["out_stream_id"]);
        let last = lines
            .iter()
            .filter(|l| {
                l["type"] == "task"
                    && l["kind"] != "FLIP"
                    && l["tid"] == a["tid"]
                    && u(l, "submit_ns") < u(a, "enter_ns")
            })
            .max_by_key(|l| u(l, "submit_ns"))
            .unwrap();
        assert_eq!((&last["prof_task_id"], &last["stream"]), (task, stream));
    }
    // After 65534 the runtime sends a flip task (a place holder with task_type 98) with the
    // next id, 0, and the stream's incremented flip count; later tasks carry that count.
    let flips: Vec<_> = of_type(lines, "task")
        .into_iter()
        .filter(|t| t["kind"] == "FLIP")
        .collect();
    assert!(!flips.is_empty(), "no flip task");
    for f in &flips {
        assert_eq!(
            (u(f, "task"), u(f, "sqe_type"), u(f, "flip")),
            (0, 3, 1),
            "{f}"
        );
        assert_eq!(u(f, "prof_task_id"), 1 << 16);
        let before = lines
            .iter()
            .filter(|l| {
                l["type"] == "task"
                    && l["stream"] == f["stream"]
                    && u(l, "submit_ns") < u(f, "submit_ns")
            })
            .max_by_key(|l| u(l, "submit_ns"))
            .expect("a task before the flip task");
        assert_eq!(
            (u(before, "task"), u(before, "flip")),
            (65534, 0),
            "{before}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn faults_are_injected_with_real_error_codes() {
    let dir = scratch_dir("faults");
    run_ok(sim_command("npu-sim-app", &dir).arg("faults"));
    let truth = read_truth(&dir);
    let lines = truth.values().next().unwrap();
    check_consistency(lines);
    let ret = |f: &str, code: i64| lines.iter().any(|l| l["fn"] == f && l["ret"] == code);
    assert!(
        ret("rtMalloc", 107000),
        "null devPtr: ACL_ERROR_RT_PARAM_INVALID from the runtime"
    );
    assert!(ret("rtSetDevice", 107001), "ACL_ERROR_RT_INVALID_DEVICEID");
    assert!(
        ret("aclrtMalloc", 100000),
        "size 0: ACL_ERROR_INVALID_PARAM"
    );
    assert!(ret("HcclAllReduce", 2), "HCCL_E_PTR");
    assert!(ret("aclrtCreateEvent", 507899), "NPU_SIM_FAIL_API");
    assert!(
        ret("aclrtSynchronizeStream", 507015),
        "ACL_ERROR_RT_AICORE_EXCEPTION"
    );
    let faulty: Vec<_> = of_type(lines, "task")
        .into_iter()
        .filter(|t| t["name"] == "faulty_kernel")
        .collect();
    let status: Vec<u64> = faulty.iter().map(|t| u(t, "status")).collect();
    assert_eq!(
        status,
        [0, 507015, 0],
        "the 2nd launch faults (NPU_SIM_FAULT_KERNEL=faulty_kernel:2)"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
