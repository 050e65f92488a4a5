//! What a timeline shows, whatever its file format: the dataset's tables streamed a batch at
//! a time into slices, instants and counters on tracks, handed to a [`Sink`] (the Chrome
//! JSON or the Perfetto protobuf writer) as they are read. Nothing here holds more than a
//! batch of rows, a name per track, and a reorder window for the memory counters.
//!
//! Adding a table: describe it with a [`SpanTable`] (host-side spans on a thread) or add it
//! to [`DEVICE_TABLES`] (device tasks on streams), with the columns that go into args. A
//! table the dataset lacks (an older recording, or a table this build reads but the agent
//! that recorded did not write) has no rows and is skipped; optional arg columns a table
//! lacks are left out.
use std::{
    collections::{BinaryHeap, HashMap},
    hash::{Hash, Hasher},
};

use anyhow::Result;
use tracer_schema::{
    dataset::{Batch, Dataset, Table, Text},
    vocab::{MarkerKind, MemoryKind, MemoryOperation},
};

use super::Summary;
use crate::{progress::Bar, report::render::human_bytes};

/// Where an event is drawn. Hosts are positions in the dataset's host list.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Track {
    /// A thread of a traced process: its API calls.
    Thread { host: usize, pid: u32, tid: u32 },
    /// The mstx ranges and marks a thread started.
    Mstx { host: usize, pid: u32, tid: u32 },
    /// The operators a thread ran (the `op` table).
    Operators { host: usize, pid: u32, tid: u32 },
    /// A stream of a device: kernels, copies, memsets, synchronization tasks.
    Stream {
        host: usize,
        device: u32,
        stream: u32,
    },
    /// The collectives of one rank of a communicator, on the device the rank runs on.
    Communicator {
        host: usize,
        device: u32,
        comm: String,
        rank: Option<u32>,
    },
    /// A counter of a traced process (`owner` Process) or a device.
    Counter {
        owner: Owner,
        name: String,
        unit: Unit,
    },
    /// Events of the whole trace (critical events).
    Global,
}

/// What a counter belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Owner {
    Process { host: usize, pid: u32 },
    Device { host: usize, device: u32 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Unit {
    Bytes,
    GigabytesPerSecond,
}

/// An arg of an event: a column of its row.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Unsigned(u64),
    Signed(i64),
    /// Pointers and handles, shown as `0x...`.
    Hex(u64),
    Float(f64),
    Text(String),
    Flag(bool),
}

pub(crate) type Args = Vec<(&'static str, Value)>;

/// An arrow between two slices: `Out` on the API call that submitted device tasks, `In` on
/// each of its tasks, with the same id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    Out(u64),
    In(u64),
}

/// A span of time on a track; `end` None for a call or range that never ended.
#[derive(Debug)]
pub(crate) struct Slice<'a> {
    /// The table it comes from.
    pub cat: &'static str,
    pub name: &'a str,
    pub start: u64,
    pub end: Option<u64>,
    pub args: Args,
    pub flow: Option<Flow>,
}

/// A timeline file being written. Tracks are named by the sink on first use.
pub(crate) trait Sink {
    fn slice(&mut self, track: &Track, slice: Slice) -> Result<()>;
    /// A point in time: a mark, a critical event.
    fn instant(
        &mut self,
        track: &Track,
        cat: &'static str,
        name: &str,
        ts: u64,
        args: Args,
    ) -> Result<()>;
    fn counter(&mut self, track: &Track, ts: u64, value: f64) -> Result<()>;
}

/// The flow id joining API call `correlation_id` of process `pid` of host `host` to its
/// tasks: correlation ids are unique within a session, not across the sessions and hosts
/// a dataset may combine, so the id mixes all three (64 bits: a collision needs ~4e9
/// calls).
pub(crate) fn flow_id(host: usize, pid: u32, correlation_id: u64) -> u64 {
    let mut hasher = std::hash::DefaultHasher::new();
    (host, pid, correlation_id).hash(&mut hasher);
    hasher.finish()
}

