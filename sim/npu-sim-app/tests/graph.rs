//! Graph (model) execution: the model's tasks reach the driver in bulk at load time
//! (`halStreamTaskFill`, never `halSqTaskSend`), each execution is one model-execute task (a
//! COND SQE) on the caller's stream, and every replayed task is timed on channel 50 and in the
//! truth, attributed to its `aclmdlExecute*` call and model.
use std::collections::BTreeMap;

use npu_sim_app::prof::{self, expected_records, multiset, record_key};
use npu_sim_app::*;

#[test]
fn graph_tasks_are_filled_once_and_replayed_per_execution() {
    let dir = scratch_dir("graph");
    let host = prof::unique_host("graph");
    let profiler = prof::start(&host, &dir, &[], &["--device", "0"])
        .unwrap_or_else(|e| panic!("npu-sim-prof did not start:\n{}", e.stderr));
    let truth = dir.join("truth");
    run_ok(
        sim_command("npu-sim-app", &truth)
            .env("NPU_SIM_HOST", &host)
            .args(["graph", "--steps", "3", "--bytes", "65536"]),
    );
    let end = profiler.stop();
    assert!(end.success, "{}", end.stderr);
    let all = read_truth(&truth);
    let lines = all.values().next().expect("a truth file");
    check_consistency(lines);
    // One bulk fill of the 6 tasks, inside aclmdlLoadFromMem.
    let fills: Vec<_> = lines
        .iter()
        .filter(|l| l["fn"] == "halStreamTaskFill")
        .collect();
    assert_eq!(fills.len(), 1);
    assert_eq!(u(&fills[0]["args"], "task_cnt"), 6);
    let model_stream = u(&fills[0]["args"], "stream_id");
    let tasks = of_type(lines, "task");
    // Runs: 3 aclmdlExecuteAsync and 1 aclmdlExecute, each one COND (20) task and 6 graph tasks
    // with the load-time ids 0..5 on the model stream.
    let mut runs: BTreeMap<(String, u64), Vec<_>> = BTreeMap::new();
    for t in tasks.iter().filter(|t| t["model_id"].is_u64()) {
        runs.entry((
            t["api_fn"].as_str().unwrap().to_string(),
            u(t, "api_enter_ns"),
        ))
        .or_default()
        .push(*t);
    }
    assert_eq!(runs.len(), 4);
    for ((api, _), ts) in &runs {
        assert!(
            api == "aclmdlExecuteAsync" || api == "aclmdlExecute",
            "{api}"
        );
        let exec: Vec<_> = ts.iter().filter(|t| t["kind"] == "MODEL").collect();
        assert_eq!(exec.len(), 1, "{api}");
        assert_eq!(u(exec[0], "sqe_type"), 20);
        let mut ids: Vec<u64> = ts
            .iter()
            .filter(|t| t["kind"] != "MODEL")
            .map(|t| {
                assert_eq!(u(t, "stream"), model_stream, "{t}");
                u(t, "task")
            })
            .collect();
        ids.sort();
        assert_eq!(ids, [0, 1, 2, 3, 4, 5], "{api}");
    }
    // No graph task went through halSqTaskSend.
    assert!(
        !lines.iter().any(|a| a["fn"] == "halSqTaskSend"
            && u(&a["args"], "sqId")
                == u(
                    tasks
                        .iter()
                        .find(|t| u(t, "stream") == model_stream)
                        .unwrap(),
                    "sq"
                )),
        "a graph task was sent one by one"
    );
    // Every task, replayed ones included, is one begin and one end record.
    let got: Vec<_> = end.records.iter().map(record_key).collect();
    assert_eq!(multiset(got), multiset(expected_records(lines)));
    prof::remove_host(&host);
    let _ = std::fs::remove_dir_all(&dir);
}
