//! Helpers for the simulator's end-to-end tests: locating the installed tree, running its
//! programs with ground truth on, and reading the truth back. The workload itself is C
//! (`c/app.c`), compiled by `cargo xtask sim`.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::Value;

pub mod ops;
pub mod prof;

/// The installed simulator tree: `$NPU_SIM_HOME` (set by `cargo xtask test`), else
/// `<workspace>/target/npu-sim`, brought up to date by this test process first so that a
/// plain `cargo test` works on a fresh clone.
pub fn sim_home() -> PathBuf {
    static HOME: OnceLock<PathBuf> = OnceLock::new();
    HOME.get_or_init(|| {
        let home = match std::env::var_os("NPU_SIM_HOME") {
            Some(home) => PathBuf::from(home),
            None => install_for_tests(),
        };
        assert!(
            home.join("bin/npu-sim-app").exists()
                && home.join("driver/lib64/libascend_hal.so").exists(),
            "no simulator installed at {}: run `cargo xtask sim` first (or set NPU_SIM_HOME)",
            home.display()
        );
        home.canonicalize().expect("canonical simulator path")
    })
    .clone()
}

/// Runs `cargo xtask sim` into `<workspace>/target/npu-sim`, one test process at a time
/// (a lock file), with its own target directory: the `cargo test` that runs this holds
/// the workspace's. A tree that is up to date costs a no-op build.
fn install_for_tests() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = root.join("target");
    let home = target.join("npu-sim");
    std::fs::create_dir_all(&target).expect("creating target/");
    let lock = std::fs::File::create(target.join(".npu-sim-install.lock")).expect("lock file");
    lock.lock().expect("locking the simulator install");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(&root)
        .args(["run", "--quiet", "-p", "xtask", "--", "sim", "--dest"])
        .arg(&home)
        .env("CARGO_TARGET_DIR", target.join("sim-for-tests"))
        .output()
        .expect("running cargo xtask sim");
    assert!(
        out.status.success(),
        "installing the simulator failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    home
}

/// A fresh, empty directory for one test.
pub fn scratch_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("npu-sim-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("creating scratch dir");
    d
}

/// A command for program `bin/<prog>` of the tree with `set_env.sh`'s environment and ground
/// truth written to `truth`.
pub fn sim_command(prog: &str, truth: &Path) -> Command {
    let home = sim_home();
    let mut c = Command::new(home.join("bin").join(prog));
    let lib = format!(
        "{}:{}",
        home.join("ascend-toolkit/latest/lib64").display(),
        home.join("driver/lib64").display()
    );
    let path = std::env::join_paths(std::iter::once(home.join("bin")).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .expect("PATH");
    c.env("LD_LIBRARY_PATH", lib)
        .env("PATH", path)
        .env("ASCEND_HOME_PATH", home.join("ascend-toolkit/latest"))
        .env("NPU_SIM_TRUTH", truth);
    for var in [
        "NPU_SIM_FAIL_API",
        "NPU_SIM_FAULT_KERNEL",
        "NPU_SIM_TASK_ID_START",
        "NPU_SIM_TASK_SN_START",
        "NPU_SIM_STRAGGLER_MS",
        "NPU_SIM_PROF_BUF_BYTES",
        "NPU_SIM_CHIP",
        "NPU_SIM_TRACK_PROF",
    ] {
        c.env_remove(var);
    }
    c.env("NPU_SIM_HOST", test_host());
    c
}

/// A simulated host of the calling test thread's own. The processes of one host share its
/// devices' profiling channels, as on a real machine; tests run side by side, so each gets
/// a host (every command one test starts, tracer and workload, is on the same one).
pub fn test_host() -> String {
    format!("t{}-{:?}", std::process::id(), std::thread::current().id())
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .collect()
}

/// Runs `cmd` and panics with its output unless it succeeds.
pub fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Every ground-truth line in `dir`, by pid.
pub fn read_truth(dir: &Path) -> BTreeMap<u64, Vec<Value>> {
    let mut by_pid = BTreeMap::new();
    for e in std::fs::read_dir(dir).expect("truth dir") {
        let p = e.expect("dir entry").path();
        let name = p
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let Some(pid) = name
            .strip_prefix("truth-")
            .and_then(|s| s.strip_suffix(".jsonl"))
        else {
            continue;
        };
        let text = std::fs::read_to_string(&p).expect("truth file");
        let lines = text
            .lines()
            .map(|l| {
                serde_json::from_str(l)
                    .unwrap_or_else(|e| panic!("{}: bad line {l:?}: {e}", p.display()))
            })
            .collect();
        by_pid.insert(pid.parse().expect("pid in name"), lines);
    }
    by_pid
}

/// Lines of one `type` ("api", "task", "clock").
pub fn of_type<'a>(lines: &'a [Value], ty: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["type"] == ty).collect()
}