/// Streams every table of `dataset` into `sink`, with a progress bar over the rows when
/// `progress` is set.
pub(crate) fn walk(dataset: &Dataset, sink: &mut dyn Sink, progress: bool) -> Result<Summary> {
    let mut w = Walker {
        hosts: dataset.hosts.iter().map(String::as_str).collect(),
        sink,
        bar: Bar::new("exporting", dataset.rows(), progress),
        summary: Summary::default(),
    };
    // Before the API calls: a range and its mstxRangeStartA call start at the same ns, and
    // viewers that nest them on one thread nest the one that comes first outermost.
    w.markers(dataset.table("marker"))?;
    w.spans(dataset.table("api"), &API)?;
    w.spans(dataset.table("op"), &OPERATORS)?;
    for table in &DEVICE_TABLES {
        w.device_tasks(dataset.table(table.name), table)?;
    }
    w.copy_bandwidth(dataset.table("memcpy"))?;
    w.memory(dataset.table("memory"))?;
    w.critical_events(dataset.table("critical_event"))?;
    w.bar.finish();
    Ok(w.summary)
}

struct Walker<'d, 's> {
    hosts: Vec<&'d str>,
    sink: &'s mut dyn Sink,
    bar: Bar,
    summary: Summary,
}

impl Walker<'_, '_> {
    /// Position of `host` in the dataset's hosts (every row's host is one of them).
    fn host(&self, host: &str) -> usize {
        self.hosts.binary_search(&host).unwrap_or(0)
    }

    /// Batches of `columns` of `table`, with the bar advanced past each.
    fn each(
        &mut self,
        table: &Table,
        columns: &[&str],
        mut f: impl FnMut(&mut Self, &Batch) -> Result<()>,
    ) -> Result<()> {
        for batch in table.scan(columns)? {
            let batch = batch?;
            f(self, &batch)?;
            self.bar.advance(batch.rows() as u64);
        }
        Ok(())
    }

    /// mstx ranges as spans and marks as instants, on the track of the thread that marked
    /// or started them.
    fn markers(&mut self, t: &Table) -> Result<()> {
        let columns = ["pid", "tid", "kind", "message", "start_ns", "end_ns"];
        let args = ArgSpec::new(t, MARKER_ARGS);
        self.each(t, &[&columns[..], &args.columns()].concat(), |w, b| {
            let host = w.host(b.host);
            let (pids, tids) = (b.u64s("pid")?, b.u64s("tid")?);
            let (kinds, messages) = (b.text("kind")?, b.text("message")?);
            let (starts, ends) = (b.u64s("start_ns")?, b.u64s("end_ns")?);
            let values = args.read(b)?;
            for i in 0..b.rows() {
                let track = Track::Mstx {
                    host,
                    pid: narrow(pids[i]),
                    tid: narrow(tids[i]),
                };
                let (name, start) = (messages.get(i).unwrap_or(""), starts[i].unwrap_or(0));
                if kinds.get(i) == Some(MarkerKind::Mark.as_str()) {
                    w.sink
                        .instant(&track, "marker", name, start, values.of(i))?;
                } else {
                    let slice = Slice {
                        cat: "marker",
                        name,
                        start,
                        end: ends[i],
                        args: values.of(i),
                        flow: None,
                    };
                    w.sink.slice(&track, slice)?;
                }
            }
            Ok(())
        })
    }

