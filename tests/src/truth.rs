//! Comparing the `api` table with the simulator's ground truth, call by call.
use serde_json::Value;
use tracer_catalog::{self as catalog, Column, ProbeDef};

use crate::{Row, group, int};

/// How far the probe's timestamps may be from the simulator's own (taken inside the
/// function). The probe fires just before entry and just after return; its cost is
/// ~10 µs per hit on these VMs. The median says the probe times are the call's; the
/// maximum only catches a row paired with the wrong call, so it allows any preemption a
/// loaded machine can impose between the probe and the function body (tens of ms seen
/// while other builds ran). Speed is measured by `cargo xtask bench`, not here.
const MEDIAN_SKEW_LIMIT_NS: u64 = 200_000;
const MAX_SKEW_LIMIT_NS: u64 = 2_000_000_000;

/// The table a truth task of `kind` belongs in (`None`: a task the tracer has no table for).
pub fn task_table(kind: &str) -> Option<&'static str> {
    match kind {
        "KERNEL" => Some("kernel"),
        "MEMCPY" => Some("memcpy"),
        "MEMSET" => Some("memset"),
        "HCCL" => Some("hccl"),
        "EVENT" | "FLIP" | "MODEL" => Some("sync"),
        _ => None,
    }
}

/// Tables of device tasks.
pub const TASK_TABLES: [&str; 5] = ["kernel", "memcpy", "memset", "hccl", "sync"];

/// What a comparison measured.
#[derive(Debug, Default)]
pub struct Comparison {
    pub calls: usize,
    pub median_enter_skew_ns: u64,
    pub max_enter_skew_ns: u64,
    pub median_exit_skew_ns: u64,
    pub max_exit_skew_ns: u64,
}

/// Asserts that `rows` hold every call of `truth` exactly once, with the right function,
/// pid, tid, depth, parent, arguments, out-parameters, kernel name and return value, and
/// timestamps that bracket the simulator's.
pub fn assert_api_matches(rows: &[Row], truth: &[Value]) -> Comparison {
    let rows_by_thread = group(rows.iter(), |r| (u(&r["pid"]), u(&r["tid"])));
    let truth_by_thread = group(truth.iter(), |t| (u(&t["pid"]), u(&t["tid"])));
    assert_eq!(
        rows_by_thread.keys().collect::<Vec<_>>(),
        truth_by_thread.keys().collect::<Vec<_>>(),
        "traced (pid, tid) set differs from the truth"
    );
    let names: std::collections::HashMap<u64, &str> = rows
        .iter()
        .map(|r| (u(&r["correlation_id"]), r["name"].as_str().unwrap_or("")))
        .collect();
    let (mut enter_skews, mut exit_skews) = (Vec::new(), Vec::new());
    for (thread, mut calls) in truth_by_thread {
        let mut traced = rows_by_thread[&thread].clone();
        calls.sort_by_key(|t| (u(&t["enter_ns"]), u(&t["depth"])));
        traced.sort_by_key(|r| (u(&r["start_ns"]), u(&r["depth"])));
        assert_eq!(
            traced.len(),
            calls.len(),
            "thread {thread:?}: {} rows for {} calls\n{}",
            traced.len(),
            calls.len(),
            count_diff(&traced, &calls)
        );
        let mut enclosing: Vec<&Value> = Vec::new();
        for (row, call) in traced.iter().zip(&calls) {
            while enclosing
                .last()
                .is_some_and(|outer| u(&outer["exit_ns"]) < u(&call["enter_ns"]))
            {
                enclosing.pop();
            }
            check_call(row, call, enclosing.last().copied(), &names);
            let (start, end) = (u(&row["start_ns"]), u(&row["end_ns"]));
            let (enter, exit) = (u(&call["enter_ns"]), u(&call["exit_ns"]));
            assert!(
                start <= enter && exit <= end,
                "probe times [{start}, {end}] do not bracket the call [{enter}, {exit}]: {row:?}"
            );
            enter_skews.push(enter - start);
            exit_skews.push(end - exit);
            enclosing.push(call);
        }
    }
    let comparison = summarize(enter_skews, exit_skews);
    assert!(
        comparison.median_enter_skew_ns < MEDIAN_SKEW_LIMIT_NS
            && comparison.median_exit_skew_ns < MEDIAN_SKEW_LIMIT_NS
            && comparison.max_enter_skew_ns < MAX_SKEW_LIMIT_NS
            && comparison.max_exit_skew_ns < MAX_SKEW_LIMIT_NS,
        "probe timestamps too far from the truth: {comparison:?}"
    );
    comparison
}

