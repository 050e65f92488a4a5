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
    chrome::{COMMUNICATOR_TID, DEVICE_PID, HOST_STRIDE},
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
    assert_span(
        collective,
        DEVICE_PID,
        COMMUNICATOR_TID,
        6_050_000,
        6_400_000,
    );
    assert_eq!(
        track_name(&events, "thread_name", DEVICE_PID, Some(COMMUNICATOR_TID)),
        "comm0/2 rank 0"
    );
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

/// Every outermost call starts an arrow at its start on its thread; every task ends one,
/// with the id of the call that has its correlation id (a task of an untraced call ends an
/// arrow that no call starts, which viewers do not draw).
#[test]
fn flows_go_from_calls_to_their_tasks() {
    let dir = Scratch::new("export-flows");
    write_dataset(&dir);
    let (events, _) = trace(&dir);
    let calls: Vec<&Value> = ["X", "B"]
        .iter()
        .flat_map(|ph| of(&events, ph, "api"))
        .collect();
    let starts: HashMap<&str, &Value> = of(&events, "s", "flow")
        .into_iter()
        .map(|e| (e["id"].as_str().expect("flow id"), e))
        .collect();
    let outermost = calls
        .iter()
        .filter(|c| c["args"].get("parent_correlation_id").is_none())
        .count();
    assert_eq!((calls.len(), outermost), (9, 8));
    assert_eq!(starts.len(), outermost, "an id per outermost call");
    let ends = of(&events, "f", "flow");
    assert_eq!(ends.len(), 7, "one per task with device times");
    for cat in ["kernel", "memcpy", "memset", "hccl", "sync"] {
        for task in of(&events, "X", cat) {
            let arrows: Vec<_> = ends
                .iter()
                .filter(|f| f["pid"] == task["pid"] && f["tid"] == task["tid"])
                .filter(|f| f["ts"] == task["ts"])
                .collect();
            assert_eq!(arrows.len(), 1, "one arrow to {task}");
            assert_eq!(
                (&arrows[0]["bp"], &arrows[0]["name"]),
                (&"e".into(), &"launch".into())
            );
            let id = arrows[0]["id"].as_str().expect("flow id");
            let corr = &task["args"]["correlation_id"];
            let Some(call) = calls.iter().find(|c| &c["args"]["correlation_id"] == corr) else {
                assert!(!starts.contains_key(id), "no call, no start: {task}");
                continue;
            };
            let from = starts[id];
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

/// A decoded Perfetto trace: its tracks by uuid and its track events in file order, names
/// resolved through the interned data.
mod perfetto_trace {
    use std::collections::HashMap;

    use perfetto_protos::{
        debug_annotation::DebugAnnotation,
        trace::Trace,
        track_event::track_event::{Type, legacy_event::FlowDirection},
    };
    use protobuf::Message;

    /// A track: its name, parent, and for thread and process tracks their pid (and tid).
    #[derive(Debug, Default, Clone)]
    pub(super) struct Track {
        pub name: String,
        pub parent: Option<u64>,
        pub pid: Option<i32>,
        pub tid: Option<i32>,
        pub counter: bool,
    }

    #[derive(Debug, Clone)]
    pub(super) struct Event {
        pub ts: u64,
        pub kind: Type,
        pub track: u64,
        pub name: String,
        pub category: String,
        pub args: HashMap<String, String>,
        pub flow: Option<(u64, FlowDirection)>,
        pub value: Option<f64>,
    }

    pub(super) struct Decoded {
        pub tracks: HashMap<u64, Track>,
        pub events: Vec<Event>,
    }

    fn value(a: &DebugAnnotation) -> String {
        if a.has_uint_value() {
            a.uint_value().to_string()
        } else if a.has_int_value() {
            a.int_value().to_string()
        } else if a.has_bool_value() {
            a.bool_value().to_string()
        } else if a.has_double_value() {
            a.double_value().to_string()
        } else {
            a.string_value().to_owned()
        }
    }

    pub(super) fn decode(bytes: &[u8]) -> Decoded {
        let trace = Trace::parse_from_bytes(bytes).expect("a Perfetto trace");
        let (mut names, mut categories, mut keys) =
            (HashMap::new(), HashMap::new(), HashMap::new());
        let mut tracks = HashMap::new();
        let mut events = Vec::new();
        for packet in &trace.packet {
            assert_eq!(packet.trusted_packet_sequence_id(), 1);
            if let Some(interned) = packet.interned_data.as_ref() {
                for n in &interned.event_names {
                    assert!(names.insert(n.iid(), n.name().to_owned()).is_none());
                }
                for c in &interned.event_categories {
                    categories.insert(c.iid(), c.name().to_owned());
                }
                for k in &interned.debug_annotation_names {
                    keys.insert(k.iid(), k.name().to_owned());
                }
            }
            if packet.has_track_descriptor() {
                let d = packet.track_descriptor();
                let mut track = Track {
                    name: d.name().to_owned(),
                    parent: d.parent_uuid,
                    counter: d.counter.is_some(),
                    ..Track::default()
                };
                if let Some(p) = d.process.as_ref() {
                    (track.name, track.pid) = (p.process_name().to_owned(), p.pid);
                }
                if let Some(t) = d.thread.as_ref() {
                    track.name = t.thread_name().to_owned();
                    (track.pid, track.tid) = (t.pid, t.tid);
                }
                assert!(
                    tracks.insert(d.uuid(), track).is_none(),
                    "one descriptor per uuid"
                );
            }
            if packet.has_track_event() {
                let e = packet.track_event();
                assert!(tracks.contains_key(&e.track_uuid()), "described before use");
                let args = e
                    .debug_annotations
                    .iter()
                    .map(|a| (keys[&a.name_iid()].clone(), value(a)))
                    .collect();
                let flow = e.legacy_event.as_ref().map(|l| {
                    let direction = l.flow_direction.expect("a direction").enum_value();
                    (l.bind_id(), direction.expect("a known direction"))
                });
                events.push(Event {
                    ts: packet.timestamp(),
                    kind: e.type_(),
                    track: e.track_uuid(),
                    name: if e.has_name_iid() {
                        names[&e.name_iid()].clone()
                    } else {
                        e.name().to_owned()
                    },
                    category: e
                        .category_iids
                        .first()
                        .map(|c| categories[c].clone())
                        .unwrap_or_default(),
                    args,
                    flow,
                    value: e
                        .has_double_counter_value()
                        .then(|| e.double_counter_value()),
                });
            }
        }
        Decoded { tracks, events }
    }
}

fn perfetto(dir: &Path) -> (perfetto_trace::Decoded, Summary) {
    let dataset = Dataset::open(dir).expect("open");
    let mut out = Vec::new();
    let summary = export(&dataset, Format::Perfetto, &mut out, false).expect("export");
    (perfetto_trace::decode(&out), summary)
}

/// The Perfetto trace of the hand-made dataset, decoded with Perfetto's own protos: the same
/// tracks, slices (begin and end at the rows' exact ns), counters and arrows as the JSON.
#[test]
fn perfetto_has_the_same_timeline() {
    use perfetto_protos::track_event::track_event::{Type, legacy_event::FlowDirection};
    let dir = Scratch::new("export-perfetto");
    write_dataset(&dir);
    let (trace, summary) = perfetto(&dir);
    assert_eq!((summary.processes, summary.devices), (1, 2));
    let track = |uuid: u64| &trace.tracks[&uuid];
    let path = |uuid: u64| {
        let t = track(uuid);
        let parent = t.parent.map(|p| track(p).name.clone()).unwrap_or_default();
        format!("{parent}/{}", t.name)
    };
    let begins = |cat: &str| -> Vec<&perfetto_trace::Event> {
        trace
            .events
            .iter()
            .filter(|e| e.kind == Type::TYPE_SLICE_BEGIN && e.category == cat)
            .collect()
    };
    // Each slice's end follows its begin on the same track.
    let end_of = |begin: &perfetto_trace::Event| {
        let at = trace
            .events
            .iter()
            .position(|e| std::ptr::eq(e, begin))
            .expect("in the trace");
        trace.events[at + 1..]
            .iter()
            .find(|e| e.track == begin.track)
            .filter(|e| e.kind == Type::TYPE_SLICE_END)
            .map(|e| e.ts)
    };

    let calls = begins("api");
    assert_eq!(calls.len(), 9);
    let launch = calls
        .iter()
        .find(|e| e.name == "aclrtLaunchKernel")
        .expect("launch");
    assert_eq!((launch.ts, end_of(launch)), (1_000_123, Some(1_500_000)));
    assert_eq!(path(launch.track), "pid 1/thread 1");
    assert_eq!(track(launch.track).tid, Some(1));
    assert_eq!(launch.args["stream"], "0x7f0000001000");
    assert_eq!(launch.args["kernel_name"], "matmul");
    let open = calls
        .iter()
        .find(|e| e.name == "aclrtSynchronizeStream")
        .expect("open");
    assert_eq!(end_of(open), None, "a call that never returned has no end");

    let kernels = begins("kernel");
    assert_eq!(kernels.len(), 3);
    assert_eq!(
        (kernels[0].ts, end_of(kernels[0])),
        (1_600_000, Some(1_900_000))
    );
    assert_eq!(path(kernels[0].track), "NPU 0/stream 3");
    assert_eq!(path(kernels[2].track), "NPU 1/stream 5");
    let collective = &begins("hccl")[0];
    assert_eq!(path(collective.track), "NPU 0/HCCL comm0/2 rank 0");
    assert_eq!(path(begins("marker")[0].track), "pid 1/mstx of thread 1");

    // Arrows: the launch call's id on both of its kernels; none on nested calls.
    let (id, out) = launch.flow.expect("the launch starts arrows");
    assert_eq!(out, FlowDirection::FLOW_OUT);
    let nested = calls
        .iter()
        .find(|e| e.name == "rtKernelLaunch")
        .expect("nested");
    assert_eq!(nested.flow, None);
    let into: Vec<u64> = kernels
        .iter()
        .filter(|k| k.flow == Some((id, FlowDirection::FLOW_IN)))
        .map(|k| k.ts)
        .collect();
    assert_eq!(into, [1_600_000, 1_950_000]);
    for cat in ["kernel", "memcpy", "memset", "hccl", "sync"] {
        for task in begins(cat) {
            let (id, direction) = task.flow.expect("every task ends an arrow");
            assert_eq!(direction, FlowDirection::FLOW_IN);
            let corr = &task.args["correlation_id"];
            let sources: Vec<_> = calls
                .iter()
                .filter(|c| c.flow == Some((id, FlowDirection::FLOW_OUT)))
                .collect();
            match calls.iter().find(|c| &c.args["correlation_id"] == corr) {
                Some(call) => assert_eq!(sources.len(), 1, "{task:?} from {call:?}"),
                None => assert!(sources.is_empty(), "no call, no source: {task:?}"),
            }
        }
    }

    // Counters: memory in use in bytes, copy bandwidth while the copy runs.
    let series = |name: &str| -> Vec<(u64, f64)> {
        trace
            .events
            .iter()
            .filter(|e| e.kind == Type::TYPE_COUNTER && track(e.track).name == name)
            .inspect(|e| assert!(track(e.track).counter, "a counter track"))
            .map(|e| (e.ts, e.value.expect("a value")))
            .collect()
    };
    let mib = MIB as f64;
    assert_eq!(
        series("NPU 0 memory in use"),
        [(200_000, mib), (400_000, mib + 512.0), (5_100_000, 512.0)]
    );
    let bandwidth = series("stream 4 copy bandwidth");
    assert_eq!(bandwidth.len(), 2);
    assert_eq!(
        (bandwidth[0].0, bandwidth[1]),
        (2_100_000, (2_500_000, 0.0))
    );
    assert!(
        (bandwidth[0].1 - 4096.0 / 400_000.0).abs() < 1e-12,
        "{bandwidth:?}"
    );

    let critical: Vec<_> = trace
        .events
        .iter()
        .filter(|e| e.kind == Type::TYPE_INSTANT && e.category == "critical_event")
        .collect();
    assert_eq!(critical.len(), 1);
    assert_eq!(critical[0].name, "missing_completion: task never completed");
    assert_eq!(track(critical[0].track).name, "critical events");
}