/// `u64` field of a line (panics with the line if missing).
pub fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64()
        .unwrap_or_else(|| panic!("{k} missing in {v}"))
}

/// Number of `api` lines calling `func`.
pub fn api_count(lines: &[Value], func: &str) -> usize {
    lines
        .iter()
        .filter(|l| l["type"] == "api" && l["fn"] == func)
        .count()
}

/// Every CANN function the simulator exports, by installed library (relative to the tree).
pub const EXPORTS: &[(&str, &[&str])] = &[
    (
        "ascend-toolkit/latest/lib64/libascendcl.so",
        &[
            "aclInit",
            "aclFinalize",
            "aclrtSetDevice",
            "aclrtResetDevice",
            "aclrtGetDevice",
            "aclrtSynchronizeDevice",
            "aclrtCreateStream",
            "aclrtDestroyStream",
            "aclrtSynchronizeStream",
            "aclrtStreamWaitEvent",
            "aclrtCreateEvent",
            "aclrtDestroyEvent",
            "aclrtRecordEvent",
            "aclrtSynchronizeEvent",
            "aclrtMalloc",
            "aclrtFree",
            "aclrtMallocHost",
            "aclrtFreeHost",
            "aclrtMemcpy",
            "aclrtMemcpyAsync",
            "aclrtMemset",
            "aclrtMemsetAsync",
            "aclrtBinaryLoadFromData",
            "aclrtBinaryGetFunction",
            "aclrtLaunchKernel",
            "aclmdlLoadFromMem",
            "aclmdlExecute",
            "aclmdlExecuteAsync",
            "aclmdlUnload",
        ],
    ),
    (
        "ascend-toolkit/latest/lib64/libruntime.so",
        &[
            "rtSetDevice",
            "rtDeviceReset",
            "rtGetDevice",
            "rtGetDeviceCount",
            "rtDeviceSynchronize",
            "rtStreamCreate",
            "rtStreamDestroy",
            "rtStreamSynchronize",
            "rtStreamWaitEvent",
            "rtEventCreate",
            "rtEventDestroy",
            "rtEventRecord",
            "rtEventSynchronize",
            "rtMalloc",
            "rtFree",
            "rtMallocHost",
            "rtFreeHost",
            "rtMemcpy",
            "rtMemcpyAsync",
            "rtMemset",
            "rtMemsetAsync",
            "rtDevBinaryRegister",
            "rtRegisterAllKernel",
            "rtBinaryLoad",
            "rtFunctionRegister",
            "rtBinaryGetFunctionByName",
            "rtKernelLaunch",
            "rtKernelLaunchWithHandleV2",
            "rtLaunchKernelByFuncHandleV3",
            "rtCpuKernelLaunch",
            "rtGetTaskIdAndStreamID",
            "rtModelCreate",
            "rtModelGetId",
            "rtModelBindStream",
            "rtModelUnbindStream",
            "rtModelLoadComplete",
            "rtModelExecute",
            "rtModelDestroy",
        ],
    ),
    (
        "ascend-toolkit/latest/lib64/libhccl.so",
        &[
            "HcclGetRootInfo",
            "HcclCommInitRootInfo",
            "HcclAllReduce",
            "HcclBroadcast",
            "HcclAllGather",
            "HcclReduceScatter",
            "HcclReduce",
            "HcclAlltoAll",
            "HcclSend",
            "HcclRecv",
            "HcclBarrier",
            "HcclGetRankId",
            "HcclGetRankSize",
            "HcclCommDestroy",
        ],
    ),
    (
        "ascend-toolkit/latest/lib64/libms_tools_ext.so",
        &[
            "mstxMarkA",
            "mstxRangeStartA",
            "mstxRangeEnd",
            "mstxDomainCreateA",
            "mstxDomainDestroy",
            "mstxDomainMarkA",
            "mstxDomainRangeStartA",
            "mstxDomainRangeEnd",
        ],
    ),
    (
        "driver/lib64/libascend_hal.so",
        &[
            "halGetDeviceInfo",
            "halSqTaskSend",
            "halCqReportRecv",
            "halSqCqQuery",
            "halResourceIdAlloc",
            "halResourceIdFree",
            "halSqCqAllocate",
            "halSqCqFree",
            "halStreamTaskFill",
            "drvMemcpy",
            "drvMemsetD8",
        ],
    ),
];

/// The device clock of a truth `clock` line at host time `ns` (see docs/simulator.md).
pub fn clock_cnt(clock: &Value, ns: u64) -> u64 {
    let freq = i128::from(u(clock, "freq_hz"));
    let offset = i128::from(clock["offset_ns"].as_i64().expect("offset_ns"));
    let drift_ppb = (clock["drift_ppm"].as_f64().expect("drift_ppm") * 1000.0).round() as i128;
    let t = (i128::from(ns) + offset).max(0);
    (t * freq * (1_000_000_000 + drift_ppb) / 1_000_000_000_000_000_000) as u64
}

