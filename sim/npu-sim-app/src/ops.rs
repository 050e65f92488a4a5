//! The operator layer: the operator libraries' exports, and the ground truth's `op` lines
//! checked against its `api` and `task` lines (see "Operators" in docs/simulator.md).
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

use crate::{of_type, run_ok, u};

/// The libraries exporting aclnn operators (generated from their operator tables).
pub const OP_LIBS: [&str; 3] = ["libopapi.so", "libopapi_math.so", "libcust_opapi.so"];

/// The hand-written exports of the operator layer, by installed library: libnnopbase, and what
/// AscendCL, the runtime and libacl_op_compiler gained for it.
pub const OP_EXPORTS: &[(&str, &[&str])] = &[
    (
        "ascend-toolkit/latest/lib64/libnnopbase.so",
        &[
            "aclCreateTensor",
            "aclCreateScalar",
            "aclCreateIntArray",
            "aclCreateFloatArray",
            "aclCreateBoolArray",
            "aclCreateTensorList",
            "aclCreateScalarList",
            "aclDestroyTensor",
            "aclDestroyScalar",
            "aclDestroyIntArray",
            "aclDestroyFloatArray",
            "aclDestroyBoolArray",
            "aclDestroyTensorList",
            "aclDestroyScalarList",
            "aclGetViewOffset",
            "aclGetFormat",
            "aclGetDataType",
            "aclGetRawTensorAddr",
            "aclSetRawTensorAddr",
            "aclGetIntArraySize",
            "aclGetFloatArraySize",
            "aclGetBoolArraySize",
            "aclGetTensorListSize",
            "aclGetScalarListSize",
            "aclSetAclOpExecutorRepeatable",
            "aclDestroyAclOpExecutor",
            "aclSetInputTensorAddr",
            "aclSetOutputTensorAddr",
            "aclSetTensorAddr",
            "aclnnInit",
            "aclnnFinalize",
            "PTAGetExecCache",
            "PTAFindExecCache",
            "InitPTACacheThreadLocal",
            "UnInitPTACacheThreadLocal",
            "SetPTAHashKey",
            "SetPTACacheHashKey",
            "CanUsePTACache",
            "AddTensorAddrToCachedList",
            "InitHugeMemThreadLocal",
            "UnInitHugeMemThreadLocal",
            "ReleaseHugeMem",
        ],
    ),
    (
        "ascend-toolkit/latest/lib64/libascendcl.so",
        &[
            "aclrtBinaryGetFunctionByEntry",
            "aclrtLaunchKernelWithHostArgs",
            "aclCreateTensorDesc",
            "aclDestroyTensorDesc",
            "aclCreateDataBuffer",
            "aclDestroyDataBuffer",
            "aclGetDataBufferAddr",
            "aclGetDataBufferSizeV2",
            "aclopCreateAttr",
            "aclopDestroyAttr",
            "aclopSetAttrBool",
            "aclopSetAttrInt",
            "aclopSetAttrFloat",
            "aclopSetAttrString",
        ],
    ),
    (
        "ascend-toolkit/latest/lib64/libruntime.so",
        &[
            "rtsFuncGetByEntry",
            "rtsLaunchKernelWithHostArgs",
            "rtRegisterAllKernel",
            "rtAicpuKernelLaunchExWithArgs",
        ],
    ),
    (
        "ascend-toolkit/latest/lib64/libacl_op_compiler.so",
        &[
            "aclopCompileAndExecuteV2",
            "aclSetCompileopt",
            "aclGetCompileoptSize",
            "aclGetCompileopt",
        ],
    ),
];

/// The defined function symbols of a shared object's dynamic symbol table (`nm -D`).
pub fn dynamic_symbols(path: &Path) -> BTreeSet<String> {
    let out = run_ok(
        std::process::Command::new("nm")
            .args(["-D", "--defined-only"])
            .arg(path),
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(" T "))
        .filter_map(|l| l.split_whitespace().nth(2))
        .map(str::to_string)
        .collect()
}