    /// Host-side calls as spans on their thread's track. Within a batch, calls are drawn
    /// by start time, the outer of two that start together first (viewers nest spans by
    /// the order they come in).
    fn spans(&mut self, t: &Table, spec: &SpanTable) -> Result<()> {
        let columns = ["pid", "tid", "name", "start_ns", "end_ns", "correlation_id"];
        if let Some(missing) = columns.iter().find(|c| t.rows() > 0 && !t.has_column(c)) {
            // A table of another schema version than this build knows: the rest still shows.
            eprintln!(
                "npu-bpftrace: left out table {}: it has no column `{missing}`",
                spec.name
            );
            return Ok(());
        }
        let outermost = t.has_column("parent_correlation_id");
        let args = ArgSpec::new(t, spec.args);
        let mut scanned = [&columns[..], &args.columns()].concat();
        if outermost {
            scanned.push("parent_correlation_id");
        }
        self.each(t, &scanned, |w, b| {
            let host = w.host(b.host);
            let (pids, tids, names) = (b.u64s("pid")?, b.u64s("tid")?, b.text("name")?);
            let (starts, ends) = (b.u64s("start_ns")?, b.u64s("end_ns")?);
            let ids = b.u64s("correlation_id")?;
            let parents = if outermost {
                b.u64s("parent_correlation_id")?
            } else {
                vec![None; b.rows()]
            };
            let values = args.read(b)?;
            let mut order: Vec<usize> = (0..b.rows()).collect();
            order.sort_by_key(|&i| (starts[i], std::cmp::Reverse(ends[i].unwrap_or(u64::MAX))));
            for i in order {
                let (pid, tid) = (narrow(pids[i]), narrow(tids[i]));
                let track = (spec.track)(host, pid, tid);
                // Device tasks carry the correlation id of the outermost call.
                let flow = (spec.flows && parents[i].is_none())
                    .then(|| Flow::Out(flow_id(host, pid, ids[i].unwrap_or(0))));
                let slice = Slice {
                    cat: spec.name,
                    name: names.get(i).unwrap_or(""),
                    start: starts[i].unwrap_or(0),
                    end: ends[i],
                    args: values.of(i),
                    flow,
                };
                w.sink.slice(&track, slice)?;
            }
            Ok(())
        })
    }

    /// Device tasks as spans on their stream (collectives on their communicator), each
    /// with an arrow from the API call that submitted it. Tasks without device times are
    /// counted, not drawn.
    fn device_tasks(&mut self, t: &Table, table: &DeviceTable) -> Result<()> {
        let columns = [
            "pid",
            "correlation_id",
            "device_id",
            "stream_id",
            "start_ns",
            "end_ns",
        ];
        let args = ArgSpec::new(t, &[TASK_ARGS, table.args].concat());
        let scanned = [&columns[..], table.columns, &args.columns()].concat();
        self.each(t, &scanned, |w, b| {
            let host = w.host(b.host);
            let (pids, ids) = (b.u64s("pid")?, b.u64s("correlation_id")?);
            let (devices, streams) = (b.u64s("device_id")?, b.u64s("stream_id")?);
            let (starts, ends) = (b.u64s("start_ns")?, b.u64s("end_ns")?);
            let names = (table.names)(b)?;
            let tracks = (table.tracks)(b, host)?;
            let values = args.read(b)?;
            for i in 0..b.rows() {
                let (Some(start), Some(end)) = (starts[i], ends[i]) else {
                    *w.summary.skipped_tasks.entry(table.name).or_default() += 1;
                    continue;
                };
                let track = tracks[i].clone().unwrap_or(Track::Stream {
                    host,
                    device: narrow(devices[i]),
                    stream: narrow(streams[i]),
                });
                let flow = flow_id(host, narrow(pids[i]), ids[i].unwrap_or(0));
                let slice = Slice {
                    cat: table.name,
                    name: &names[i],
                    start,
                    end: Some(end),
                    args: values.of(i),
                    flow: Some(Flow::In(flow)),
                };
                w.sink.slice(&track, slice)?;
            }
            Ok(())
        })
    }

    /// Achieved copy bandwidth per device stream: the copy's GB/s while it runs, 0 after.
    /// Copies on one stream run one after another, so the counter of a stream is exact.
    fn copy_bandwidth(&mut self, t: &Table) -> Result<()> {
        let columns = ["device_id", "stream_id", "start_ns", "end_ns", "bytes"];
        for batch in t.scan(&columns)? {
            let b = batch?;
            let host = self.host(b.host);
            let (devices, streams) = (b.u64s("device_id")?, b.u64s("stream_id")?);
            let (starts, ends, bytes) = (b.u64s("start_ns")?, b.u64s("end_ns")?, b.u64s("bytes")?);
            for i in 0..b.rows() {
                let (Some(start), Some(end)) = (starts[i], ends[i]) else {
                    continue;
                };
                let Some(gbps) = tracer_schema::rows::bandwidth_gbps(
                    bytes[i].unwrap_or(0),
                    end.saturating_sub(start),
                ) else {
                    continue;
                };
                let track = Track::Counter {
                    owner: Owner::Device {
                        host,
                        device: narrow(devices[i]),
                    },
                    name: format!("stream {} copy bandwidth", narrow(streams[i])),
                    unit: Unit::GigabytesPerSecond,
                };
                self.sink.counter(&track, start, gbps)?;
                self.sink.counter(&track, end, 0.0)?;
            }
        }
        Ok(())
    }

