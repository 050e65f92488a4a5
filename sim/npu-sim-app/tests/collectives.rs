//! HCCL across rank processes: results (checked by the workload itself, which exits non-zero
//! on a wrong value), chunked transfers, and collectives waiting for the slowest rank.
use std::collections::BTreeMap;

use npu_sim_app::*;
use serde_json::Value;

/// The tasks of each Hccl call, by (function, enter time), in submission order.
fn collectives_of<'a>(hccl: &[&'a Value]) -> BTreeMap<(String, u64), Vec<&'a Value>> {
    let mut m: BTreeMap<(String, u64), Vec<&Value>> = BTreeMap::new();
    for t in hccl {
        m.entry((
            t["api_fn"].as_str().unwrap_or("").to_string(),
            u(t, "api_enter_ns"),
        ))
        .or_default()
        .push(t);
    }
    for ts in m.values_mut() {
        ts.sort_by_key(|t| u(t, "step"));
    }
    m
}

fn collectives(nproc: &str, count: &str) {
    let dir = scratch_dir(&format!("coll{nproc}-{count}"));
    run_ok(sim_command("npu-sim-run", &dir).args([
        "--nproc",
        nproc,
        "--",
        "npu-sim-app",
        "collectives",
        "--count",
        count,
    ]));
    let truth = read_truth(&dir);
    assert_eq!(truth.len().to_string(), nproc);
    for lines in truth.values() {
        check_consistency(lines);
        let hccl: Vec<_> = of_type(lines, "task")
            .into_iter()
            .filter(|t| t["kind"] == "HCCL")
            .collect();
        // HCCL's host expansion (910B HOST_TS): notify record (6) and wait (7) around an SDMA
        // task (11) moving the data; 5 tasks per collective, 3 per send or receive, 2 per
        // barrier, all attributed to the Hccl call.
        for t in &hccl {
            assert_eq!(u(t, "status"), 0, "{t}");
            let want = match u(t, "step") {
                0 | 3 => 6,
                1 | 4 => 7,
                _ => 11,
            };
            assert_eq!(u(t, "sqe_type"), want, "{t}");
            assert_eq!(t["name"], t["api_fn"], "{t}");
        }
        for (call, tasks) in collectives_of(&hccl) {
            let n = match call.0.as_str() {
                "HcclBarrier" => 2,
                "HcclSend" | "HcclRecv" => 3,
                _ => 5,
            };
            assert_eq!(tasks.len(), n, "{call:?}");
            let data: Vec<_> = tasks.iter().filter(|t| u(t, "sqe_type") == 11).collect();
            assert!(data.iter().all(|t| u(t, "bytes") > 0), "{call:?}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn collectives_are_right_for_two_ranks() {
    collectives("2", "4096");
}

#[test]
fn collectives_are_right_for_three_ranks_in_many_chunks() {
    // 1.5M int32 per rank: several 4 MiB staging chunks and a send/recv ring larger than the
    // 1 MiB channel buffers.
    collectives("3", "1500000");
}

#[test]
fn a_collective_waits_for_the_straggler() {
    let dir = scratch_dir("straggler");
    run_ok(sim_command("npu-sim-run", &dir).args([
        "--nproc",
        "2",
        "--straggler",
        "1:40",
        "--",
        "npu-sim-app",
        "train",
        "--steps",
        "3",
    ]));
    let truth = read_truth(&dir);
    // The k-th allreduce of every rank: none ends before the last one started.
    let mut per_rank: Vec<Vec<(u64, u64)>> = Vec::new();
    for lines in truth.values() {
        let hccl: Vec<_> = of_type(lines, "task")
            .into_iter()
            .filter(|t| t["kind"] == "HCCL")
            .collect();
        let calls = collectives_of(&hccl);
        let straggler = !lines.iter().any(|l| l["fn"] == "HcclGetRootInfo");
        if straggler {
            // Rank 1's device idles 40 ms before each collective's first task starts: a lower
            // bound that holds however loaded the machine is.
            for tasks in calls.values() {
                let first = tasks[0];
                assert!(
                    u(first, "start_ns") >= u(first, "submit_ns") + 40_000_000,
                    "straggler started early: {first}"
                );
            }
        }
        per_rank.push(
            calls
                .values()
                .map(|ts| {
                    let start = ts.iter().map(|t| u(t, "start_ns")).min().unwrap();
                    let end = ts.iter().map(|t| u(t, "end_ns")).max().unwrap();
                    (start, end)
                })
                .collect(),
        );
    }
    assert_eq!(per_rank.len(), 2);
    for k in 0..3 {
        let last_start = per_rank.iter().map(|r| r[k].0).max().unwrap();
        assert!(
            per_rank.iter().all(|r| r[k].1 >= last_start),
            "collective {k} ended before the last rank arrived"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
