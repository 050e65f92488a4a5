//! The Chrome trace of small hand-made datasets written by the real sink, parsed back.
use std::{collections::HashMap, path::Path};

use serde_json::Value;
use tracer_schema::{
    dataset::Dataset,
    rows::{ApiArgs, ApiRow, DeviceTask, KernelRow, MarkerRow, MemoryRow, MemsetRow, SyncRow},
    vocab::{
        CopyKind, EventKind, MarkerKind, MemcpyKind, MemoryKind, MemoryOperation, Severity,
        SyncKind,
    },
};

use super::{
    Format, Summary,
    chrome::{DEVICE_PID, HOST_STRIDE},
    export, run,
};
use crate::{
    sink::parquet::{ParquetSink, SinkOptions},
    test_dataset::{Scratch, allreduce, call, event, kernel, marker, memcpy, task, write_session},
};

/// Call `name` (`corr`) of thread `tid` of process 1.
fn call_on(tid: u32, corr: u64, name: &'static str, start: u64, end: Option<u64>) -> ApiRow {
    ApiRow {
        correlation_id: corr,
        tid,
        ..call(name, start, end, end.map(|_| 0))
    }
}

/// A task of call `corr` on `device`/`stream`; no times when `end` is None.
fn on_stream(corr: u64, device: u32, stream: u32, start: u64, end: Option<u64>) -> DeviceTask {
    DeviceTask {
        correlation_id: corr,
        device_id: device,
        stream_id: stream,
        task_id: stream * 100 + (start / 1_000_000) as u32,
        start_ns: end.map(|_| start),
        ..task(1, start, end, end.map(|_| 0))
    }
}

fn launch_kernel(corr: u64, device: u32, stream: u32, start: u64, end: Option<u64>) -> KernelRow {
    KernelRow {
        task: on_stream(corr, device, stream, start, end),
        ..kernel(1, "matmul", start, end, 0)
    }
}

fn memory(op: MemoryOperation, kind: MemoryKind, bytes: Option<u64>, end: u64) -> MemoryRow {
    MemoryRow {
        pid: 1,
        tid: 1,
        operation: op,
        memory_kind: kind,
        bytes,
        device_id: (kind == MemoryKind::Device).then_some(0),
        start_ns: end - 50_000,
        end_ns: end,
        api_name: "rtMalloc",
        ..MemoryRow::default()
    }
}

const MIB: u64 = 1 << 20;