    /// Memory in use per process as counters, one per device (and one for pinned host
    /// memory): each allocation adds its bytes when its call returns, each release
    /// subtracts them. Failed calls and releases of allocations made before tracing (their
    /// size is unknown) change nothing. Rows are in roughly the order the calls returned;
    /// a window of [`REORDER_NS`] puts them in order before they are summed.
    fn memory(&mut self, t: &Table) -> Result<()> {
        let columns = [
            "pid",
            "operation",
            "memory_kind",
            "bytes",
            "device_id",
            "end_ns",
            "return_value",
        ];
        let mut window = Reorder::default();
        let mut in_use: HashMap<Track, u64> = HashMap::new();
        let mut last_host = None;
        for batch in t.scan(&columns)? {
            let b = batch?;
            let host = self.host(b.host);
            if last_host != Some(host) {
                // Hosts' clocks are unrelated: one host's changes are summed before the next.
                self.drain(&mut window, &mut in_use, None)?;
                last_host = Some(host);
            }
            let (pids, operations) = (b.u64s("pid")?, b.text("operation")?);
            let (kinds, bytes) = (b.text("memory_kind")?, b.u64s("bytes")?);
            let (devices, ends) = (b.i64s("device_id")?, b.u64s("end_ns")?);
            let returns = b.i64s("return_value")?;
            for i in 0..b.rows() {
                let Some(size) = bytes[i].filter(|_| returns[i] == Some(0)) else {
                    continue;
                };
                let track = Track::Counter {
                    owner: Owner::Process {
                        host,
                        pid: narrow(pids[i]),
                    },
                    name: counter_name(kinds.get(i), devices[i]),
                    unit: Unit::Bytes,
                };
                let allocation = operations.get(i) == Some(MemoryOperation::Allocation.as_str());
                let delta = if allocation {
                    i128::from(size)
                } else {
                    -i128::from(size)
                };
                window.push(ends[i].unwrap_or(0), track, delta);
            }
            let newest = window.newest;
            self.drain(&mut window, &mut in_use, newest.checked_sub(REORDER_NS))?;
            self.bar.advance(b.rows() as u64);
        }
        self.drain(&mut window, &mut in_use, None)
    }

    /// Sums and draws the memory changes of `window` up to `before` (all of them: None).
    fn drain(
        &mut self,
        window: &mut Reorder,
        in_use: &mut HashMap<Track, u64>,
        before: Option<u64>,
    ) -> Result<()> {
        while let Some((ts, track, delta)) = window.pop(before) {
            let total = in_use.entry(track.clone()).or_default();
            *total = if delta >= 0 {
                total.saturating_add(delta.unsigned_abs() as u64)
            } else {
                total.saturating_sub(delta.unsigned_abs() as u64)
            };
            let value = *total as f64;
            self.sink.counter(&track, ts, value)?;
        }
        Ok(())
    }

    /// Critical events as instants across the whole timeline, named `<kind>: <message>`.
    fn critical_events(&mut self, t: &Table) -> Result<()> {
        let columns = ["ts_ns", "kind", "message"];
        let args = ArgSpec::new(t, EVENT_ARGS);
        self.each(t, &[&columns[..], &args.columns()].concat(), |w, b| {
            let (times, kinds, messages) = (b.u64s("ts_ns")?, b.text("kind")?, b.text("message")?);
            let values = args.read(b)?;
            for (i, ts) in times.into_iter().enumerate() {
                let kind = kinds.get(i).unwrap_or("");
                let name = format!("{kind}: {}", messages.get(i).unwrap_or(""));
                let mut args = values.of(i);
                args.push(("host", Value::Text(b.host.to_owned())));
                let ts = ts.unwrap_or(0);
                w.sink
                    .instant(&Track::Global, "critical_event", &name, ts, args)?;
            }
            Ok(())
        })
    }
}

/// How far back in time (ns) a memory change may come after a later one and still be
/// summed in order: the agent writes rows within about a second of the call's return.
const REORDER_NS: u64 = 5_000_000_000;