/// The operators a library exports both phases of (`Add` for aclnnAdd + aclnnAddGetWorkspaceSize).
pub fn aclnn_operators(path: &Path) -> BTreeSet<String> {
    let syms = dynamic_symbols(path);
    syms.iter()
        .filter_map(|s| s.strip_prefix("aclnn")?.strip_suffix("GetWorkspaceSize"))
        .filter(|op| syms.contains(&format!("aclnn{op}")))
        .map(str::to_string)
        .collect()
}

/// What [`check_ops`] counted.
#[derive(Debug, Default)]
pub struct OpCounts {
    /// `op` lines of aclnn operators, and of those cache hits and runs of repeatable executors.
    pub aclnn: usize,
    pub cache_hits: usize,
    pub repeatable_runs: usize,
    /// `op` lines of aclopCompileAndExecuteV2 calls.
    pub aclop: usize,
    /// First phases that succeeded, and how many of them some `op` line names.
    pub first_phases: usize,
    pub first_phases_run: usize,
    /// Device tasks the operators launched.
    pub kernels: usize,
}

fn key(p: &Value) -> (u64, String, u64) {
    (
        u(p, "tid"),
        p["fn"].as_str().unwrap_or_default().to_string(),
        u(p, "enter_ns"),
    )
}

fn is_phase2(a: &Value) -> bool {
    let f = a["fn"].as_str().unwrap_or_default();
    (OP_LIBS.contains(&a["lib"].as_str().unwrap_or_default())
        && f.starts_with("aclnn")
        && !f.ends_with("GetWorkspaceSize"))
        || f == "aclopCompileAndExecuteV2"
}