/// Host `a`, process 1: thread 1 launches two kernels (and a third without device times)
/// inside an mstx range, does a memset and records an event, thread 2 copies, all-reduces, marks and ends in a
/// call that never returns. One kernel on device 1 has no API call.
fn write_dataset(dir: &Path) {
    let mut sink = ParquetSink::create(dir, SinkOptions::new("a")).expect("sink");
    let launch = ApiRow {
        args: ApiArgs {
            device_id: Some(0),
            stream: Some(0x7f00_0000_1000),
            block_dim: Some(8),
            kernel_name: Some("matmul".to_owned()),
            ..ApiArgs::default()
        },
        ..call_on(1, 1, "aclrtLaunchKernel", 1_000_123, Some(1_500_000))
    };
    // Starts at the same ns as the call it is nested in, and is written first.
    let nested = ApiRow {
        parent_correlation_id: Some(1),
        depth: 1,
        ..call_on(1, 2, "rtKernelLaunch", 1_000_123, Some(1_400_000))
    };
    let copy = ApiRow {
        args: ApiArgs {
            bytes: Some(4096),
            memcpy_kind: Some(MemcpyKind::HostToDevice),
            ..ApiArgs::default()
        },
        ..call_on(2, 3, "aclrtMemcpy", 2_000_000, Some(2_600_000))
    };
    sink.write_api(&[
        nested,
        launch,
        copy,
        call_on(1, 4, "aclrtMemsetAsync", 3_000_000, Some(3_100_000)),
        call_on(1, 5, "mstxRangeStartA", 500_000, Some(520_000)),
        call_on(2, 6, "mstxMarkA", 700_000, Some(710_000)),
        call_on(2, 8, "HcclAllReduce", 6_000_000, Some(6_100_000)),
        call_on(1, 10, "aclrtRecordEvent", 4_000_000, Some(4_050_000)),
        call_on(2, 7, "aclrtSynchronizeStream", 7_000_000, None),
    ])
    .expect("api");
    sink.flush().expect("flush");
    sink.write_kernels(&[
        launch_kernel(1, 0, 3, 1_600_000, Some(1_900_000)),
        launch_kernel(1, 0, 3, 1_950_000, Some(2_050_000)),
        launch_kernel(99, 1, 5, 5_000_000, Some(5_100_000)),
        launch_kernel(1, 0, 3, 2_100_000, None),
    ])
    .expect("kernels");
    let mut copy = memcpy(CopyKind::HostToDevice, 4096, 2_100_000, Some(2_500_000));
    copy.task = on_stream(3, 0, 4, 2_100_000, Some(2_500_000));
    sink.write_memcpys(&[copy]).expect("memcpy");
    let memset = |start, end| MemsetRow {
        task: on_stream(4, 0, 3, start, end),
        bytes: 1024,
        is_async: true,
        api_name: "aclrtMemsetAsync",
        ..MemsetRow::default()
    };
    sink.write_memsets(&[memset(3_200_000, Some(3_250_000)), memset(3_300_000, None)])
        .expect("memset");
    let mut collective = allreduce(1, 0, 6_050_000, 6_400_000);
    collective.task = on_stream(8, 0, 6, 6_050_000, Some(6_400_000));
    sink.write_hccl(&[collective]).expect("hccl");
    let record = SyncRow {
        task: on_stream(10, 0, 3, 4_100_000, Some(4_150_000)),
        kind: SyncKind::EventRecord,
        event: Some(0x5555_0000),
        api_name: "aclrtRecordEvent",
    };
    sink.write_syncs(&[record]).expect("sync");
    sink.write_markers(&[
        MarkerRow {
            correlation_id: 5,
            range_id: Some(1),
            ..marker(MarkerKind::Range, "step", 500_000, Some(3_500_000))
        },
        MarkerRow {
            correlation_id: 6,
            tid: 2,
            ..marker(MarkerKind::Mark, "ready", 700_000, Some(700_000))
        },
        MarkerRow {
            tid: 2,
            ..marker(MarkerKind::Range, "open", 800_000, None)
        },
    ])
    .expect("markers");
    use {MemoryKind::*, MemoryOperation::*};
    sink.write_memory(&[
        memory(Release, Device, Some(MIB), 5_100_000),
        memory(Allocation, Device, Some(MIB), 200_000),
        memory(Allocation, Device, Some(512), 400_000),
        MemoryRow {
            return_value: 207_001,
            ..memory(Allocation, Device, Some(4096), 450_000)
        },
        memory(Release, Device, None, 460_000),
        memory(Allocation, Host, Some(65_536), 300_000),
    ])
    .expect("memory");
    let mut missing = event(EventKind::MissingCompletion, Severity::Warning, 1);
    (missing.ts_ns, missing.message) = (9_000_000, "task never completed".to_owned());
    sink.write_critical_events(&[missing]).expect("events");
    sink.finish().expect("finish");
    write_session(dir, "a", &[]);
}

/// The trace of the dataset in `dir`, parsed, and what the export said it wrote.
fn trace(dir: &Path) -> (Vec<Value>, Summary) {
    let dataset = Dataset::open(dir).expect("open");
    let mut out = Vec::new();
    let summary = export(&dataset, Format::Chrome, &mut out, false).expect("export");
    let v: Value = serde_json::from_slice(&out).expect("the trace is JSON");
    assert_eq!(v["displayTimeUnit"], "ns");
    let events = v["traceEvents"].as_array().expect("traceEvents").clone();
    assert_eq!(events.len() as u64, summary.events);
    (events, summary)
}

fn of<'e>(events: &'e [Value], ph: &str, cat: &str) -> Vec<&'e Value> {
    events
        .iter()
        .filter(|e| e["ph"] == ph && e["cat"] == cat)
        .collect()
}

fn named<'e>(events: &[&'e Value], name: &str) -> &'e Value {
    let found: Vec<_> = events.iter().filter(|e| e["name"] == name).collect();
    assert_eq!(found.len(), 1, "one {name} in {events:?}");
    found[0]
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("{v} is not a number"))
}

