//! The driver's profiling channel 50 seen by a profiler that owns it (`npu-sim-prof`, which
//! does what msprof does): every device task of every process on the device appears exactly
//! once as a begin and an end record with the truth's ids and device times; a full buffer loses
//! exactly what was not stored; wrapped task ids still decode. Nothing here depends on speed.
use std::collections::BTreeMap;
use std::path::Path;

use npu_sim_app::prof::{self, ProfEnd, RecordKey, expected_records, multiset, record_key};
use npu_sim_app::*;
use serde_json::Value;

/// Records of one `npu-sim-prof` run, by device, in the order read.
fn by_device(records: &[Value]) -> BTreeMap<u64, Vec<RecordKey>> {
    let mut m: BTreeMap<u64, Vec<RecordKey>> = BTreeMap::new();
    for r in records {
        m.entry(u(r, "device")).or_default().push(record_key(r));
    }
    m
}

/// Every workload task appears once as a begin and an end record and nothing else does; each
/// device's records come in timestamp order; the channel lost nothing.
fn check_complete(end: &ProfEnd, truth_dir: &Path) -> Vec<RecordKey> {
    assert!(end.success, "npu-sim-prof failed:\n{}", end.stderr);
    let truth = read_truth(truth_dir);
    let want: Vec<RecordKey> = truth.values().flat_map(|l| expected_records(l)).collect();
    let got: Vec<RecordKey> = end.records.iter().map(record_key).collect();
    assert!(!want.is_empty());
    assert_eq!(multiset(got.clone()), multiset(want.clone()));
    for (dev, recs) in by_device(&end.records) {
        assert!(
            recs.windows(2).all(|w| w[0].4 <= w[1].4),
            "device {dev}: records out of timestamp order"
        );
        let (read, produced, lost) = end.summary(dev);
        assert_eq!(
            (read, produced, lost),
            (recs.len() as u64, recs.len() as u64, 0)
        );
    }
    // acsqId is the driver's SQ id (10 bits), not the stream id.
    let sq_of: std::collections::BTreeMap<(u64, u64, u64), u64> = truth
        .values()
        .flat_map(|l| of_type(l, "task"))
        .map(|t| {
            (
                (u(t, "device"), u(t, "stream"), u(t, "start_cnt")),
                u(t, "sq"),
            )
        })
        .collect();
    for r in end.records.iter().filter(|r| u(r, "func_type") == 0) {
        let sq = sq_of[&(u(r, "device"), u(r, "stream"), u(r, "timestamp"))];
        assert_eq!(u(r, "acsq_id"), sq & 0x3ff, "{r}");
    }
    want
}