fn check_call(
    row: &Row,
    call: &Value,
    outer: Option<&Value>,
    names: &std::collections::HashMap<u64, &str>,
) {
    let name = call["fn"].as_str().unwrap_or_default();
    let ctx = format!("{name} (truth {call})\nrow {row:?}");
    assert_eq!(row["name"], call["fn"], "function: {ctx}");
    assert_eq!(row["depth"], call["depth"], "depth: {ctx}");
    assert!(
        u(&row["start_ns"]) <= u(&call["enter_ns"]) && u(&call["exit_ns"]) <= u(&row["end_ns"]),
        "probe times must bracket the function's own: {ctx}"
    );
    assert_eq!(row["incomplete"], false, "{ctx}");
    let lib = call["lib"].as_str().unwrap_or_default();
    let def = catalog::Catalog::builtin()
        .resolve(lib, name)
        .unwrap_or_else(|| panic!("truth function {name} of {lib} in the catalog"));
    if !row["return_value"].is_null() {
        assert_eq!(
            int(&row["return_value"]),
            int(&call["ret"]),
            "return value: {ctx}"
        );
    }
    match (outer, row["parent_correlation_id"].as_u64()) {
        (None, None) => {}
        (Some(outer), Some(parent)) => {
            assert_eq!(
                Some(&outer["fn"].as_str().unwrap_or_default()),
                names.get(&parent),
                "parent: {ctx}"
            )
        }
        (outer, parent) => panic!("parent {parent:?} but truth encloses in {outer:?}: {ctx}"),
    }
    check_args(&def, row, &call["args"], &ctx);
}

fn check_args(def: &ProbeDef, row: &Row, args: &Value, ctx: &str) {
    for arg in def.args {
        if let Some(expected) = args.get(arg.name) {
            assert_eq!(
                column(row, arg.column),
                expected_value(arg.column, expected),
                "argument {}: {ctx}",
                arg.name
            );
        }
    }
    if let Some(out) = def.out {
        let key = [
            "out_ptr",
            "out_stream",
            "out_handle",
            "out_event",
            "out_comm",
            "out_task_id",
            "out_value",
        ]
        .into_iter()
        .find(|k| args.get(k).is_some());
        if let (Some(key), 0) = (key, int(&row["return_value"]).unwrap_or(0)) {
            assert_eq!(
                column(row, out.column),
                expected_value(out.column, &args[key]),
                "out {key}: {ctx}"
            );
        }
    }
    if let Some(kernel) = args.get("kernel_name").and_then(Value::as_str) {
        assert_eq!(
            row["kernel_name"].as_str(),
            Some(kernel),
            "kernel name: {ctx}"
        );
    }
    if let Some(message) = args.get("message").and_then(Value::as_str) {
        assert_eq!(row["message"].as_str(), Some(message), "message: {ctx}");
    }
}

/// The row's value of `column`, as JSON.
fn column(row: &Row, column: Column) -> Value {
    let name = match column {
        Column::DeviceId => "device_id",
        Column::Stream => "stream",
        Column::Bytes => "bytes",
        Column::Count => "count",
        Column::AclMemcpyKind | Column::RtMemcpyKind => "memcpy_kind",
        Column::Address => "address",
        Column::SrcAddress => "src_address",
        Column::Value => "value",
        Column::BlockDim => "block_dim",
        Column::Handle => "handle",
        Column::DataType => "data_type",
        Column::ReduceOp => "reduce_op",
        Column::Rank => "rank",
        Column::RangeId => "range_id",
    };
    match &row[name] {
        Value::Number(_) => int(&row[name]).map_or(Value::Null, |v| Value::String(v.to_string())),
        other => other.clone(),
    }
}

/// What the column should hold for truth argument `v`.
fn expected_value(column: Column, v: &Value) -> Value {
    let n = int(v).unwrap_or_else(|| panic!("argument {v} is not an integer"));
    let text = |s: &str| Value::String(s.to_string());
    match column {
        Column::AclMemcpyKind => text(catalog::acl_memcpy_kind(n as u32).as_str()),
        Column::RtMemcpyKind => text(catalog::rt_memcpy_kind(n as u32).as_str()),
        Column::DataType => text(catalog::hccl_data_type(n as u32).as_str()),
        Column::ReduceOp => text(catalog::hccl_reduce_op(n as u32).as_str()),
        // Columns are typed narrower than the truth's JSON numbers; compare as the C type.
        Column::DeviceId => text(&(n as i32).to_string()),
        Column::BlockDim | Column::Rank => text(&(n as u32).to_string()),
        Column::Value => text(&(n as i64).to_string()),
        _ => text(&(n as u64).to_string()),
    }
}

fn count_diff(rows: &[&Row], calls: &[&Value]) -> String {
    let mut counts: std::collections::BTreeMap<String, (i64, i64)> = Default::default();
    for r in rows {
        counts
            .entry(r["name"].as_str().unwrap_or("?").into())
            .or_default()
            .0 += 1;
    }
    for c in calls {
        counts
            .entry(c["fn"].as_str().unwrap_or("?").into())
            .or_default()
            .1 += 1;
    }
    counts
        .into_iter()
        .filter(|(_, (a, b))| a != b)
        .map(|(n, (a, b))| format!("  {n}: {a} rows, {b} calls\n"))
        .collect()
}

fn summarize(mut enter: Vec<u64>, mut exit: Vec<u64>) -> Comparison {
    enter.sort_unstable();
    exit.sort_unstable();
    let median = |v: &[u64]| v.get(v.len() / 2).copied().unwrap_or(0);
    Comparison {
        calls: enter.len(),
        median_enter_skew_ns: median(&enter),
        max_enter_skew_ns: enter.last().copied().unwrap_or(0),
        median_exit_skew_ns: median(&exit),
        max_exit_skew_ns: exit.last().copied().unwrap_or(0),
    }
}

fn u(v: &Value) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("expected an unsigned integer, got {v}"))
}