/// Memory changes ordered by time, oldest first.
#[derive(Default)]
struct Reorder {
    heap: BinaryHeap<std::cmp::Reverse<(u64, u64, TrackKey)>>,
    tracks: HashMap<TrackKey, Track>,
    keys: HashMap<Track, TrackKey>,
    deltas: HashMap<u64, i128>,
    seq: u64,
    newest: u64,
}

type TrackKey = usize;

impl Reorder {
    fn push(&mut self, ts: u64, track: Track, delta: i128) {
        let next = self.keys.len();
        let key = *self.keys.entry(track.clone()).or_insert(next);
        self.tracks.entry(key).or_insert(track);
        // The sequence number keeps changes at the same ns in the order they came.
        self.seq += 1;
        self.deltas.insert(self.seq, delta);
        self.heap.push(std::cmp::Reverse((ts, self.seq, key)));
        self.newest = self.newest.max(ts);
    }

    /// The oldest change, if it is before `before` (any: None).
    fn pop(&mut self, before: Option<u64>) -> Option<(u64, Track, i128)> {
        let std::cmp::Reverse((ts, seq, key)) = *self.heap.peek()?;
        if before.is_some_and(|before| ts >= before) {
            return None;
        }
        self.heap.pop();
        let delta = self.deltas.remove(&seq).unwrap_or(0);
        Some((ts, self.tracks.get(&key)?.clone(), delta))
    }
}

/// `NPU <id> memory in use`, or `pinned host memory in use`.
fn counter_name(kind: Option<&str>, device: Option<i64>) -> String {
    match (kind, device) {
        (Some(kind), _) if kind == MemoryKind::Host.as_str() => "pinned host memory in use".into(),
        (_, Some(device)) => format!("NPU {device} memory in use"),
        (_, None) => "NPU memory in use".into(),
    }
}

/// Pids, tids, device and stream ids are 32-bit in the schema.
fn narrow(v: Option<u64>) -> u32 {
    v.and_then(|v| u32::try_from(v).ok()).unwrap_or(0)
}

/// How a column is shown in an event's args.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    Unsigned,
    Signed,
    Hex,
    Float,
    Text,
    Flag,
}