#[test]
fn every_task_of_every_process_is_one_begin_and_one_end_record() {
    let dir = scratch_dir("prof-all");
    let host = prof::unique_host("prof-all");
    let profiler = prof::start(&host, &dir, &[], &["--device", "0,1"])
        .unwrap_or_else(|e| panic!("npu-sim-prof did not start:\n{}", e.stderr));
    let truth = dir.join("truth");
    // Two ranks on devices 0 and 1, and at the same time a second process on device 0.
    let mut train = sim_command("npu-sim-run", &truth);
    train.env("NPU_SIM_HOST", &host).args([
        "--nproc",
        "2",
        "--",
        "npu-sim-app",
        "train",
        "--steps",
        "3",
    ]);
    let mut burst = sim_command("npu-sim-app", &truth);
    burst
        .env("NPU_SIM_HOST", &host)
        .args(["burst", "--threads", "2", "--launches", "300"]);
    let mut train = train
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("npu-sim-run");
    run_ok(&mut burst);
    assert!(train.wait().expect("npu-sim-run").success());
    let end = profiler.stop();
    let want = check_complete(&end, &truth);
    // Device 0 got records from both of its processes.
    let pids_on_dev0 = read_truth(&truth)
        .values()
        .filter(|l| of_type(l, "task").iter().any(|t| u(t, "device") == 0))
        .count();
    assert_eq!(pids_on_dev0, 2);
    // Every SQE type of the train workload, and all three id encodings, were exercised.
    let types: std::collections::BTreeSet<u64> = want.iter().map(|k| k.5).collect();
    assert_eq!(
        types.into_iter().collect::<Vec<_>>(),
        [0, 1, 3, 4, 5, 6, 7, 11]
    );
    for bit in [0x1000, 0x2000] {
        assert!(
            end.records.iter().any(|r| u(r, "stream_id_raw") & bit != 0),
            "no record with stream field bit {bit:#x}"
        );
    }
    // The owner's ground truth reports the session.
    let prof_truth = read_truth(&dir.join("prof-truth"));
    let sessions: Vec<&Value> = prof_truth
        .values()
        .flat_map(|l| of_type(l, "prof"))
        .collect();
    assert_eq!(sessions.len(), 2);
    for s in sessions {
        assert_eq!((u(s, "channel"), u(s, "lost")), (50, 0));
        assert_eq!(u(s, "produced"), u(s, "read"));
    }
    prof::remove_host(&host);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_full_buffer_loses_exactly_what_it_could_not_store() {
    let dir = scratch_dir("prof-full");
    let host = prof::unique_host("prof-full");
    // 16 records of buffer, and nothing read until the profiler is stopped.
    let profiler = prof::start(
        &host,
        &dir,
        &[("NPU_SIM_PROF_BUF_BYTES", "1024")],
        &["--device", "0", "--no-read"],
    )
    .unwrap_or_else(|e| panic!("npu-sim-prof did not start:\n{}", e.stderr));
    let truth = dir.join("truth");
    run_ok(
        sim_command("npu-sim-app", &truth)
            .env("NPU_SIM_HOST", &host)
            .args(["train", "--steps", "2"]),
    );
    let end = profiler.stop();
    assert!(end.success, "{}", end.stderr);
    let mut want: Vec<RecordKey> = read_truth(&truth)
        .values()
        .flat_map(|l| expected_records(l))
        .collect();
    let produced = want.len() as u64;
    let got: Vec<RecordKey> = end.records.iter().map(record_key).collect();
    assert_eq!(got.len(), 16, "the buffer held 16 records");
    assert_eq!(end.summary(0), (16, produced, produced - 16));
    // The buffer kept the first 16 records the device produced: every record read was
    // expected, and none of the lost ones is older than a kept one.
    for k in &got {
        let i = want
            .iter()
            .position(|w| w == k)
            .unwrap_or_else(|| panic!("unexpected {k:?}"));
        want.swap_remove(i);
    }
    let newest_kept = got.iter().map(|k| k.4).max().unwrap();
    let oldest_lost = want.iter().map(|k| k.4).min().unwrap();
    assert!(newest_kept <= oldest_lost, "{newest_kept} > {oldest_lost}");
    let prof_truth = read_truth(&dir.join("prof-truth"));
    let session = prof_truth
        .values()
        .flat_map(|l| of_type(l, "prof"))
        .next()
        .expect("prof line");
    assert_eq!(
        (
            u(session, "produced"),
            u(session, "read"),
            u(session, "lost")
        ),
        (produced, 16, produced - 16)
    );
    assert!(
        end.stderr.contains("buffer full"),
        "driver warning:\n{}",
        end.stderr
    );
    prof::remove_host(&host);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn wrapped_task_ids_decode_to_the_truth() {
    let dir = scratch_dir("prof-wrap");
    let host = prof::unique_host("prof-wrap");
    let profiler = prof::start(&host, &dir, &[], &["--device", "0", "--format", "jsonl"])
        .unwrap_or_else(|e| panic!("npu-sim-prof did not start:\n{}", e.stderr));
    let truth = dir.join("truth");
    run_ok(
        sim_command("npu-sim-app", &truth)
            .env("NPU_SIM_HOST", &host)
            .env("NPU_SIM_TASK_ID_START", "65530")
            .args(["train", "--steps", "3"]),
    );
    let want = check_complete(&profiler.stop(), &truth);
    let tasks: Vec<u64> = want.iter().map(|k| k.3).collect();
    assert!(tasks.contains(&65534) && tasks.contains(&0), "ids wrapped");
    assert!(
        tasks.iter().any(|t| t & 0xe000 != 0),
        "ids with the top bits set"
    );
    prof::remove_host(&host);
    let _ = std::fs::remove_dir_all(&dir);
}
