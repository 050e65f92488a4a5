//! Helpers for tracing processes that are already running: start a simulator workload,
//! find its pid, attach to it, and compare the window traced with the ground truth.
use std::{
    collections::HashMap,
    path::Path,
    process::{Child, Command},
    thread::sleep,
    time::{Duration, Instant},
};

use serde_json::Value;
use tracer_schema::session::Session;

use crate::{
    Row,
    device::{Expected, expected_rows},
    read_table, read_truth, scratch_dir, sim_command, tracer_command,
    truth::{TASK_TABLES, task_table},
};

/// Spawns `cmd` with stdout to `log` and returns it with the pid the workload prints
/// (`npu-sim-app: pid=N ...`).
#[allow(
    clippy::zombie_processes,
    reason = "the caller waits for the returned child"
)]
pub fn spawn_workload(cmd: &mut Command, log: &Path) -> (Child, u32) {
    let mut child = cmd
        .stdout(std::fs::File::create(log).unwrap())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(pid) = text
            .split_whitespace()
            .find_map(|w| w.strip_prefix("pid="))
            .and_then(|p| p.parse().ok())
        {
            return (child, pid);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("workload printed no pid: {text:?}");
        }
        sleep(Duration::from_millis(20));
    }
}

/// Starts a long `train` run (function handles of runtime generation `runtime`) and returns
/// it once it has registered its kernels.
pub fn start_long_train(truth: &Path, log: &Path, runtime: &str) -> (Child, u32) {
    let mut cmd = sim_command("npu-sim-app", truth);
    cmd.env("NPU_SIM_CANN_RUNTIME", runtime).args([
        "train",
        "--steps",
        "100000",
        "--step-sleep-ms",
        "20",
    ]);
    let started = spawn_workload(&mut cmd, log);
    sleep(Duration::from_millis(500)); // registration happens at start
    started
}

pub fn stop(mut app: Child) {
    // SAFETY: plain kill(2) of our own child.
    unsafe { libc::kill(app.id() as i32, libc::SIGINT) };
    let status = app.wait().unwrap();
    assert!(status.success(), "workload failed: {status}");
}

/// Waits for a workload that ends by itself; panics unless it succeeded.
pub fn stop_when_done(mut app: Child) {
    let status = app.wait().unwrap();
    assert!(status.success(), "workload failed: {status}");
}

pub fn session(dir: &Path) -> Session {
    Session::read(dir).unwrap_or_else(|e| panic!("{e:#}"))
}

/// Truth api lines of `pid` (traced libraries only).
pub fn truth_of(truth: &Path, pid: u32) -> Vec<Value> {
    read_truth(truth)
        .remove(&u64::from(pid))
        .unwrap_or_default()
        .into_iter()
        .filter(|l| l["type"] == "api" && l["lib"] != "libascend_hal.so")
        .collect()
}

/// Every truth call that began after tracing started and ended before the last traced
/// return has exactly one row with the same thread and function bracketing it.
pub fn assert_window_complete(rows: &[Row], truth: &[Value], traced_from_ns: u64) -> usize {
    let until = rows
        .iter()
        .filter_map(|r| r["end_ns"].as_u64())
        .max()
        .expect("rows");
    // Rows not yet matched, per (thread, function): a long run has many calls.
    let mut unmatched: HashMap<(u64, &str), Vec<&Row>> = HashMap::new();
    for row in rows {
        let key = (
            row["tid"].as_u64().unwrap_or(0),
            row["name"].as_str().unwrap_or(""),
        );
        unmatched.entry(key).or_default().push(row);
    }
    let mut checked = 0;
    for call in truth {
        let (enter, exit) = (
            call["enter_ns"].as_u64().unwrap(),
            call["exit_ns"].as_u64().unwrap(),
        );
        if enter <= traced_from_ns || exit > until {
            continue;
        }
        let key = (
            call["tid"].as_u64().unwrap_or(0),
            call["fn"].as_str().unwrap_or(""),
        );
        let candidates = unmatched.entry(key).or_default();
        let found = candidates.iter().position(|r| {
            r["start_ns"].as_u64().unwrap() <= enter
                && r["end_ns"].as_u64().is_some_and(|end| exit <= end)
        });
        let Some(i) = found else {
            panic!("call missing from the trace: {call}");
        };
        candidates.swap_remove(i);
        checked += 1;
    }
    checked
}

