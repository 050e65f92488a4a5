//! `npu-bpftrace export` of a recorded 2-rank training run, as Chrome JSON and as a Perfetto
//! trace decoded with Perfetto's own protos: their events against the Parquet tables of the
//! same recording.
use std::{
    collections::{BTreeMap, HashMap},
    path::Path,
    process::Command,
};

use perfetto_protos::{
    trace::Trace,
    track_event::{
        TrackEvent,
        track_event::{Type, legacy_event::FlowDirection},
    },
};
use protobuf::Message;
use serde_json::Value;
use tests::{Recording, Row, npu_bpftrace, record, sim_bin};

/// The recording's rows of `table` that have a value in `column`, and those that do not.
fn with_and_without(rows: &[Row], column: &str) -> (usize, usize) {
    let with = rows.iter().filter(|r| !r[column].is_null()).count();
    (with, rows.len() - with)
}

/// Events of phase `ph` and category `cat`.
fn of<'e>(events: &'e [Value], ph: &str, cat: &str) -> Vec<&'e Value> {
    events
        .iter()
        .filter(|e| e["ph"] == ph && e["cat"] == cat)
        .collect()
}

/// `npu-bpftrace export DIR --format FORMAT -o OUT`; panics unless it succeeds.
fn export(dir: &Path, format: &str, out: &Path) {
    let run = Command::new(npu_bpftrace())
        .arg("export")
        .arg(dir)
        .args(["--format", format, "-o"])
        .arg(out)
        .output()
        .expect("running npu-bpftrace export");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.success(),
        "export failed: {}\n{stderr}",
        run.status
    );
    assert!(stderr.contains("npu-bpftrace: exported "), "{stderr}");
}

#[test]
fn export_matches_the_tables() {
    let workload = [
        sim_bin("npu-sim-run"),
        "--nproc".into(),
        "2".into(),
        "--".into(),
        "npu-sim-app".into(),
        "train".into(),
        "--steps".into(),
        "3".into(),
    ];
    let recording = record("export-train", &[], &workload);
    chrome_matches(&recording);
    perfetto_matches(&recording);
}

fn chrome_matches(recording: &Recording) {
    let out = recording.dir.with_file_name("trace.json");
    export(&recording.dir, "chrome", &out);
    let text = std::fs::read_to_string(&out).expect("the trace file");
    let trace: Value = serde_json::from_str(&text).expect("the trace is JSON");
    let events = trace["traceEvents"].as_array().expect("traceEvents");

    let api = recording.table("api");
    let (returned, open) = with_and_without(&api, "end_ns");
    assert!(returned > 0, "the workload made API calls");
    assert_eq!(of(events, "X", "api").len(), returned, "one X per call");
    assert_eq!(of(events, "B", "api").len(), open, "one B per open call");
    for table in ["kernel", "memcpy", "memset", "hccl", "sync"] {
        let rows = recording.table(table);
        let timed = rows
            .iter()
            .filter(|r| !r["start_ns"].is_null() && !r["end_ns"].is_null())
            .count();
        assert_eq!(
            of(events, "X", table).len(),
            timed,
            "one X per {table} task"
        );
    }
    let markers = recording.table("marker");
    let is_mark = |r: &&Row| r["kind"] == "mark";
    let marks = markers.iter().filter(is_mark).count();
    let ranges: Vec<Row> = markers.iter().filter(|r| !is_mark(r)).cloned().collect();
    assert!(
        marks > 0 && !ranges.is_empty(),
        "the workload marks with mstx"
    );
    assert_eq!(of(events, "i", "marker").len(), marks);
    assert_eq!(
        of(events, "X", "marker").len(),
        with_and_without(&ranges, "end_ns").0
    );
    // A counter value per allocation or release that changed memory in use.
    let memory = recording.table("memory");
    let changes = memory
        .iter()
        .filter(|r| r["return_value"] == 0 && !r["bytes"].is_null())
        .count();
    assert!(changes > 0, "the workload allocates memory");
    assert_eq!(of(events, "C", "memory").len(), changes);

    // Every kernel's arrow starts on the thread of the API call with its correlation id, at
    // the call's start: an `s` there with the id of the kernel's `f`.
    let calls: HashMap<u64, &Row> = api
        .iter()
        .map(|r| (r["correlation_id"].as_u64().expect("id"), r))
        .collect();
    let starts: HashMap<&str, &Value> = of(events, "s", "flow")
        .into_iter()
        .map(|s| (s["id"].as_str().expect("flow id"), s))
        .collect();
    let mut ends: HashMap<String, Vec<&Value>> = HashMap::new();
    for f in of(events, "f", "flow") {
        ends.entry(place(f)).or_default().push(f);
    }
    let kernels = of(events, "X", "kernel");
    assert!(!kernels.is_empty(), "the workload launched kernels");
    for kernel in kernels {
        let id = kernel["args"]["correlation_id"].as_u64().expect("id");
        let call = calls
            .get(&id)
            .unwrap_or_else(|| panic!("kernel {kernel} without its API call"));
        let arrows = ends.get(&place(kernel)).map_or(&[][..], Vec::as_slice);
        assert_eq!(arrows.len(), 1, "one arrow to {kernel}");
        let from = starts[arrows[0]["id"].as_str().expect("flow id")];
        assert_eq!(
            (&from["pid"], &from["tid"]),
            (&call["pid"], &call["tid"]),
            "the arrow to {kernel} leaves the thread of {call:?}"
        );
        let start_us = call["start_ns"].as_u64().expect("start") as f64 / 1e3;
        assert!(
            (from["ts"].as_f64().expect("ts") - start_us).abs() < 1e-3,
            "the arrow leaves at the start of {call:?}: {from}"
        );
    }
}

