//! The operator layer: the eager workload's truth records every operator call once, with its
//! phases on the right threads and the kernels it launched on the device; the op libraries
//! export both phases of their operators.
use std::collections::BTreeSet;

use npu_sim_app::ops::{OP_EXPORTS, OP_LIBS, aclnn_operators, check_ops, dynamic_symbols};
use npu_sim_app::*;
use serde_json::Value;

/// `eager done: N operators (H aclnn cache hits, M first phases, A aclop) ... (R ops/s)`.
fn summary(stdout: &str) -> (u64, u64, u64, u64, String) {
    let line = stdout
        .lines()
        .find(|l| l.contains("eager done:"))
        .unwrap_or_else(|| panic!("no summary in {stdout}"));
    let nums: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|s| s.parse().ok())
        .collect();
    (nums[0], nums[1], nums[2], nums[3], line.to_string())
}

#[test]
fn eager_truth_records_every_operator_once_with_its_phases_and_kernels() {
    let dir = scratch_dir("eager");
    let out = run_ok(sim_command("npu-sim-app", &dir).args([
        "eager",
        "--ops",
        "1000",
        "--threads",
        "2",
        "--aclop-every",
        "50",
        "--sync-every",
        "300",
    ]));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let (total, hits, first, aclop, line) = summary(&stdout);
    println!("traced by the ground truth: {line}");
    assert_eq!(total, 2000);
    let truth = read_truth(&dir);
    let lines = truth.values().next().expect("a truth file");
    check_consistency(lines);
    let c = check_ops(lines);
    // The workload's counts: two repeatable runs of one executor on the main thread first.
    assert_eq!(c.aclnn as u64, total - aclop + 2);
    assert_eq!(c.aclop as u64, aclop);
    assert_eq!(c.cache_hits as u64, hits);
    assert_eq!(c.repeatable_runs, 2);
    assert_eq!(c.first_phases as u64, first + 1);
    assert_eq!(
        c.first_phases_run, c.first_phases,
        "a first phase never ran"
    );
    assert!(hits > 0 && first > 0, "{line}");

    // torch_npu's threads: first phases on the producers, second phases on their queue threads.
    let ops = of_type(lines, "op");
    let queued: Vec<&&Value> = ops
        .iter()
        .filter(|o| o["kind"] == "aclop" || o["repeatable"] != true)
        .collect();
    let phase2_tids: BTreeSet<u64> = queued.iter().map(|o| u(&o["phase2"], "tid")).collect();
    let phase1_tids: BTreeSet<u64> = queued
        .iter()
        .filter(|o| !o["phase1"].is_null())
        .map(|o| u(&o["phase1"], "tid"))
        .collect();
    assert_eq!(phase2_tids.len(), 2, "one queue thread per producer");
    assert_eq!(phase1_tids.len(), 2, "two producers");
    assert!(phase1_tids.is_disjoint(&phase2_tids));
    // Each queue thread runs one producer's operators, on that producer's stream.
    for tid in &phase2_tids {
        let streams: BTreeSet<u64> = queued
            .iter()
            .filter(|o| u(&o["phase2"], "tid") == *tid)
            .map(|o| u(o, "stream"))
            .collect();
        assert_eq!(streams.len(), 1);
    }

    // Many distinct operators, from every op library the workload uses, on every engine.
    let names: BTreeSet<&str> = ops.iter().filter_map(|o| o["op"].as_str()).collect();
    assert!(names.len() >= 100, "{} distinct operators", names.len());
    for lib in ["libopapi.so", "libcust_opapi.so", "libacl_op_compiler.so"] {
        assert!(ops.iter().any(|o| o["lib"] == lib), "no operator of {lib}");
    }
    for (op, kernel) in [
        ("Add", "Add_"),
        ("Matmul", "MatMulV3_"),
        ("Softmax", "SoftmaxV2_"),
        ("LayerNorm", "LayerNormV4_"),
        ("Cast", "Cast_"),
        ("Mul", "Mul_"),
    ] {
        let o = ops
            .iter()
            .find(|o| o["op"] == op)
            .unwrap_or_else(|| panic!("no {op} operator"));
        let k = &o["kernels"]
            .as_array()
            .and_then(|k| k.iter().find(|k| k["op_type"] != "Cast" || op == "Cast"))
            .unwrap_or_else(|| panic!("no kernel of {o}"))["name"];
        let name = k.as_str().unwrap_or_default();
        // <OpType>_<32 hex digits>_<tiling key>
        let rest = name
            .strip_prefix(kernel)
            .unwrap_or_else(|| panic!("{op}: {name}"));
        let (hash, key) = rest.split_once('_').unwrap_or_else(|| panic!("{name}"));
        assert!(
            hash.len() == 32 && hash.bytes().all(|b| b.is_ascii_hexdigit()),
            "{name}"
        );
        assert!(key.parse::<u64>().is_ok(), "{name}");
    }
    // On 910B (STARS v100) AI Core and AI Vector kernels are both FFTS SQEs (type 0), AI CPU
    // kernels type 1; the engine tells the cores apart.
    let tasks = of_type(lines, "task");
    for (api_fn, sqe_type, engine) in [
        ("aclnnMatmul", 0, "AIC"),
        ("aclnnAdd", 0, "AIV"),
        ("aclnnSearchSorted", 1, "AICPU"),
        ("aclopCompileAndExecuteV2", 0, "AIC"),
    ] {
        assert!(
            tasks.iter().any(|t| t["api_fn"] == api_fn
                && t["sqe_type"] == sqe_type
                && t["engine"] == engine),
            "no {api_fn} task of SQE type {sqe_type} on {engine}"
        );
    }
    // One, two and three kernels per call (a Cast for mixed inputs, a ViewCopy for a
    // transposed output).
    for n in 1..=3 {
        assert!(
            ops.iter()
                .any(|o| o["kernels"].as_array().map_or(0, Vec::len) == n),
            "no operator with {n} kernels"
        );
    }

    // The launch path: binaries loaded once per op type, functions fetched once per tiling
    // key, every aclnn kernel through aclrtLaunchKernelWithHostArgs -> rtsLaunchKernelWithHostArgs.
    let mut loads = BTreeSet::new();
    for a in of_type(lines, "api")
        .iter()
        .filter(|a| a["fn"] == "aclrtBinaryLoadFromData")
    {
        assert!(
            loads.insert(u(&a["args"], "data")),
            "binary loaded twice: {a}"
        );
    }
    let mut entries = BTreeSet::new();
    for a in of_type(lines, "api")
        .iter()
        .filter(|a| a["fn"] == "aclrtBinaryGetFunctionByEntry")
    {
        let k = (u(&a["args"], "binHandle"), u(&a["args"], "funcEntry"));
        assert!(entries.insert(k), "function fetched twice: {a}");
    }
    let host_args = api_count(lines, "aclrtLaunchKernelWithHostArgs");
    assert_eq!(host_args, api_count(lines, "rtsLaunchKernelWithHostArgs"));
    let aicpu = api_count(lines, "rtAicpuKernelLaunchExWithArgs");
    assert_eq!(host_args + aicpu + aclop as usize, c.kernels);

    // Every hand-written export of the operator layer that the workload needs is reached.
    let called: BTreeSet<&str> = of_type(lines, "api")
        .iter()
        .filter_map(|a| a["fn"].as_str())
        .collect();
    for f in [
        "aclCreateTensor",
        "aclCreateScalar",
        "aclCreateIntArray",
        "aclCreateTensorList",
        "aclDestroyTensor",
        "aclDestroyScalar",
        "aclDestroyIntArray",
        "aclDestroyTensorList",
        "aclSetAclOpExecutorRepeatable",
        "aclDestroyAclOpExecutor",
        "aclnnInit",
        "aclnnFinalize",
        "PTAGetExecCache",
        "InitPTACacheThreadLocal",
        "UnInitPTACacheThreadLocal",
        "SetPTAHashKey",
        "CanUsePTACache",
        "AddTensorAddrToCachedList",
        "InitHugeMemThreadLocal",
        "UnInitHugeMemThreadLocal",
        "ReleaseHugeMem",
        "aclrtBinaryLoadFromData",
        "aclrtBinaryGetFunctionByEntry",
        "aclrtLaunchKernelWithHostArgs",
        "rtsFuncGetByEntry",
        "rtsLaunchKernelWithHostArgs",
        "rtAicpuKernelLaunchExWithArgs",
        "rtRegisterAllKernel",
        "rtKernelLaunchWithHandleV2",
        "aclCreateTensorDesc",
        "aclDestroyTensorDesc",
        "aclCreateDataBuffer",
        "aclDestroyDataBuffer",
        "aclopCreateAttr",
        "aclopSetAttrFloat",
        "aclopDestroyAttr",
        "aclopCompileAndExecuteV2",
    ] {
        assert!(called.contains(f), "eager does not call {f}");
    }
    let _ = std::fs::remove_dir_all(&dir);

    // The same workload without ground truth, for the figure (not asserted: machines differ).
    let out = run_ok(
        sim_command("npu-sim-app", &dir)
            .env_remove("NPU_SIM_TRUTH")
            .args(["eager", "--ops", "20000"]),
    );
    println!(
        "untraced: {}",
        summary(&String::from_utf8_lossy(&out.stdout)).4
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The op lines name their kernels' tasks as the device path numbers them: across the task-id
/// wrap of a 910B stream (where the runtime also sends a flip task inside the operator call),
/// and on 950, where a task's id is the process's task serial number.
#[test]
fn op_lines_follow_the_task_ids_of_both_chips() {
    for (chip, start) in [("910B", "65300"), ("950", "0")] {
        let dir = scratch_dir(&format!("eager-ids-{chip}"));
        run_ok(
            sim_command("npu-sim-app", &dir)
                .env("NPU_SIM_CHIP", chip)
                .env("NPU_SIM_TASK_ID_START", start)
                .args(["eager", "--ops", "400", "--aclop-every", "50"]),
        );
        let truth = read_truth(&dir);
        let lines = truth.values().next().expect("a truth file");
        check_consistency(lines);
        let c = check_ops(lines);
        assert!(c.kernels >= 400, "{c:?}");
        let tasks = of_type(lines, "task");
        let kernel_ids: BTreeSet<u64> = of_type(lines, "op")
            .iter()
            .flat_map(|o| o["kernels"].as_array().into_iter().flatten())
            .map(|k| u(k, "task"))
            .collect();
        let flips = tasks.iter().filter(|t| t["kind"] == "FLIP").count();
        if chip == "910B" {
            assert_eq!(flips, 1, "one wrap, one flip task");
            assert!(kernel_ids.contains(&65534), "a kernel took the last id");
            assert!(
                kernel_ids.iter().any(|&t| t < 100),
                "no kernel after the wrap"
            );
        } else {
            assert_eq!(flips, 0);
            // Serial numbers: unique over the process's streams.
            let ids: BTreeSet<u64> = tasks.iter().map(|t| u(t, "task")).collect();
            assert_eq!(ids.len(), tasks.len());
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn eager_task_queue_v2_runs_both_phases_on_the_queue_thread() {
    let dir = scratch_dir("eager-v2");
    let out = run_ok(sim_command("npu-sim-app", &dir).args([
        "eager",
        "--ops",
        "600",
        "--threads",
        "2",
        "--task-queue",
        "2",
        "--aclop-every",
        "100",
    ]));
    let (total, hits, first, aclop, _) = summary(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(total, 1200);
    let truth = read_truth(&dir);
    let lines = truth.values().next().expect("a truth file");
    check_consistency(lines);
    let c = check_ops(lines);
    assert_eq!(c.aclnn as u64, total - aclop + 2);
    assert_eq!(c.cache_hits as u64, hits);
    assert_eq!(c.first_phases as u64, first + 1);
    assert!(hits > 0);
    // The key is a byte string, looked up on the queue thread.
    assert_eq!(api_count(lines, "PTAGetExecCache"), 0);
    assert!(api_count(lines, "PTAFindExecCache") > 0);
    assert!(api_count(lines, "SetPTACacheHashKey") > 0);
    let queued: Vec<&Value> = of_type(lines, "op")
        .into_iter()
        .filter(|o| o["repeatable"] != true)
        .collect();
    let tids: BTreeSet<u64> = queued.iter().map(|o| u(&o["phase2"], "tid")).collect();
    assert_eq!(tids.len(), 2, "one queue thread per producer");
    for o in queued.iter().filter(|o| !o["phase1"].is_null()) {
        assert_eq!(u(&o["phase1"], "tid"), u(&o["phase2"], "tid"), "{o}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn eager_without_the_cache_runs_every_first_phase() {
    let dir = scratch_dir("eager-nocache");
    let out = run_ok(sim_command("npu-sim-app", &dir).args([
        "eager",
        "--ops",
        "400",
        "--no-cache",
        "--distinct",
        "20",
        "--aclop-every",
        "0",
    ]));
    let (total, hits, first, aclop, _) = summary(&String::from_utf8_lossy(&out.stdout));
    assert_eq!((total, hits, first, aclop), (400, 0, 400, 0));
    let truth = read_truth(&dir);
    let lines = truth.values().next().expect("a truth file");
    check_consistency(lines);
    let c = check_ops(lines);
    assert_eq!(c.cache_hits, 0);
    assert_eq!(c.aclnn, 402);
    assert_eq!(api_count(lines, "PTAGetExecCache"), 0);
    for o in of_type(lines, "op") {
        assert!(!o["phase1"].is_null(), "{o}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn op_libraries_export_both_phases_of_their_operators() {
    let home = sim_home();
    let lib64 = home.join("ascend-toolkit/latest/lib64");
    let opapi = aclnn_operators(&lib64.join("libopapi.so"));
    assert!(opapi.len() >= 300, "libopapi.so: {} operators", opapi.len());
    for op in ["Add", "Mul", "Matmul", "Softmax", "LayerNorm", "Cast"] {
        assert!(opapi.contains(op), "libopapi.so lacks aclnn{op}");
    }
    let math = aclnn_operators(&lib64.join("libopapi_math.so"));
    assert!(!math.is_empty() && math.is_subset(&opapi));
    let cust = aclnn_operators(&lib64.join("libcust_opapi.so"));
    assert!(cust.contains("AddCustom") && cust.is_disjoint(&opapi));
    for lib in OP_LIBS {
        // Nothing but the two phases of operators.
        let syms = dynamic_symbols(&lib64.join(lib));
        let ops = aclnn_operators(&lib64.join(lib));
        assert_eq!(syms.len(), 2 * ops.len(), "{lib}");
    }
    for (lib, fns) in OP_EXPORTS {
        let syms = dynamic_symbols(&home.join(lib));
        for f in *fns {
            assert!(syms.contains(*f), "{lib} does not export {f}");
        }
    }
}