/// Event `e` is on track (`pid`, `tid`) from `start` to `end` ns.
fn assert_span(e: &Value, pid: u64, tid: u64, start: u64, end: u64) {
    assert_eq!((&e["pid"], &e["tid"]), (&pid.into(), &tid.into()), "{e}");
    assert!(
        (num(&e["ts"]) - start as f64 / 1e3).abs() < 1e-6,
        "ts of {e}"
    );
    assert!(
        (num(&e["dur"]) - (end - start) as f64 / 1e3).abs() < 1e-6,
        "dur of {e}"
    );
}

/// The name that metadata event `kind` gives track (`pid`, `tid`).
fn track_name<'e>(events: &'e [Value], kind: &str, pid: u64, tid: Option<u64>) -> &'e str {
    let found: Vec<_> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == kind && e["pid"] == pid)
        .filter(|e| tid.is_none_or(|tid| e["tid"] == tid))
        .collect();
    assert_eq!(found.len(), 1, "one {kind} of {pid}/{tid:?}");
    found[0]["args"]["name"].as_str().expect("a name")
}

#[test]
fn api_calls_are_spans_on_their_threads() {
    let dir = Scratch::new("export-api");
    write_dataset(&dir);
    let (events, _) = trace(&dir);
    let calls = of(&events, "X", "api");
    assert_eq!(calls.len(), 8, "one X per call that returned");
    let launch = named(&calls, "aclrtLaunchKernel");
    assert_span(launch, 1, 1, 1_000_123, 1_500_000);
    assert_eq!(launch["ts"], 1000.123, "ns as fractions of µs");
    let args = &launch["args"];
    assert_eq!(
        (
            &args["correlation_id"],
            &args["return_value"],
            &args["domain"]
        ),
        (&1.into(), &0.into(), &"ACL".into())
    );
    assert_eq!(
        (&args["stream"], &args["block_dim"], &args["kernel_name"]),
        (&"0x7f0000001000".into(), &8.into(), &"matmul".into())
    );
    assert!(
        args.get("bytes").is_none(),
        "null columns are left out: {args}"
    );
    assert_span(named(&calls, "rtKernelLaunch"), 1, 1, 1_000_123, 1_400_000);
    assert_eq!(
        named(&calls, "rtKernelLaunch")["args"]["parent_correlation_id"],
        1
    );
    let position = |name: &str| events.iter().position(|e| e["name"] == name);
    assert!(
        position("aclrtLaunchKernel") < position("rtKernelLaunch"),
        "the outer of two calls that start together comes first"
    );
    let copy = named(&calls, "aclrtMemcpy");
    assert_span(copy, 1, 2, 2_000_000, 2_600_000);
    assert_eq!(
        (&copy["args"]["bytes"], &copy["args"]["memcpy_kind"]),
        (&4096.into(), &"HOST_TO_DEVICE".into())
    );

    let open = of(&events, "B", "api");
    assert_eq!(
        open.len(),
        1,
        "a call that never returned begins and never ends"
    );
    assert_eq!(
        (&open[0]["name"], &open[0]["tid"]),
        (&"aclrtSynchronizeStream".into(), &2.into())
    );

    assert_eq!(track_name(&events, "process_name", 1, None), "pid 1");
    assert_eq!(track_name(&events, "thread_name", 1, Some(2)), "thread 2");
}

