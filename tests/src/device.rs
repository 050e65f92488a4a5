//! Checking device activity against the simulator's ground truth: every device task appears
//! exactly once, in the right table, joined to the outermost API call that produced it, with
//! the right name, stream, bytes and status, and device times aligned to the host clock. The
//! chip a task ran on (the truth's `clock` lines say) decides its SQE type numbers and what
//! its header names.
use std::collections::HashMap;

use serde_json::Value;

use crate::{
    Recording, Row, int, read_truth,
    truth::{TASK_TABLES, task_table},
};

/// Device times must be as close to the truth as the clock model says it can be (its
/// reported error bound; 1 µs of rounding allowed). How tight that bound gets depends on how
/// precisely the agent could read the device clock, which a loaded machine degrades: the
/// median limit only catches a broken model, and the figures are printed.
const BOUND_SLACK_NS: f64 = 1_000.0;
const MEDIAN_LIMIT_NS: u64 = 10_000;

/// Truth tasks of the traced workload that have a table (all the simulator makes).
pub fn truth_tasks(recording: &Recording) -> Vec<Value> {
    read_truth(&recording.truth)
        .into_values()
        .flatten()
        .filter(|l| l["type"] == "task" && task_table(l["kind"].as_str().unwrap()).is_some())
        .collect()
}

/// Every truth task (event records and waits included) was timed by the device's
/// profiling channel, the way real hardware reports task times: each device the workload
/// used says so in session.json.
pub fn assert_timed_by_channel(recording: &Recording) {
    let session = recording.session();
    let tasks: Vec<Value> = read_truth(&recording.truth)
        .into_values()
        .flatten()
        .filter(|l| l["type"] == "task")
        .collect();
    assert!(!tasks.is_empty());
    for task in &tasks {
        let device = task["device"].as_u64().unwrap() as u32;
        assert_eq!(
            session.device_time_sources.get(&device).map(String::as_str),
            Some("profiling_channel"),
            "device {device}: {:?}",
            session.device_time_sources
        );
    }
    assert_eq!(
        session.activity.tasks_from_channel,
        tasks.len() as u64,
        "every task timed by its begin and end records: {:?}",
        session.activity
    );
}

/// An alignment error and the error bound the clock model claimed for it, in ns.
pub type Aligned = (u64, f64);

/// A row the truth says the trace must have: one per task, except that the tasks of one
/// call of a folded kind (a memset made of copies, a collective made of notifies and
/// transfers) make one row spanning them all.
#[derive(Debug)]
pub struct Expected {
    pub table: &'static str,
    /// The first task (by submission) of the row.
    pub task: Value,
    pub start_cnt: u64,
    pub end_cnt: u64,
    /// Host times of the first begin and the last end.
    pub start_ns: u64,
    pub end_ns: u64,
    /// Largest and summed bytes of the tasks.
    pub max_bytes: u64,
    pub sum_bytes: u64,
    pub tasks: usize,
}

/// Truth kinds whose tasks of one call fold into one row (`TaskKind::FOLDED`).
const FOLDED: [&str; 2] = ["MEMSET", "HCCL"];

/// The rows the truth tasks call for.
pub fn expected_rows(tasks: &[Value]) -> Vec<Expected> {
    let u = |v: &Value| v.as_u64().unwrap_or(0);
    let mut groups: Vec<Vec<&Value>> = Vec::new();
    let mut folded: HashMap<(u64, u64, u64, u64, String), usize> = HashMap::new();
    let mut ordered: Vec<&Value> = tasks.iter().collect();
    ordered.sort_by_key(|t| u(&t["submit_ns"]));
    for task in ordered {
        let kind = task["kind"].as_str().unwrap_or("");
        if FOLDED.contains(&kind) && !task["api_enter_ns"].is_null() {
            let key = (
                u(&task["pid"]),
                u(&task["tid"]),
                u(&task["device"]),
                u(&task["api_enter_ns"]),
                kind.to_owned(),
            );
            let next = groups.len();
            let at = *folded.entry(key).or_insert(next);
            if at == next {
                groups.push(Vec::new());
            }
            groups[at].push(task);
        } else {
            groups.push(vec![task]);
        }
    }
    groups
        .into_iter()
        .map(|group| Expected {
            table: task_table(group[0]["kind"].as_str().unwrap()).unwrap(),
            task: group[0].clone(),
            start_cnt: group.iter().map(|t| u(&t["start_cnt"])).min().unwrap(),
            end_cnt: group.iter().map(|t| u(&t["end_cnt"])).max().unwrap(),
            start_ns: group.iter().map(|t| u(&t["start_ns"])).min().unwrap(),
            end_ns: group.iter().map(|t| u(&t["end_ns"])).max().unwrap(),
            max_bytes: group.iter().map(|t| u(&t["bytes"])).max().unwrap(),
            sum_bytes: group.iter().map(|t| u(&t["bytes"])).sum(),
            tasks: group.len(),
        })
        .collect()
}

