//! `NPU_SIM_CHIP=950`: the STARS v2 header (a 32-bit task serial number at offset 4, no stream
//! id), v2 SQE types, the memset task, and 32-byte `StarsSocLogV6` records on channel 50.
use std::collections::BTreeSet;

use npu_sim_app::prof::{self, expected_records, multiset, record_key};
use npu_sim_app::*;

#[test]
fn a_950_runs_v2_sqes_and_logs_v6_records() {
    let dir = scratch_dir("chip950");
    let host = prof::unique_host("chip950");
    let profiler = prof::start(
        &host,
        &dir,
        &[("NPU_SIM_CHIP", "950")],
        &["--device", "0,1"],
    )
    .unwrap_or_else(|e| panic!("npu-sim-prof did not start:\n{}", e.stderr));
    let truth = dir.join("truth");
    run_ok(
        sim_command("npu-sim-run", &truth)
            .env("NPU_SIM_HOST", &host)
            .env("NPU_SIM_CHIP", "950")
            .args(["--nproc", "2", "--", "npu-sim-app", "train", "--steps", "2"]),
    );
    let end = profiler.stop();
    assert!(end.success, "{}", end.stderr);
    let lines_by_pid = read_truth(&truth);
    let mut want = Vec::new();
    for lines in lines_by_pid.values() {
        check_consistency(lines);
        assert!(of_type(lines, "clock").iter().all(|c| c["chip"] == "950"));
        let tasks = of_type(lines, "task");
        for (name, ty, engine) in [
            ("matmul_fwd", 0, "AIC"),
            ("vadd_aiv", 1, "AIV"),
            ("TopKV2", 5, "AICPU"),
        ] {
            assert!(
                tasks
                    .iter()
                    .any(|t| t["name"] == name && u(t, "sqe_type") == ty && t["engine"] == engine),
                "no {name} task of type {ty}"
            );
        }
        // Events are notify records and waits; a memset is one SDMA task.
        for t in &tasks {
            match t["name"].as_str().unwrap_or("") {
                "EVENT_RECORD" if t["sync_flag"] == false && u(t, "sqe_type") != 3 => {
                    assert_eq!(u(t, "sqe_type"), 6, "{t}")
                }
                "EVENT_WAIT" => assert_eq!(u(t, "sqe_type"), 7, "{t}"),
                "MEMSET" => {
                    assert_eq!(u(t, "sqe_type"), 11, "{t}");
                    assert!(t["copy_kind"].is_null(), "a fill task, not a copy: {t}");
                }
                _ => {}
            }
            assert_ne!(t["kind"], "FLIP", "no flip tasks on 950");
            assert_eq!(t["sync_flag"], false, "no RT_SYNC_TASK_FLAG in a v2 header");
            assert_eq!(u(t, "prof_task_id"), u(t, "task"));
        }
        // Task ids are the process's serial numbers: unique across all its streams.
        let ids: BTreeSet<u64> = tasks.iter().map(|t| u(t, "task")).collect();
        assert_eq!(ids.len(), tasks.len());
        // halSqTaskSend saw no stream id in the header.
        for a in lines.iter().filter(|l| l["fn"] == "halSqTaskSend") {
            assert!(a["args"]["stream_id"].is_null(), "{a}");
        }
        want.extend(expected_records(lines));
    }
    let got: Vec<_> = end.records.iter().map(record_key).collect();
    assert_eq!(multiset(got), multiset(want));
    for r in &end.records {
        assert_eq!(u(r, "stream"), 0, "V6 records carry no stream: {r}");
    }
    prof::remove_host(&host);
    let _ = std::fs::remove_dir_all(&dir);
}