/// The arg columns of a table that it has.
struct ArgSpec(Vec<(&'static str, Kind)>);

impl ArgSpec {
    fn new(t: &Table, columns: &[(&'static str, Kind)]) -> Self {
        Self(
            columns
                .iter()
                .copied()
                .filter(|(name, _)| t.has_column(name))
                .collect(),
        )
    }

    fn columns(&self) -> Vec<&'static str> {
        self.0.iter().map(|(name, _)| *name).collect()
    }

    fn read(&self, b: &Batch) -> Result<ArgColumns> {
        let columns = self
            .0
            .iter()
            .map(|&(name, kind)| {
                let column = match kind {
                    Kind::Unsigned => Column::Unsigned(b.u64s(name)?),
                    Kind::Signed => Column::Signed(b.i64s(name)?),
                    Kind::Hex => Column::Hex(b.u64s(name)?),
                    Kind::Float => Column::Float(b.f64s(name)?),
                    Kind::Text => Column::Text(b.text(name)?),
                    Kind::Flag => Column::Flag(b.bools(name)?),
                };
                Ok((name, column))
            })
            .collect::<Result<_>>()?;
        Ok(ArgColumns(columns))
    }
}

enum Column {
    Unsigned(Vec<Option<u64>>),
    Signed(Vec<Option<i64>>),
    Hex(Vec<Option<u64>>),
    Float(Vec<Option<f64>>),
    Text(Text),
    Flag(Vec<Option<bool>>),
}

impl Column {
    fn get(&self, i: usize) -> Option<Value> {
        match self {
            Self::Unsigned(v) => v[i].map(Value::Unsigned),
            Self::Signed(v) => v[i].map(Value::Signed),
            Self::Hex(v) => v[i].map(Value::Hex),
            Self::Float(v) => v[i].map(Value::Float),
            Self::Text(v) => v.get(i).map(|s| Value::Text(s.to_owned())),
            Self::Flag(v) => v[i].map(Value::Flag),
        }
    }
}

/// The arg columns of one batch.
struct ArgColumns(Vec<(&'static str, Column)>);

impl ArgColumns {
    /// Row `i`'s non-null values.
    fn of(&self, i: usize) -> Args {
        self.0
            .iter()
            .filter_map(|(name, column)| Some((*name, column.get(i)?)))
            .collect()
    }
}

/// A table of host-side spans (API calls, operators): one span per row on a thread.
pub(crate) struct SpanTable {
    name: &'static str,
    /// The track of thread `tid` of process `pid` of host `host`.
    track: fn(usize, u32, u32) -> Track,
    /// Outermost spans are the sources of the arrows to device tasks.
    flows: bool,
    args: &'static [(&'static str, Kind)],
}

const API: SpanTable = SpanTable {
    name: "api",
    track: |host, pid, tid| Track::Thread { host, pid, tid },
    flows: true,
    args: &[
        ("correlation_id", Kind::Unsigned),
        ("parent_correlation_id", Kind::Unsigned),
        ("domain", Kind::Text),
        ("return_value", Kind::Signed),
        ("device_id", Kind::Signed),
        ("stream", Kind::Hex),
        ("bytes", Kind::Unsigned),
        ("count", Kind::Unsigned),
        ("memcpy_kind", Kind::Text),
        ("address", Kind::Hex),
        ("src_address", Kind::Hex),
        ("value", Kind::Signed),
        ("block_dim", Kind::Unsigned),
        ("handle", Kind::Hex),
        ("kernel_name", Kind::Text),
        ("data_type", Kind::Text),
        ("reduce_op", Kind::Text),
        ("rank", Kind::Unsigned),
        ("message", Kind::Text),
        ("range_id", Kind::Unsigned),
    ],
};

/// The `op` table (operator calls), where the dataset has one: its columns are read when
/// present.
const OPERATORS: SpanTable = SpanTable {
    name: "op",
    track: |host, pid, tid| Track::Operators { host, pid, tid },
    flows: false,
    args: &[
        ("correlation_id", Kind::Unsigned),
        ("kind", Kind::Text),
        ("api_name", Kind::Text),
        ("library", Kind::Text),
        ("workspace_bytes", Kind::Unsigned),
        ("executor", Kind::Hex),
        ("stream", Kind::Hex),
        ("return_value", Kind::Signed),
    ],
};

const MARKER_ARGS: &[(&str, Kind)] = &[
    ("correlation_id", Kind::Unsigned),
    ("domain", Kind::Text),
    ("range_id", Kind::Unsigned),
    ("end_tid", Kind::Unsigned),
    ("stream", Kind::Hex),
];

/// The device task columns (docs/schema.md) that every device table puts in its args;
/// `pid` and `tid` say which process and thread submitted the task.
const TASK_ARGS: &[(&str, Kind)] = &[
    ("correlation_id", Kind::Unsigned),
    ("task_id", Kind::Unsigned),
    ("stream_id", Kind::Unsigned),
    ("status", Kind::Unsigned),
    ("pid", Kind::Unsigned),
    ("tid", Kind::Unsigned),
    // The operator a task was launched in, where the dataset records it.
    ("op_correlation_id", Kind::Unsigned),
    ("op_name", Kind::Text),
];

const EVENT_ARGS: &[(&str, Kind)] = &[
    ("kind", Kind::Text),
    ("severity", Kind::Text),
    ("count", Kind::Unsigned),
    ("message", Kind::Text),
    ("pid", Kind::Unsigned),
    ("tid", Kind::Unsigned),
    ("device_id", Kind::Unsigned),
    ("correlation_id", Kind::Unsigned),
];

/// A table of device tasks: how its tasks are named and placed, and which of its columns
/// go into args.
pub(crate) struct DeviceTable {
    pub name: &'static str,
    /// Columns `names` and `tracks` read.
    columns: &'static [&'static str],
    names: fn(&Batch) -> Result<Vec<String>>,
    /// A track per row other than its stream (None: the stream).
    tracks: fn(&Batch, usize) -> Result<Vec<Option<Track>>>,
    args: &'static [(&'static str, Kind)],
}