/// The chip (`910B` or `950`) each traced process ran on, from its truth `clock` lines.
pub fn chips(recording: &Recording) -> HashMap<u64, String> {
    read_truth(&recording.truth)
        .into_iter()
        .filter_map(|(pid, lines)| {
            let chip = lines
                .iter()
                .find(|l| l["type"] == "clock")
                .and_then(|l| l["chip"].as_str())?;
            Some((pid, chip.to_owned()))
        })
        .collect()
}

/// The sync-table kind of a task of SQE type `sqe_type` on `chip`: STARS v100 numbers on
/// 910B (RT `stars_sqe.hpp`), v2 numbers on 950 (RT `stars_david.hpp`), where events are
/// notify records and waits.
fn sync_kind(chip: &str, sqe_type: Option<u64>) -> Option<&'static str> {
    Some(match (chip, sqe_type?) {
        (_, 3) => "PLACE_HOLDER",
        (_, 20) => "MODEL_EXECUTE",
        ("910B", 4) => "EVENT_RECORD",
        ("910B", 5) => "EVENT_WAIT",
        (_, 6) => "NOTIFY_RECORD",
        (_, 7) => "NOTIFY_WAIT",
        _ => return None,
    })
}

/// The `kernel_type` of a kernel that ran on `engine` (truth `AIC`, `AIV`, `AICPU`): 910B
/// runs AI Core and AI Vector kernels alike as FFTS tasks (SQE type 0), 950 tells them apart.
fn kernel_type(chip: &str, engine: &str) -> &'static str {
    match (chip, engine) {
        (_, "AICPU") => "AI_CPU",
        ("950", "AIV") => "AI_VECTOR",
        _ => "AI_CORE",
    }
}

/// The stream id a row of a truth task has: 950 headers and records name no stream (0).
fn row_stream(chip: &str, task: &Value) -> Value {
    match chip {
        "950" => Value::from(0),
        _ => task["stream"].clone(),
    }
}