/// A decoded track event: where, when, what, and its arrow end if any.
struct Event {
    ts: u64,
    event: TrackEvent,
    track: String,
    name: String,
    category: String,
    args: BTreeMap<String, String>,
}

/// The track events of the Perfetto trace at `path`, in file order, with interned names
/// resolved and each track named by its path (`pid 4242/thread 4243`, `NPU 0/stream 3`);
/// thread tracks are named `tid <tid>` after the thread descriptor's tid.
fn decode(path: &Path) -> Vec<Event> {
    let bytes = std::fs::read(path).expect("the trace file");
    let trace = Trace::parse_from_bytes(&bytes).expect("a Perfetto trace");
    let (mut names, mut keys, mut categories) = (HashMap::new(), HashMap::new(), HashMap::new());
    let mut tracks: HashMap<u64, (String, Option<u64>)> = HashMap::new();
    let mut events = Vec::new();
    for packet in &trace.packet {
        if let Some(interned) = packet.interned_data.as_ref() {
            for n in &interned.event_names {
                names.insert(n.iid(), n.name().to_owned());
            }
            for k in &interned.debug_annotation_names {
                keys.insert(k.iid(), k.name().to_owned());
            }
            for c in &interned.event_categories {
                categories.insert(c.iid(), c.name().to_owned());
            }
        }
        if packet.has_track_descriptor() {
            let d = packet.track_descriptor();
            let name = match (d.process.as_ref(), d.thread.as_ref()) {
                (Some(p), _) => p.process_name().to_owned(),
                (_, Some(t)) => format!("tid {}", t.tid()),
                _ => d.name().to_owned(),
            };
            tracks.insert(d.uuid(), (name, d.parent_uuid));
        }
        if packet.has_track_event() {
            let e = packet.track_event();
            let (name, parent) = &tracks[&e.track_uuid()];
            let parent = parent.map(|p| tracks[&p].0.clone()).unwrap_or_default();
            events.push(Event {
                ts: packet.timestamp(),
                track: format!("{parent}/{name}"),
                name: names
                    .get(&e.name_iid())
                    .cloned()
                    .unwrap_or_else(|| e.name().to_owned()),
                category: e
                    .category_iids
                    .first()
                    .map(|c| categories[c].clone())
                    .unwrap_or_default(),
                args: e
                    .debug_annotations
                    .iter()
                    .map(|a| {
                        let value = if a.has_uint_value() {
                            a.uint_value().to_string()
                        } else {
                            a.string_value().to_owned()
                        };
                        (keys[&a.name_iid()].clone(), value)
                    })
                    .collect(),
                event: e.clone(),
            });
        }
    }
    events
}

/// The flow end of a task's begin, or the flow start of a call's.
fn flow(e: &Event, direction: FlowDirection) -> Option<u64> {
    let legacy = e.event.legacy_event.as_ref()?;
    (legacy.flow_direction.map(|d| d.enum_value()) == Some(Ok(direction))).then(|| legacy.bind_id())
}

