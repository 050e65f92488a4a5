//! Ground truth: complete and consistent for every workload, and every exported function is
//! both a dynamic symbol of its library and reached by the workloads.
use std::collections::BTreeSet;

use npu_sim_app::*;

#[test]
fn two_rank_train_writes_consistent_truth() {
    let dir = scratch_dir("train2");
    run_ok(sim_command("npu-sim-run", &dir).args([
        "--nproc",
        "2",
        "--",
        "npu-sim-app",
        "train",
        "--steps",
        "5",
    ]));
    let truth = read_truth(&dir);
    assert_eq!(truth.len(), 2, "one truth file per rank");
    for lines in truth.values() {
        check_consistency(lines);
        assert_eq!(api_count(lines, "HcclAllReduce"), 5);
        assert_eq!(api_count(lines, "mstxRangeStartA"), 5);
        let tasks = of_type(lines, "task");
        for kind in ["KERNEL", "MEMCPY", "MEMSET", "HCCL", "EVENT"] {
            assert!(tasks.iter().any(|t| t["kind"] == kind), "no {kind} task");
        }
        // Kernels of every engine, named as registered; on 910B AI Core and AI Vector kernels
        // are both FFTS SQEs (type 0), AI CPU kernels type 1.
        for (name, sqe_type, engine) in [
            ("matmul_fwd", 0, "AIC"),
            ("softmax_fwd", 0, "AIC"),
            ("adam_update", 0, "AIC"),
            ("vadd_aiv", 0, "AIV"),
            ("TopKV2", 1, "AICPU"),
        ] {
            assert!(
                tasks.iter().any(|t| t["name"] == name
                    && t["sqe_type"] == sqe_type
                    && t["engine"] == engine),
                "no {name} task"
            );
        }
        // A memset is SDMA copies on 910B: the first H2D from a host buffer of the value.
        let memsets: Vec<_> = tasks.iter().filter(|t| t["kind"] == "MEMSET").collect();
        assert!(!memsets.is_empty());
        for m in memsets {
            assert_eq!((u(m, "sqe_type"), u(m, "copy_kind")), (11, 1), "{m}");
        }
        // Every task of a kernel launch comes from the launching API, handle or stub path.
        for t in tasks.iter().filter(|t| t["kind"] == "KERNEL") {
            let f = t["api_fn"].as_str().unwrap();
            assert!(
                [
                    "aclrtLaunchKernel",
                    "rtKernelLaunch",
                    "rtCpuKernelLaunch",
                    "rtKernelLaunchWithHandleV2"
                ]
                .contains(&f),
                "{t}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_export_is_a_dynamic_symbol() {
    let home = sim_home();
    for (lib, fns) in EXPORTS {
        let out = run_ok(
            std::process::Command::new("nm")
                .args(["-D", "--defined-only"])
                .arg(home.join(lib)),
        );
        let text = String::from_utf8_lossy(&out.stdout);
        let syms: BTreeSet<&str> = text
            .lines()
            .filter(|l| l.contains(" T "))
            .filter_map(|l| l.split_whitespace().nth(2))
            .collect();
        for f in *fns {
            assert!(syms.contains(f), "{lib} does not export {f}");
        }
    }
    for (lib, soname) in [
        (
            "ascend-toolkit/latest/lib64/libascendcl.so",
            "libascendcl.so",
        ),
        ("driver/lib64/libascend_hal.so", "libascend_hal.so"),
    ] {
        let out = run_ok(
            std::process::Command::new("readelf")
                .arg("-d")
                .arg(home.join(lib)),
        );
        assert!(
            String::from_utf8_lossy(&out.stdout).contains(&format!("[{soname}]")),
            "{lib} soname"
        );
    }
}

#[test]
fn workloads_reach_every_export_with_consistent_truth() {
    let dir = scratch_dir("all");
    let runs: [&[&str]; 7] = [
        &["npu-sim-app", "train", "--steps", "2"],
        &[
            "npu-sim-app",
            "burst",
            "--threads",
            "3",
            "--launches",
            "300",
        ],
        &["npu-sim-app", "alloc", "--iters", "40"],
        &["npu-sim-app", "faults"],
        &["npu-sim-app", "graph", "--steps", "1"],
        &["npu-sim-app-dlopen", "train", "--steps", "1"],
        &[
            "npu-sim-run",
            "--nproc",
            "2",
            "--",
            "npu-sim-app",
            "collectives",
            "--count",
            "3000",
        ],
    ];
    for args in runs {
        run_ok(sim_command(args[0], &dir).args(&args[1..]));
    }
    let truth = read_truth(&dir);
    assert_eq!(truth.len(), 8);
    let mut called = BTreeSet::new();
    for lines in truth.values() {
        check_consistency(lines);
        for a in of_type(lines, "api") {
            called.insert((
                a["lib"].as_str().unwrap().to_string(),
                a["fn"].as_str().unwrap().to_string(),
            ));
        }
    }
    for (lib, fns) in EXPORTS {
        let soname = lib.rsplit('/').next().unwrap();
        for f in *fns {
            assert!(
                called.contains(&(soname.to_string(), f.to_string())),
                "no workload calls {soname}:{f}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn api_lines_record_arguments_and_out_pointers() {
    let dir = scratch_dir("args");
    run_ok(sim_command("npu-sim-app", &dir).args(["train", "--steps", "1", "--bytes", "1000"]));
    let truth = read_truth(&dir);
    let lines = truth.values().next().unwrap();
    let acl = lines
        .iter()
        .find(|l| l["fn"] == "aclrtMalloc" && l["args"]["size"] == 1000)
        .expect("aclrtMalloc");
    let rt = lines
        .iter()
        .find(|l| l["fn"] == "rtMalloc" && l["args"]["out_ptr"] == acl["args"]["out_ptr"])
        .expect("nested rtMalloc");
    // ACL pads: round up to 32, plus 32.
    assert_eq!(rt["args"]["size"], 1056);
    assert_eq!(rt["args"]["moduleId"], 33);
    assert_ne!(u(&acl["args"], "out_ptr"), 0);
    let launch = lines
        .iter()
        .find(|l| l["fn"] == "rtKernelLaunch")
        .expect("rtKernelLaunch");
    assert_eq!(launch["args"]["kernel_name"], "softmax_fwd");
    // rtFunctionRegister names the kernel by kernelInfoExt (the device function name), which
    // the app makes differ from stubName.
    let reg = lines
        .iter()
        .find(|l| l["fn"] == "rtFunctionRegister" && l["args"]["kernel_name"] == "softmax_fwd")
        .expect("rtFunctionRegister");
    assert_eq!(reg["args"]["stubName"], "softmax_fwd_host_stub");
    // rtRegisterAllKernel registers every kernel symbol of the ELF, keyed by its trailing
    // digits: tiling key 1002 launches MatMulV2_1002.
    let all = lines
        .iter()
        .find(|l| l["fn"] == "rtRegisterAllKernel")
        .expect("rtRegisterAllKernel");
    assert_eq!(all["args"]["kernel_count"], 3);
    assert!(
        of_type(lines, "task")
            .iter()
            .any(|t| t["name"] == "MatMulV2_1002" && t["api_fn"] == "rtKernelLaunchWithHandleV2"),
        "no MatMulV2_1002 task"
    );
    let copy = lines
        .iter()
        .find(|l| l["fn"] == "aclrtMemcpyAsync")
        .expect("aclrtMemcpyAsync");
    for k in ["dst", "destMax", "src", "count", "kind", "stream"] {
        assert!(
            copy["args"][k].is_u64(),
            "aclrtMemcpyAsync lacks {k}: {copy}"
        );
    }
    let range = lines
        .iter()
        .find(|l| l["fn"] == "mstxRangeStartA")
        .expect("mstxRangeStartA");
    assert_eq!(range["args"]["message"], "step 0");
    assert!(u(range, "ret") > 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// (device, id) -> [(pid, from_ns, to_ns)]: who held a driver id when.
type Held = std::collections::BTreeMap<(u64, u64), Vec<(u64, u64, u64)>>;

/// Intervals during which each process held a driver id of one kind, from the alloc and free
/// calls in its truth.
fn held_ids(
    truth: &std::collections::BTreeMap<u64, Vec<serde_json::Value>>,
    alloc: &str,
    free: &str,
    ty: u64,
    out_key: &str,
    in_key: &str,
) -> Held {
    let mut held = Held::default();
    for (pid, lines) in truth {
        let end = lines
            .iter()
            .filter_map(|l| l["exit_ns"].as_u64())
            .max()
            .unwrap_or(u64::MAX);
        for a in lines
            .iter()
            .filter(|l| l["fn"] == alloc && l["ret"] == 0 && l["args"]["type"] == ty)
        {
            let (dev, id) = (u(&a["args"], "devId"), u(&a["args"], out_key));
            let until = lines
                .iter()
                .filter(|f| {
                    f["fn"] == free
                        && f["args"]["type"] == ty
                        && u(&f["args"], "devId") == dev
                        && u(&f["args"], in_key) == id
                        && u(f, "enter_ns") >= u(a, "exit_ns")
                })
                .map(|f| u(f, "enter_ns"))
                .min()
                .unwrap_or(end);
            held.entry((dev, id))
                .or_default()
                .push((*pid, u(a, "enter_ns"), until));
        }
    }
    held
}

#[test]
fn stream_and_sq_ids_are_the_drivers_and_device_wide() {
    let dir = scratch_dir("ids");
    // Two processes on device 0 of one simulated host at the same time.
    let mut train = sim_command("npu-sim-app", &dir)
        .args(["train", "--steps", "4", "--step-sleep-ms", "20"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("npu-sim-app");
    run_ok(sim_command("npu-sim-app", &dir).args(["burst", "--threads", "3", "--launches", "300"]));
    assert!(train.wait().expect("train").success());
    let truth = read_truth(&dir);
    assert_eq!(truth.len(), 2);
    for (what, alloc, free, ty, out_key, in_key) in [
        (
            "stream",
            "halResourceIdAlloc",
            "halResourceIdFree",
            0,
            "resourceId",
            "resourceId",
        ),
        ("SQ", "halSqCqAllocate", "halSqCqFree", 0, "sqId", "sqId"),
        (
            "logic CQ",
            "halSqCqAllocate",
            "halSqCqFree",
            2,
            "cqId",
            "cqId",
        ),
    ] {
        let held = held_ids(&truth, alloc, free, ty, out_key, in_key);
        assert!(!held.is_empty(), "no {what} ids");
        for ((dev, id), spans) in &held {
            for (i, a) in spans.iter().enumerate() {
                for b in &spans[i + 1..] {
                    let overlap = a.1 < b.2 && b.1 < a.2;
                    assert!(
                        a.0 == b.0 || !overlap,
                        "{what} {id} of device {dev} held by {a:?} and {b:?} at once"
                    );
                }
            }
        }
    }
    for lines in truth.values() {
        check_consistency(lines);
        for t in of_type(lines, "task") {
            assert_ne!(u(t, "sq"), u(t, "stream"), "SQ ids are not stream ids: {t}");
            // Every task's SQ was allocated for its stream.
            assert!(
                lines.iter().any(|a| a["fn"] == "halSqCqAllocate"
                    && a["args"]["type"] == 0
                    && a["args"]["stream_id"] == t["stream"]
                    && a["args"]["sqId"] == t["sq"]),
                "{t}"
            );
        }
    }
    npu_sim_app::prof::remove_host(&test_host());
    let _ = std::fs::remove_dir_all(&dir);
}
