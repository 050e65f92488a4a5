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
        // Kernels of every engine, named as registered.
        for (name, sqe_type) in [
            ("matmul_fwd", 0),
            ("softmax_fwd", 0),
            ("adam_update", 0),
            ("vadd_aiv", 2),
            ("TopKV2", 1),
        ] {
            assert!(
                tasks
                    .iter()
                    .any(|t| t["name"] == name && t["sqe_type"] == sqe_type),
                "no {name} task"
            );
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
    let runs: [&[&str]; 6] = [
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
    assert_eq!(truth.len(), 7);
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