fn perfetto_matches(recording: &Recording) {
    let out = recording.dir.with_file_name("trace.pftrace");
    export(&recording.dir, "perfetto", &out);
    let events = decode(&out);
    let begins: Vec<&Event> = events
        .iter()
        .filter(|e| e.event.type_() == Type::TYPE_SLICE_BEGIN)
        .collect();
    let ends = events
        .iter()
        .filter(|e| e.event.type_() == Type::TYPE_SLICE_END)
        .count();

    // API calls: one slice per row on its thread's track, at the row's start ns; one end
    // per call that returned.
    let api = recording.table("api");
    let returned = api.iter().filter(|r| !r["end_ns"].is_null()).count();
    let mut rows: BTreeMap<(String, u64), usize> = BTreeMap::new();
    for r in &api {
        let track = format!("pid {}/tid {}", r["pid"], r["tid"]);
        *rows
            .entry((track, r["start_ns"].as_u64().expect("start")))
            .or_default() += 1;
    }
    let mut slices: BTreeMap<(String, u64), usize> = BTreeMap::new();
    for e in begins.iter().filter(|e| e.track.contains("/tid ")) {
        *slices.entry((e.track.clone(), e.ts)).or_default() += 1;
    }
    assert_eq!(slices, rows, "API slices per thread track and start");

    // Kernels, copies, memsets and sync tasks per device stream, with their exact times;
    // collectives per communicator and rank.
    let mut device_rows = 0;
    for table in ["kernel", "memcpy", "memset", "sync", "hccl"] {
        let mut rows: BTreeMap<String, Vec<(u64, u64)>> = BTreeMap::new();
        for r in recording.table(table) {
            let (Some(start), Some(end)) = (r["start_ns"].as_u64(), r["end_ns"].as_u64()) else {
                continue;
            };
            let track = if table == "hccl" {
                format!(
                    "NPU {}/HCCL {} rank {}",
                    r["device_id"],
                    r["comm_name"].as_str().expect("comm"),
                    r["rank"]
                )
            } else {
                format!("NPU {}/stream {}", r["device_id"], r["stream_id"])
            };
            rows.entry(track).or_default().push((start, end));
            device_rows += 1;
        }
        let mut slices: BTreeMap<String, Vec<(u64, u64)>> = BTreeMap::new();
        for (i, e) in events.iter().enumerate() {
            if e.event.type_() != Type::TYPE_SLICE_BEGIN || !is_table(e, table) {
                continue;
            }
            let end = events[i + 1..]
                .iter()
                .find(|x| x.track == e.track)
                .filter(|x| x.event.type_() == Type::TYPE_SLICE_END)
                .expect("a task's end follows its begin");
            slices
                .entry(e.track.clone())
                .or_default()
                .push((e.ts, end.ts));
        }
        for times in rows.values_mut().chain(slices.values_mut()) {
            times.sort_unstable();
        }
        assert!(
            !rows.is_empty() || table == "memset",
            "the workload made {table} tasks"
        );
        assert_eq!(
            slices, rows,
            "{table} slices per track, with the rows' times"
        );
    }
    let markers = recording.table("marker");
    let ranges = markers.iter().filter(|r| r["kind"] == "range").count();
    let closed = markers
        .iter()
        .filter(|r| r["kind"] == "range" && !r["end_ns"].is_null())
        .count();
    assert_eq!(begins.len(), api.len() + device_rows + ranges);
    assert_eq!(
        ends,
        returned + device_rows + closed,
        "every closed slice ends"
    );

    // Arrows: every task's id is the one its API call (same correlation id and process)
    // starts, and that call is outermost.
    let mut sources: HashMap<u64, &Event> = HashMap::new();
    for e in begins.iter().filter(|e| e.track.contains("/tid ")) {
        if let Some(id) = flow(e, FlowDirection::FLOW_OUT) {
            assert!(sources.insert(id, e).is_none(), "one call per id");
            assert!(
                !e.args.contains_key("parent_correlation_id"),
                "outermost: {}",
                e.name
            );
        }
    }
    let mut joined = 0;
    for task in begins
        .iter()
        .filter(|e| !e.track.contains("/tid ") && !is_table(e, "marker"))
    {
        let id = flow(task, FlowDirection::FLOW_IN).expect("every task ends an arrow");
        let call = sources
            .get(&id)
            .unwrap_or_else(|| panic!("no call for {}", task.name));
        assert_eq!(
            call.args["correlation_id"], task.args["correlation_id"],
            "{}",
            task.name
        );
        assert_eq!(
            call.track,
            format!("pid {}/tid {}", task.args["pid"], task.args["tid"])
        );
        assert!(call.ts <= task.ts, "the call starts before its task");
        joined += 1;
    }
    assert_eq!(joined, device_rows, "an arrow to every device task");
}

/// Whether track event `e` comes from `table` (its category).
fn is_table(e: &Event, table: &str) -> bool {
    e.category == table
}

/// Where an event is: its track and time.
fn place(e: &Value) -> String {
    format!("{}/{}@{}", e["pid"], e["tid"], e["ts"])
}