#[test]
fn device_tasks_are_spans_on_their_streams() {
    let dir = Scratch::new("export-tasks");
    write_dataset(&dir);
    let (events, summary) = trace(&dir);
    let kernels = of(&events, "X", "kernel");
    assert_eq!(
        kernels.len(),
        3,
        "the kernel without device times is left out"
    );
    assert_span(kernels[0], DEVICE_PID, 3, 1_600_000, 1_900_000);
    assert_span(kernels[2], DEVICE_PID + 1, 5, 5_000_000, 5_100_000);
    let args = &kernels[0]["args"];
    assert_eq!(kernels[0]["name"], "matmul");
    assert_eq!(
        (&args["correlation_id"], &args["task_id"], &args["status"]),
        (&1.into(), &301.into(), &0.into())
    );
    assert_eq!(
        (&args["pid"], &args["kernel_type"]),
        (&1.into(), &"AI_CORE".into())
    );

    let copy = named(&of(&events, "X", "memcpy"), "memcpy HTOD 4.0 KiB");
    assert_span(copy, DEVICE_PID, 4, 2_100_000, 2_500_000);
    assert_eq!(copy["args"]["bytes"], 4096);
    let memsets = of(&events, "X", "memset");
    assert_eq!(memsets.len(), 1);
    assert_span(
        named(&memsets, "memset 1.0 KiB"),
        DEVICE_PID,
        3,
        3_200_000,
        3_250_000,
    );
    let collective = named(&of(&events, "X", "hccl"), "HcclAllReduce");
    assert_span(collective, DEVICE_PID, 6, 6_050_000, 6_400_000);
    assert_eq!(
        (&collective["args"]["comm_name"], &collective["args"]["seq"]),
        (&"comm0/2".into(), &0.into())
    );
    let record = named(&of(&events, "X", "sync"), "EVENT_RECORD");
    assert_span(record, DEVICE_PID, 3, 4_100_000, 4_150_000);
    assert_eq!(
        (&record["args"]["event"], &record["args"]["api_name"]),
        (&"0x55550000".into(), &"aclrtRecordEvent".into())
    );

    assert_eq!(
        track_name(&events, "process_name", DEVICE_PID, None),
        "NPU 0"
    );
    assert_eq!(
        track_name(&events, "process_name", DEVICE_PID + 1, None),
        "NPU 1"
    );
    assert_eq!(
        track_name(&events, "thread_name", DEVICE_PID, Some(3)),
        "stream 3"
    );
    let skipped: Vec<_> = summary.skipped_tasks.into_iter().collect();
    assert_eq!(skipped, [("kernel", 1), ("memset", 1)]);
    assert_eq!((summary.processes, summary.devices), (1, 2));
}

/// Every task whose call was traced has one arrow, from that call's thread at its start to
/// the task; the task of an untraced call has none.
#[test]
fn flows_go_from_calls_to_their_tasks() {
    let dir = Scratch::new("export-flows");
    write_dataset(&dir);
    let (events, _) = trace(&dir);
    let calls: HashMap<u64, &Value> = of(&events, "X", "api")
        .into_iter()
        .map(|e| (e["args"]["correlation_id"].as_u64().expect("id"), e))
        .collect();
    let starts: HashMap<u64, &Value> = of(&events, "s", "flow")
        .into_iter()
        .map(|e| (e["id"].as_u64().expect("flow id"), e))
        .collect();
    let ends = of(&events, "f", "flow");
    assert_eq!((starts.len(), ends.len()), (6, 6), "one id per arrow");
    for cat in ["kernel", "memcpy", "memset", "hccl", "sync"] {
        for task in of(&events, "X", cat) {
            let arrows: Vec<_> = ends
                .iter()
                .filter(|f| f["pid"] == task["pid"] && f["tid"] == task["tid"])
                .filter(|f| f["ts"] == task["ts"])
                .collect();
            let Some(call) = calls.get(&task["args"]["correlation_id"].as_u64().expect("id"))
            else {
                assert!(arrows.is_empty(), "no call, no arrow: {task}");
                continue;
            };
            assert_eq!(arrows.len(), 1, "one arrow to {task}");
            assert_eq!(
                (&arrows[0]["bp"], &arrows[0]["name"]),
                (&"e".into(), &cat.into())
            );
            let from = starts[&arrows[0]["id"].as_u64().expect("flow id")];
            assert_eq!(
                (&from["pid"], &from["tid"], &from["ts"]),
                (&call["pid"], &call["tid"], &call["ts"]),
                "the arrow to {task} leaves {call}"
            );
        }
    }
}