/// Checks one process's ground truth is complete and consistent:
/// - every api line has enter <= exit, and each nested call (depth > 0) lies inside a call one
///   level up on the same thread;
/// - every task names the outermost api call (depth 0, same thread, same fn and enter time)
///   that submitted it, was submitted inside it through a halSqTaskSend carrying its SQ and
///   task id, and started no earlier than that call;
/// - every task has start <= end in both clocks, and its device counts match the clock line.
pub fn check_consistency(lines: &[Value]) {
    let apis = of_type(lines, "api");
    let mut by_tid: BTreeMap<u64, Vec<&Value>> = BTreeMap::new();
    for a in &apis {
        assert!(
            u(a, "enter_ns") <= u(a, "exit_ns"),
            "api exits before it enters: {a}"
        );
        by_tid.entry(u(a, "tid")).or_default().push(a);
    }
    for calls in by_tid.values_mut() {
        calls.sort_by_key(|a| (u(a, "enter_ns"), u(a, "depth")));
        let mut stack: Vec<&Value> = Vec::new();
        for a in calls.iter() {
            while stack
                .last()
                .is_some_and(|p| u(p, "exit_ns") < u(a, "enter_ns"))
            {
                stack.pop();
            }
            let depth = u(a, "depth");
            if depth > 0 {
                let p = stack
                    .last()
                    .unwrap_or_else(|| panic!("nested call without a parent: {a}"));
                assert_eq!(u(p, "depth") + 1, depth, "parent {p} of {a}");
                assert!(
                    u(p, "exit_ns") >= u(a, "exit_ns"),
                    "{a} outlives its parent {p}"
                );
            }
            stack.push(a);
        }
    }
    let clocks: BTreeMap<u64, &Value> = of_type(lines, "clock")
        .into_iter()
        .map(|c| (u(c, "device"), c))
        .collect();
    assert_eq!(
        clocks.len(),
        of_type(lines, "clock").len(),
        "one clock line per device"
    );
    for t in of_type(lines, "task") {
        assert!(
            u(t, "start_ns") <= u(t, "end_ns") && u(t, "start_cnt") <= u(t, "end_cnt"),
            "task ends first: {t}"
        );
        let clock = clocks
            .get(&u(t, "device"))
            .unwrap_or_else(|| panic!("no clock line for {t}"));
        for (cnt, ns) in [("start_cnt", "start_ns"), ("end_cnt", "end_ns")] {
            assert_eq!(u(t, cnt), clock_cnt(clock, u(t, ns)), "{cnt} of {t}");
        }
        let tid = u(t, "tid");
        let calls = by_tid
            .get(&tid)
            .unwrap_or_else(|| panic!("no api calls on the thread of {t}"));
        let api = calls
            .iter()
            .find(|a| {
                u(a, "depth") == 0
                    && a["fn"] == t["api_fn"]
                    && u(a, "enter_ns") == u(t, "api_enter_ns")
            })
            .unwrap_or_else(|| panic!("no outermost api call for {t}"));
        let (enter, exit) = (u(api, "enter_ns"), u(api, "exit_ns"));
        assert!(
            enter <= u(t, "submit_ns") && u(t, "submit_ns") <= exit,
            "{t} submitted outside {api}"
        );
        assert!(u(t, "start_ns") >= enter, "{t} started before {api}");
        if t["model_id"].is_u64() && t["kind"] != "MODEL" {
            // A graph task: filled into the driver in bulk at load time, run inside the
            // model-execute task its API call sent.
            let exec = of_type(lines, "task").into_iter().find(|m| {
                m["kind"] == "MODEL"
                    && m["api_fn"] == t["api_fn"]
                    && m["api_enter_ns"] == t["api_enter_ns"]
            });
            let exec = exec.unwrap_or_else(|| panic!("no model-execute task for {t}"));
            assert!(
                u(exec, "start_ns") <= u(t, "start_ns") && u(t, "end_ns") <= u(exec, "end_ns"),
                "{t} outside {exec}"
            );
            assert!(
                lines.iter().any(|a| a["fn"] == "halStreamTaskFill"
                    && a["args"]["stream_id"] == t["stream"]
                    && u(a, "exit_ns") <= u(exec, "submit_ns")),
                "{t} was never filled"
            );
            continue;
        }
        // The SQ and the header's task id name the task on both chips (950 headers carry no
        // stream id).
        let send = calls.iter().any(|a| {
            a["fn"] == "halSqTaskSend"
                && a["args"]["sqId"] == t["sq"]
                && a["args"]["task_id"] == t["task"]
                && u(a, "enter_ns") >= enter
                && u(a, "exit_ns") <= exit
        });
        assert!(send, "no halSqTaskSend for {t} inside {api}");
    }
}