pub(crate) const DEVICE_TABLES: [DeviceTable; 5] = [
    DeviceTable {
        name: "kernel",
        columns: &["name"],
        names: kernel_names,
        tracks: on_streams,
        args: &[
            ("kernel_type", Kind::Text),
            ("block_dim", Kind::Unsigned),
            ("api_name", Kind::Text),
        ],
    },
    DeviceTable {
        name: "memcpy",
        columns: &["copy_kind", "bytes"],
        names: memcpy_names,
        tracks: on_streams,
        args: &[
            ("copy_kind", Kind::Text),
            ("bytes", Kind::Unsigned),
            ("is_async", Kind::Flag),
            ("bandwidth_gbps", Kind::Float),
            ("api_name", Kind::Text),
        ],
    },
    DeviceTable {
        name: "memset",
        columns: &["bytes"],
        names: memset_names,
        tracks: on_streams,
        args: &[
            ("value", Kind::Unsigned),
            ("bytes", Kind::Unsigned),
            ("is_async", Kind::Flag),
            ("api_name", Kind::Text),
        ],
    },
    DeviceTable {
        name: "hccl",
        columns: &["name", "comm_name", "comm", "rank"],
        names: hccl_names,
        tracks: on_communicators,
        args: &[
            ("comm_name", Kind::Text),
            ("comm", Kind::Hex),
            ("rank", Kind::Unsigned),
            ("world_size", Kind::Unsigned),
            ("data_type", Kind::Text),
            ("count", Kind::Unsigned),
            ("bytes", Kind::Unsigned),
            ("reduce_op", Kind::Text),
            ("peer", Kind::Unsigned),
            ("seq", Kind::Unsigned),
            ("bandwidth_gbps", Kind::Float),
        ],
    },
    DeviceTable {
        name: "sync",
        columns: &["kind"],
        names: sync_names,
        tracks: on_streams,
        args: &[("event", Kind::Hex), ("api_name", Kind::Text)],
    },
];

fn on_streams(b: &Batch, _: usize) -> Result<Vec<Option<Track>>> {
    Ok(vec![None; b.rows()])
}

/// Collectives on the track of their communicator and rank on their device.
fn on_communicators(b: &Batch, host: usize) -> Result<Vec<Option<Track>>> {
    let (names, comms) = (b.text("comm_name")?, b.u64s("comm")?);
    let (ranks, devices) = (b.u64s("rank")?, b.u64s("device_id")?);
    Ok((0..b.rows())
        .map(|i| {
            // Without a name, the handle tells communicators of one process apart.
            let comm = names.get(i).map_or_else(
                || format!("comm {:#x}", comms[i].unwrap_or(0)),
                str::to_owned,
            );
            Some(Track::Communicator {
                host,
                device: narrow(devices[i]),
                comm,
                rank: ranks[i].and_then(|r| u32::try_from(r).ok()),
            })
        })
        .collect())
}

fn kernel_names(b: &Batch) -> Result<Vec<String>> {
    let names = b.text("name")?;
    Ok((0..b.rows())
        .map(|i| names.get(i).unwrap_or("unnamed kernel").to_owned())
        .collect())
}

fn memcpy_names(b: &Batch) -> Result<Vec<String>> {
    let (kinds, bytes) = (b.text("copy_kind")?, b.u64s("bytes")?);
    Ok((0..b.rows())
        .map(|i| {
            let kind = kinds.get(i).unwrap_or("");
            format!("memcpy {kind} {}", human_bytes(bytes[i].unwrap_or(0)))
        })
        .collect())
}

fn memset_names(b: &Batch) -> Result<Vec<String>> {
    let bytes = b.u64s("bytes")?;
    Ok(bytes
        .into_iter()
        .map(|bytes| format!("memset {}", human_bytes(bytes.unwrap_or(0))))
        .collect())
}

fn hccl_names(b: &Batch) -> Result<Vec<String>> {
    let names = b.text("name")?;
    Ok((0..b.rows())
        .map(|i| names.get(i).unwrap_or("").to_owned())
        .collect())
}

/// `EVENT_RECORD`, `EVENT_WAIT`, ...: a wait's span is how long it held its stream.
fn sync_names(b: &Batch) -> Result<Vec<String>> {
    let kinds = b.text("kind")?;
    Ok((0..b.rows())
        .map(|i| kinds.get(i).unwrap_or("").to_owned())
        .collect())
}
