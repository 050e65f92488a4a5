//! HCCL across rank processes: results (checked by the workload itself, which exits non-zero
//! on a wrong value), chunked transfers, and collectives waiting for the slowest rank.
use npu_sim_app::*;

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
        assert!(
            hccl.iter()
                .all(|t| u(t, "status") == 0 && u(t, "sqe_type") == 13),
            "{hccl:?}"
        );
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
        let straggler = !lines.iter().any(|l| l["fn"] == "HcclGetRootInfo");
        if straggler {
            // Rank 1's device idles 40 ms before each collective starts: a lower bound that
            // holds however loaded the machine is.
            for t in &hccl {
                assert!(
                    u(t, "start_ns") >= u(t, "submit_ns") + 40_000_000,
                    "straggler started early: {t}"
                );
            }
        }
        per_rank.push(
            hccl.iter()
                .map(|t| (u(t, "start_ns"), u(t, "end_ns")))
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