/// Checks one process's `op` lines against its `api` and `task` lines:
/// - every successful outermost second phase (`aclnnXxx` of an op library) and
///   `aclopCompileAndExecuteV2` has exactly one `op` line, and every `op` line names such a call
///   (same thread, function, entry time, library and return value);
/// - an aclnn `op` line's operator is its function without `aclnn`; unless it is a cache hit its
///   first phase is a successful `aclnnXxxGetWorkspaceSize` that entered earlier and returned its
///   executor, named by no other `op` line (unless the executor is repeatable); a cache hit has no
///   first phase and names an earlier `op` line of the same operator that had one;
/// - a successful call launched 1 to 3 kernels (aclop: 1), each exactly one device task with its
///   device, stream, task id and name, submitted by that call; every task submitted by such a
///   call is in its `op` line, except the flip task the runtime sends after a kernel that took
///   task id 65534 (its own bookkeeping, not a launch).
pub fn check_ops(lines: &[Value]) -> OpCounts {
    let mut c = OpCounts::default();
    let apis: BTreeMap<(u64, String, u64), &Value> = of_type(lines, "api")
        .into_iter()
        .filter(|a| u(a, "depth") == 0)
        .map(|a| (key(a), a))
        .collect();
    let tasks: BTreeMap<(u64, u64, u64, u64), &Value> = of_type(lines, "task")
        .into_iter()
        .map(|t| {
            (
                (
                    u(t, "device"),
                    u(t, "stream"),
                    u(t, "task"),
                    u(t, "api_enter_ns"),
                ),
                t,
            )
        })
        .collect();
    let ops = of_type(lines, "op");
    let mut by_phase2: BTreeMap<(u64, String, u64), usize> = BTreeMap::new();
    let mut by_phase1: BTreeMap<(u64, String, u64), usize> = BTreeMap::new();
    let mut first_runs: BTreeMap<u64, &Value> = BTreeMap::new();
    let mut launched = BTreeSet::new();
    for op in &ops {
        let p2 = key(&op["phase2"]);
        *by_phase2.entry(p2.clone()).or_default() += 1;
        let call = apis
            .get(&p2)
            .unwrap_or_else(|| panic!("no api line for the second phase of {op}"));
        assert_eq!(call["lib"], op["lib"], "{op}");
        assert_eq!(call["fn"], op["api"], "{op}");
        assert_eq!(call["ret"], op["ret"], "{op}");
        let ok = op["ret"] == 0;
        match op["kind"].as_str() {
            Some("aclnn") => {
                c.aclnn += 1;
                assert_eq!(
                    op["api"],
                    format!("aclnn{}", op["op"].as_str().unwrap_or_default())
                );
                if op["cache_hit"] == true {
                    c.cache_hits += 1;
                    assert!(
                        op["phase1"].is_null(),
                        "a cache hit with a first phase: {op}"
                    );
                    let origin = first_runs
                        .get(&u(op, "origin_executor_id"))
                        .unwrap_or_else(|| panic!("cache hit of no earlier first run: {op}"));
                    assert_eq!(origin["op"], op["op"], "{op}");
                    assert!(u(&origin["phase2"], "enter_ns") < u(&op["phase2"], "enter_ns"));
                } else {
                    let p1 = key(&op["phase1"]);
                    let ws = apis
                        .get(&p1)
                        .unwrap_or_else(|| panic!("no api line for the first phase of {op}"));
                    assert_eq!(
                        ws["fn"],
                        format!("{}GetWorkspaceSize", op["api"].as_str().unwrap_or_default())
                    );
                    assert_eq!(ws["ret"], 0, "{op}");
                    assert_eq!(ws["args"]["out_executor"], op["executor"], "{op}");
                    assert!(p1.2 < p2.2, "second phase before the first: {op}");
                    if op["repeatable"] == true {
                        c.repeatable_runs += 1;
                    }
                    let n = by_phase1.entry(p1).or_default();
                    *n += 1;
                    assert!(
                        *n == 1 || op["repeatable"] == true,
                        "first phase run twice: {op}"
                    );
                    first_runs.entry(u(op, "executor_id")).or_insert(op);
                }
                let n = op["kernels"].as_array().map_or(0, Vec::len);
                assert!(!ok || (1..=3).contains(&n), "{n} kernels: {op}");
            }
            Some("aclop") => {
                c.aclop += 1;
                assert!(op["phase1"].is_null());
                assert!(
                    !ok || op["kernels"].as_array().map_or(0, Vec::len) == 1,
                    "{op}"
                );
            }
            _ => panic!("unknown op kind: {op}"),
        }
        for k in op["kernels"].as_array().into_iter().flatten() {
            let tk = (u(k, "device"), u(k, "stream"), u(k, "task"), p2.2);
            let t = tasks
                .get(&tk)
                .unwrap_or_else(|| panic!("no task for kernel {k} of {op}"));
            assert_eq!(t["kind"], "KERNEL");
            assert_eq!(t["name"], k["name"], "{op}");
            assert_eq!(u(t, "tid"), p2.0, "{op}");
            assert_eq!(t["api_fn"].as_str(), Some(p2.1.as_str()), "{op}");
            assert!(launched.insert(tk), "task in two op lines: {t}");
            c.kernels += 1;
        }
    }
    for (k, a) in &apis {
        if is_phase2(a) && a["ret"] == 0 {
            assert_eq!(by_phase2.get(k), Some(&1), "one op line for {a}");
        }
        if a["fn"]
            .as_str()
            .is_some_and(|f| f.ends_with("GetWorkspaceSize"))
            && a["ret"] == 0
        {
            c.first_phases += 1;
            if by_phase1.contains_key(k) {
                c.first_phases_run += 1;
            }
        }
    }
    for (k, t) in &tasks {
        let call = (
            u(t, "tid"),
            t["api_fn"].as_str().unwrap_or_default().to_string(),
            k.3,
        );
        if t["kind"] != "FLIP" && apis.get(&call).is_some_and(|a| is_phase2(a)) {
            assert!(
                launched.contains(k),
                "task of an operator in no op line: {t}"
            );
        }
    }
    c
}