/// Checks every row the truth calls for; returns the alignment errors with their bounds.
pub fn check_tasks(recording: &Recording) -> Vec<Aligned> {
    let session = recording.session();
    let api: HashMap<u64, Row> = recording
        .table("api")
        .into_iter()
        .map(|r| (r["correlation_id"].as_u64().unwrap(), r))
        .collect();
    let mut rows: HashMap<&str, Vec<Row>> = HashMap::new();
    for table in TASK_TABLES {
        rows.insert(table, recording.table(table));
    }
    let total_rows: usize = rows.values().map(Vec::len).sum();
    let chips = chips(recording);
    let expected = expected_rows(&truth_tasks(recording));
    assert_eq!(
        total_rows,
        expected.len(),
        "one row per device task (or folded call)"
    );
    // Rows by (table, pid, device, device start count): a long run has thousands.
    let key = |table: &str, pid: &Value, device: &Value, start: &Value| {
        format!("{table}/{pid}/{device}/{start}")
    };
    let mut by_key: HashMap<String, Vec<&Row>> = HashMap::new();
    for (table, table_rows) in &rows {
        for r in table_rows {
            let k = key(table, &r["pid"], &r["device_id"], &r["device_start_cnt"]);
            by_key.entry(k).or_default().push(r);
        }
    }
    let mut errors = Vec::new();
    for want in &expected {
        let (table, task) = (want.table, &want.task);
        let wanted = key(
            table,
            &task["pid"],
            &task["device"],
            &Value::from(want.start_cnt),
        );
        let matches: Vec<&Row> = by_key.get(&wanted).cloned().unwrap_or_default();
        assert_eq!(matches.len(), 1, "{want:?} in {table}: {matches:?}");
        let row = matches[0];
        let ctx = format!("truth {want:?}\nrow {row:?}");
        let chip = chips
            .get(&task["pid"].as_u64().unwrap())
            .unwrap_or_else(|| panic!("no truth clock line of the process: {ctx}"))
            .as_str();
        assert_eq!(row["device_end_cnt"], want.end_cnt, "{ctx}");
        if want.tasks == 1 {
            assert_eq!(
                (&row["stream_id"], &row["task_id"]),
                (&row_stream(chip, task), &task["task"]),
                "{ctx}"
            );
        }
        assert_eq!(row["status"], task["status"], "status: {ctx}");
        assert_eq!(row["tid"], task["tid"], "submitting thread: {ctx}");
        let call = api
            .get(&row["correlation_id"].as_u64().unwrap())
            .unwrap_or_else(|| panic!("no api row for the correlation id: {ctx}"));
        assert_eq!(call["name"], task["api_fn"], "producing call: {ctx}");
        let (call_start, call_end) = (
            call["start_ns"].as_u64().unwrap(),
            call["end_ns"].as_u64().unwrap(),
        );
        let enter = task["api_enter_ns"].as_u64().unwrap();
        assert!(
            call_start <= enter && enter <= call_end,
            "the call the truth names: {ctx}"
        );
        assert!(
            call["parent_correlation_id"].is_null(),
            "the outermost call: {ctx}"
        );
        // A model's tasks were loaded by one call and run by another: the run's call has
        // no kernel names or sizes to give them (named only when their loading is, which
        // the tracer does not follow yet).
        let from_model = task["model_id"].is_u64() && table != "sync";
        match table {
            _ if from_model => {}
            "kernel" => {
                assert_eq!(row["name"], task["name"], "kernel name: {ctx}");
                let engine = task["engine"].as_str().unwrap_or("");
                assert_eq!(row["kernel_type"], kernel_type(chip, engine), "{ctx}");
            }
            "memcpy" => assert_eq!(
                int(&row["bytes"]),
                Some(want.sum_bytes.into()),
                "bytes: {ctx}"
            ),
            "memset" => assert_eq!(
                int(&row["bytes"]),
                Some(want.sum_bytes.into()),
                "bytes: {ctx}"
            ),
            "hccl" => assert_eq!(
                int(&row["bytes"]),
                Some(want.max_bytes.into()),
                "bytes: {ctx}"
            ),
            "sync" => {
                let kind = sync_kind(chip, task["sqe_type"].as_u64())
                    .unwrap_or_else(|| panic!("a sync task of an unknown SQE type: {ctx}"));
                assert_eq!(row["kind"], kind, "{ctx}");
            }
            _ => {}
        }
        for (ours, truth_ns) in [("start_ns", want.start_ns), ("end_ns", want.end_ns)] {
            let ours = row[ours]
                .as_u64()
                .unwrap_or_else(|| panic!("no {ours}: {ctx}"));
            let device = task["device"].as_u64().unwrap() as u32;
            let bound = session.clocks[&device]
                .error_bound_ns
                .unwrap_or_else(|| panic!("device {device} has no error bound: {ctx}"));
            errors.push((ours.abs_diff(truth_ns), bound));
        }
    }
    errors
}

pub fn assert_aligned(name: &str, errors: Vec<Aligned>) {
    for &(error, bound) in &errors {
        assert!(
            error as f64 <= bound + BOUND_SLACK_NS,
            "{name}: a device time {error} ns from the truth, beyond the model's bound {bound:.0} ns"
        );
    }
    let mut errors: Vec<u64> = errors.into_iter().map(|(e, _)| e).collect();
    errors.sort_unstable();
    let at = |q: f64| errors[((errors.len() - 1) as f64 * q) as usize];
    let (median, p99, max) = (at(0.5), at(0.99), errors[errors.len() - 1]);
    println!(
        "{name}: device time error vs truth over {} timestamps: median {median} ns, p99 {p99} ns, max {max} ns",
        errors.len()
    );
    assert!(median <= MEDIAN_LIMIT_NS, "{name}: median {median} ns");
}