#[test]
fn markers_counters_and_critical_events() {
    let dir = Scratch::new("export-markers");
    write_dataset(&dir);
    let (events, _) = trace(&dir);
    let step = named(&of(&events, "X", "marker"), "step");
    assert_span(step, 1, 1, 500_000, 3_500_000);
    assert_eq!(
        (&step["args"]["range_id"], &step["args"]["correlation_id"]),
        (&1.into(), &5.into())
    );
    let position = |name: &str| events.iter().position(|e| e["name"] == name);
    assert!(
        position("step") < position("mstxRangeStartA"),
        "the range encloses its start call"
    );
    let ready = named(&of(&events, "i", "marker"), "ready");
    assert_eq!(
        (&ready["tid"], &ready["ts"], &ready["s"]),
        (&2.into(), &700.0.into(), &"t".into())
    );
    let open = named(&of(&events, "B", "marker"), "open");
    assert_eq!((&open["tid"], &open["ts"]), (&2.into(), &800.0.into()));

    let counters = of(&events, "C", "memory");
    let series = |name: &str| -> Vec<(f64, u64)> {
        counters
            .iter()
            .filter(|c| c["name"] == name)
            .inspect(|c| assert_eq!(c["pid"], 1))
            .map(|c| (num(&c["ts"]), c["args"]["bytes"].as_u64().expect("bytes")))
            .collect()
    };
    assert_eq!(
        series("NPU 0 memory in use"),
        [(200.0, MIB), (400.0, MIB + 512), (5_100.0, 512)],
        "failed allocations and releases of unknown size change nothing"
    );
    assert_eq!(series("pinned host memory in use"), [(300.0, 65_536)]);
    assert_eq!(counters.len(), 4);

    let critical = of(&events, "i", "critical_event");
    assert_eq!(critical.len(), 1);
    let e = critical[0];
    assert_eq!(e["name"], "missing_completion: task never completed");
    assert_eq!(
        (&e["s"], &e["ts"], &e["args"]["severity"]),
        (&"g".into(), &9_000.0.into(), &"warning".into())
    );
}

/// Equal pids on two hosts get tracks of their own, named after their host, and each
/// task's arrow starts on its own host's call.
#[test]
fn hosts_are_kept_apart() {
    let dir = Scratch::new("export-hosts");
    for (host, start) in [("a", 1_000), ("b", 50_000)] {
        let mut sink = ParquetSink::create(&dir, SinkOptions::new(host)).expect("sink");
        sink.write_api(&[call_on(1, 1, "aclrtLaunchKernel", start, Some(start + 500))])
            .expect("api");
        sink.write_kernels(&[launch_kernel(1, 0, 3, start + 600, Some(start + 900))])
            .expect("kernel");
        sink.finish().expect("finish");
    }
    let (events, summary) = trace(&dir);
    assert_eq!((summary.processes, summary.devices), (2, 2));
    let b = HOST_STRIDE;
    assert_eq!(track_name(&events, "process_name", 1, None), "pid 1 on a");
    assert_eq!(
        track_name(&events, "process_name", b + 1, None),
        "pid 1 on b"
    );
    assert_eq!(
        track_name(&events, "process_name", DEVICE_PID, None),
        "NPU 0 on a"
    );
    assert_eq!(
        track_name(&events, "process_name", b + DEVICE_PID, None),
        "NPU 0 on b"
    );
    let kernels = of(&events, "X", "kernel");
    assert_span(kernels[1], b + DEVICE_PID, 3, 50_600, 50_900);
    let arrows = of(&events, "s", "flow");
    let pids: Vec<_> = arrows
        .iter()
        .map(|s| s["pid"].as_u64().expect("pid"))
        .collect();
    assert_eq!(pids, [1, b + 1]);
}

#[test]
fn run_writes_a_file_or_says_why_not() {
    let dir = Scratch::new("export-run");
    write_dataset(&dir);
    let out = dir.join("trace.json");
    let summary = run(&dir, Format::Chrome, &out).expect("export");
    let text = std::fs::read_to_string(&out).expect("the trace file");
    let v: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(
        v["traceEvents"].as_array().map(Vec::len),
        Some(summary.events as usize)
    );
    assert_eq!(v["otherData"]["hosts"], serde_json::json!(["a"]));

    let empty = Scratch::new("export-not-a-dataset");
    let err = format!(
        "{:#}",
        run(&empty, Format::Chrome, &empty.join("t.json")).expect_err("empty")
    );
    assert!(err.contains("is not an npu-bpftrace dataset"), "{err}");
    assert!(
        !empty.join("t.json").exists(),
        "nothing written for a bad dataset"
    );

    let unwritable = dir.join("no-such-dir").join("t.json");
    let err = format!(
        "{:#}",
        run(&dir, Format::Chrome, &unwritable).expect_err("no dir")
    );
    assert!(
        err.starts_with(&format!("cannot write {}", unwritable.display())),
        "{err}"
    );
}