/// Every device task `pid` submitted between `from_ns` and `until_ns` has exactly one row in
/// its table (the tasks of a memset or a collective one row together), with the device
/// counts of the truth, and every row stands for tasks of the truth; returns how many rows
/// were checked.
pub fn assert_device_window(
    dir: &Path,
    truth: &Path,
    pid: u32,
    from_ns: u64,
    until_ns: u64,
) -> usize {
    let tasks: Vec<Value> = read_truth(truth)
        .remove(&u64::from(pid))
        .unwrap_or_default()
        .into_iter()
        .filter(|l| l["type"] == "task" && task_table(l["kind"].as_str().unwrap_or("")).is_some())
        .collect();
    let expected = expected_rows(&tasks);
    let key = |device: &Value, start: &Value| {
        (
            device.as_u64().unwrap_or(u64::MAX),
            start.as_u64().unwrap_or(0),
        )
    };
    // Indexed: a long run's truth has tens of thousands of tasks.
    let by_key: HashMap<(&str, (u64, u64)), &Expected> = expected
        .iter()
        .map(|e| ((e.table, key(&e.task["device"], &e.start_cnt.into())), e))
        .collect();
    let raw: HashMap<(u64, u64), &Value> = tasks
        .iter()
        .map(|t| (key(&t["device"], &t["start_cnt"]), t))
        .collect();
    let mut checked = 0;
    for table in TASK_TABLES {
        let rows = read_table(dir, table);
        let mut seen: HashMap<(u64, u64), usize> = HashMap::new();
        for row in &rows {
            let at = key(&row["device_id"], &row["device_start_cnt"]);
            let call = row.get("api_name").or_else(|| row.get("name"));
            if call.is_none_or(|c| c == "") {
                // A task of a call that began before the attach: without its call, only
                // the SQE type tells its table, so it is only checked to be a truth task.
                let task = raw
                    .get(&at)
                    .unwrap_or_else(|| panic!("{table} row of no truth task: {row:?}"));
                assert_eq!(row["device_end_cnt"], task["end_cnt"], "{task}\n{row:?}");
                continue;
            }
            let found = by_key
                .get(&(table, at))
                .unwrap_or_else(|| panic!("{table} row of no truth task: {row:?}"));
            assert_eq!(row["device_end_cnt"], found.end_cnt, "{found:?}\n{row:?}");
            *seen.entry(at).or_default() += 1;
        }
        for want in expected.iter().filter(|e| e.table == table) {
            let submit = want.task["submit_ns"].as_u64().unwrap();
            if submit <= from_ns || submit >= until_ns {
                continue;
            }
            let at = key(&want.task["device"], &want.start_cnt.into());
            assert_eq!(
                seen.get(&at).copied().unwrap_or(0),
                1,
                "{table} rows of {want:?}"
            );
            checked += 1;
        }
    }
    checked
}

/// Kernels registered before the agent attached are named from their function handles, in
/// both runtime generations: the `Kernel*` itself (2025) and the `rtInnerObject` "FUNC"
/// wrapper around it (2026).
/// Starts a long `train` run with function handles of runtime generation `runtime`
/// (`NPU_SIM_CANN_RUNTIME`), attaches to it for 3 s, and checks that the window is complete,
/// nothing leaked, and every launch, its kernel registered before the attach, is named.
pub fn attach_and_name_kernels(runtime: &str) {
    let scratch = scratch_dir(&format!("attach-{runtime}"));
    let (truth, dir) = (scratch.join("truth"), scratch.join("trace"));
    std::fs::create_dir_all(&truth).unwrap();
    let (app, pid) = start_long_train(&truth, &scratch.join("app.log"), runtime);
    let output = tracer_command(&truth)
        .args([
            "attach",
            "--pid",
            &pid.to_string(),
            "--duration",
            &format!("{}s", 3 * crate::time_scale()),
            // The tests run the debug build of the agent, several times slower than a
            // release build, against a workload of ~13k calls/s: room for the backlog.
            "--ringbuf-mb",
            "64",
            "--out",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    stop(app);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

    let rows = read_table(&dir, "api");
    assert!(rows.len() > 100, "only {} rows", rows.len());
    assert!(
        rows.iter()
            .all(|r| r["pid"].as_u64() == Some(u64::from(pid)))
    );
    let session = session(&dir);
    assert_eq!(
        session.total_drops(),
        0,
        "attaching mid-call must not leak call frames: {:?}",
        session.drops
    );
    let started = session.clock_start.monotonic_ns;
    let checked = assert_window_complete(&rows, &truth_of(&truth, pid), started);
    assert!(checked > 100, "only {checked} calls in the window");
    let last_call = rows
        .iter()
        .filter_map(|r| r["start_ns"].as_u64())
        .max()
        .unwrap();
    let tasks = assert_device_window(&dir, &truth, pid, started, last_call);
    assert!(tasks > 100, "only {tasks} device tasks in the window");
    assert!(
        session
            .device_time_sources
            .values()
            .all(|s| s == "profiling_channel"),
        "{:?}",
        session.device_time_sources
    );
    assert_eq!(
        session.activity.missing_completions, 0,
        "{:?}",
        session.activity
    );
    let launches: Vec<&Row> = rows
        .iter()
        .filter(|r| {
            [
                "aclrtLaunchKernel",
                "rtLaunchKernelByFuncHandleV3",
                "rtKernelLaunch",
            ]
            .contains(&r["name"].as_str().unwrap())
        })
        .collect();
    assert!(!launches.is_empty());
    for launch in launches {
        assert!(
            launch["kernel_name"].is_string(),
            "runtime {runtime}: unnamed kernel: {launch:?}"
        );
    }
    assert_eq!(
        session.read_failures.values().sum::<u64>(),
        0,
        "runtime {runtime}: {:?}",
        session.read_failures
    );
}
