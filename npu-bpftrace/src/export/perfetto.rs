//! Perfetto's native trace format: a `perfetto.protos.Trace`, the repeated `TracePacket`s of
//! one packet sequence, encoded with the types generated from Perfetto's own `.proto` files
//! (the `perfetto_protos` crate) and written packet by packet as the
//! [`timeline`] walks the tables.
//!
//! - Tracks are `TrackDescriptor` packets, written before their first event: a process
//!   descriptor per traced process (pid in the file: its pid, offset per host like the
//!   Chrome format's) and a thread descriptor per thread; a process descriptor per device
//!   (`NPU <id>`, pid [`super::chrome::DEVICE_PID`] + id) with a child track per
//!   stream and per communicator and rank; child tracks of a thread's process for its mstx
//!   ranges and its operators; counter tracks (memory in use, in bytes; copy bandwidth per
//!   stream, GB/s); a global track for critical events.
//! - Slices are `TYPE_SLICE_BEGIN` / `TYPE_SLICE_END` pairs (a call that never returned
//!   has no end), instants `TYPE_INSTANT`, counters `TYPE_COUNTER`. Timestamps are the
//!   traced host's CLOCK_MONOTONIC nanoseconds, exact.
//! - Names, categories and arg keys are interned (`InternedData`, sent with the first
//!   packet that uses them), slice names up to [`MAX_INTERNED_NAMES`] of them; instants'
//!   names (marks, critical events: often all different) are not. Args are debug
//!   annotations.
//! - Arrows: every outermost API call's begin carries `legacy_event.bind_id` with
//!   `FLOW_OUT`, and every device task it submitted the same id with `FLOW_IN`: Perfetto
//!   draws an arrow from the call to each of its tasks (`flow_ids` would chain the tasks one
//!   after another instead).
use std::{collections::HashMap, io::Write};

use anyhow::{Context, Result};
use perfetto_protos::{
    counter_descriptor::{CounterDescriptor, counter_descriptor::Unit as CounterUnit},
    debug_annotation::{DebugAnnotation, DebugAnnotationName},
    interned_data::InternedData,
    process_descriptor::ProcessDescriptor,
    thread_descriptor::ThreadDescriptor,
    trace_packet::{TracePacket, trace_packet::SequenceFlags},
    track_descriptor::TrackDescriptor,
    track_event::{
        EventCategory, EventName, TrackEvent,
        track_event::{LegacyEvent, Type as EventType, legacy_event::FlowDirection},
    },
};
use protobuf::{CodedOutputStream, EnumOrUnknown, MessageField};
use tracer_schema::dataset::Dataset;

use super::{
    Summary,
    chrome::{DEVICE_PID, HOST_STRIDE, communicator_name},
    timeline::{self, Args, Flow, Owner, Sink, Slice, Track, Unit, Value},
};

/// The one packet sequence of the file.
const SEQUENCE: u32 = 1;

/// Field number of `Trace.packet`.
const TRACE_PACKET: u32 = 1;

/// Event names interned at most: names beyond (mstx messages and critical events can all
/// differ) are written out in each event, so that memory stays bounded.
const MAX_INTERNED_NAMES: usize = 16_384;

/// Writes `dataset` to `out`; `progress` shows a progress bar on stderr.
pub fn write(dataset: &Dataset, mut out: impl Write, progress: bool) -> Result<Summary> {
    let mut stream = CodedOutputStream::new(&mut out);
    let mut w = Writer::new(&mut stream, dataset);
    w.start()?;
    let mut summary = timeline::walk(dataset, &mut w, progress)?;
    summary.events = w.packets;
    summary.processes = w.processes;
    summary.devices = w.devices;
    stream.flush().context("writing the trace")?;
    drop(stream);
    out.flush()?;
    Ok(summary)
}

/// What a process-level track (a traced process or a device) is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Process {
    Traced { host: usize, pid: u32 },
    Device { host: usize, device: u32 },
}

/// The file being written: the tracks already described and the names already interned.
struct Writer<'o, 'w, 'd> {
    out: &'o mut CodedOutputStream<'w>,
    hosts: Vec<&'d str>,
    /// Track uuids; 0 is never used.
    next_uuid: u64,
    process_tracks: HashMap<Process, u64>,
    tracks: HashMap<Track, u64>,
    names: HashMap<String, u64>,
    categories: HashMap<&'static str, u64>,
    keys: HashMap<&'static str, u64>,
    packets: u64,
    processes: usize,
    devices: usize,
}

impl<'o, 'w, 'd> Writer<'o, 'w, 'd> {
    fn new(out: &'o mut CodedOutputStream<'w>, dataset: &'d Dataset) -> Self {
        Self {
            out,
            hosts: dataset.hosts.iter().map(String::as_str).collect(),
            next_uuid: 1,
            process_tracks: HashMap::new(),
            tracks: HashMap::new(),
            names: HashMap::new(),
            categories: HashMap::new(),
            keys: HashMap::new(),
            packets: 0,
            processes: 0,
            devices: 0,
        }
    }

    /// The first packet: it clears the sequence's interned state.
    fn start(&mut self) -> Result<()> {
        let mut packet = TracePacket::new();
        packet.set_sequence_flags(SequenceFlags::SEQ_INCREMENTAL_STATE_CLEARED as u32);
        self.emit(packet)
    }

    fn emit(&mut self, mut packet: TracePacket) -> Result<()> {
        packet.set_trusted_packet_sequence_id(SEQUENCE);
        self.out
            .write_message(TRACE_PACKET, &packet)
            .context("writing a trace packet")?;
        self.packets += 1;
        Ok(())
    }

    fn uuid(&mut self) -> u64 {
        self.next_uuid += 1;
        self.next_uuid
    }

    /// ` on <host>` when the dataset has several hosts, for track names.
    fn on(&self, host: usize) -> String {
        match self.hosts.get(host) {
            Some(name) if self.hosts.len() > 1 => format!(" on {name}"),
            _ => String::new(),
        }
    }

    /// The pid in the file of a process-level track: hosts apart like in the Chrome format.
    fn file_pid(process: Process) -> i32 {
        let pid = match process {
            Process::Traced { host, pid } => host as u64 * HOST_STRIDE + u64::from(pid),
            Process::Device { host, device } => {
                host as u64 * HOST_STRIDE + DEVICE_PID + u64::from(device)
            }
        };
        // Pids in the file stay below 2^31 for datasets of up to 255 hosts.
        i32::try_from(pid).unwrap_or(i32::MAX)
    }

    /// The uuid of `process`'s track, described on first use.
    fn process(&mut self, process: Process) -> Result<u64> {
        if let Some(&uuid) = self.process_tracks.get(&process) {
            return Ok(uuid);
        }
        let uuid = self.uuid();
        self.process_tracks.insert(process, uuid);
        let name = match process {
            Process::Traced { host, pid } => {
                self.processes += 1;
                format!("pid {pid}{}", self.on(host))
            }
            Process::Device { host, device } => {
                self.devices += 1;
                format!("NPU {device}{}", self.on(host))
            }
        };
        let mut descriptor = TrackDescriptor::new();
        descriptor.set_uuid(uuid);
        descriptor.process = MessageField::some(ProcessDescriptor {
            pid: Some(Self::file_pid(process)),
            process_name: Some(name),
            ..ProcessDescriptor::default()
        });
        self.describe(descriptor)?;
        Ok(uuid)
    }

    fn describe(&mut self, descriptor: TrackDescriptor) -> Result<()> {
        let mut packet = TracePacket::new();
        packet.set_track_descriptor(descriptor);
        self.emit(packet)
    }

    /// The uuid of `track`, described (with its process) on first use.
    fn track(&mut self, track: &Track) -> Result<u64> {
        if let Some(&uuid) = self.tracks.get(track) {
            return Ok(uuid);
        }
        let descriptor = self.descriptor(track)?;
        let uuid = descriptor.uuid();
        self.tracks.insert(track.clone(), uuid);
        self.describe(descriptor)?;
        Ok(uuid)
    }

    /// A new descriptor for `track`.
    fn descriptor(&mut self, track: &Track) -> Result<TrackDescriptor> {
        let mut d = TrackDescriptor::new();
        match track {
            Track::Thread { host, pid, tid } => {
                let process = Process::Traced {
                    host: *host,
                    pid: *pid,
                };
                d.set_parent_uuid(self.process(process)?);
                // Thread ids of other hosts are offset like their pids, to stay apart.
                let file_tid = *host as u64 * HOST_STRIDE + u64::from(*tid);
                d.thread = MessageField::some(ThreadDescriptor {
                    pid: Some(Self::file_pid(process)),
                    tid: Some(i32::try_from(file_tid).unwrap_or(i32::MAX)),
                    thread_name: Some(format!("thread {tid}")),
                    ..ThreadDescriptor::default()
                });
            }
            Track::Mstx { host, pid, tid } | Track::Operators { host, pid, tid } => {
                let process = Process::Traced {
                    host: *host,
                    pid: *pid,
                };
                d.set_parent_uuid(self.process(process)?);
                let what = if matches!(track, Track::Mstx { .. }) {
                    "mstx"
                } else {
                    "operators"
                };
                d.set_name(format!("{what} of thread {tid}"));
            }
            Track::Stream {
                host,
                device,
                stream,
            } => {
                let process = Process::Device {
                    host: *host,
                    device: *device,
                };
                d.set_parent_uuid(self.process(process)?);
                d.set_name(format!("stream {stream}"));
            }
            Track::Communicator {
                host,
                device,
                comm,
                rank,
            } => {
                let process = Process::Device {
                    host: *host,
                    device: *device,
                };
                d.set_parent_uuid(self.process(process)?);
                d.set_name(format!("HCCL {}", communicator_name(comm, *rank)));
            }
            Track::Counter { owner, name, unit } => {
                let process = match *owner {
                    Owner::Process { host, pid } => Process::Traced { host, pid },
                    Owner::Device { host, device } => Process::Device { host, device },
                };
                d.set_parent_uuid(self.process(process)?);
                d.set_name(name.clone());
                let mut counter = CounterDescriptor::new();
                match unit {
                    Unit::Bytes => {
                        counter.unit = Some(EnumOrUnknown::new(CounterUnit::UNIT_SIZE_BYTES))
                    }
                    Unit::GigabytesPerSecond => counter.unit_name = Some("GB/s".to_owned()),
                }
                d.counter = MessageField::some(counter);
            }
            Track::Global => d.set_name("critical events".to_owned()),
        }
        d.set_uuid(self.uuid());
        Ok(d)
    }

    /// A track event at `ts` on `track`, with its category and arg keys interned, and its
    /// name too unless it is an instant's.
    fn event(
        &mut self,
        track: &Track,
        kind: EventType,
        ts: u64,
        named: Option<(&'static str, &str)>,
        args: Args,
    ) -> Result<(TracePacket, TrackEvent)> {
        let uuid = self.track(track)?;
        let mut interned = InternedData::new();
        let mut event = TrackEvent::new();
        event.set_type(kind);
        event.set_track_uuid(uuid);
        if let Some((cat, name)) = named {
            event.category_iids.push(self.category(cat, &mut interned));
            let iid = (kind != EventType::TYPE_INSTANT)
                .then(|| self.name(name, &mut interned))
                .flatten();
            match iid {
                Some(iid) => event.set_name_iid(iid),
                None => event.set_name(name.to_owned()),
            }
        }
        for (key, value) in args {
            let mut annotation = DebugAnnotation::new();
            annotation.set_name_iid(self.key(key, &mut interned));
            match value {
                Value::Unsigned(v) => annotation.set_uint_value(v),
                Value::Signed(v) => annotation.set_int_value(v),
                Value::Hex(v) => annotation.set_string_value(format!("{v:#x}")),
                Value::Float(v) => annotation.set_double_value(v),
                Value::Text(v) => annotation.set_string_value(v),
                Value::Flag(v) => annotation.set_bool_value(v),
            }
            event.debug_annotations.push(annotation);
        }
        let mut packet = TracePacket::new();
        packet.set_timestamp(ts);
        packet.set_sequence_flags(SequenceFlags::SEQ_NEEDS_INCREMENTAL_STATE as u32);
        if interned != InternedData::new() {
            packet.interned_data = MessageField::some(interned);
        }
        Ok((packet, event))
    }

    fn send(&mut self, mut packet: TracePacket, event: TrackEvent) -> Result<()> {
        packet.set_track_event(event);
        self.emit(packet)
    }

    /// The iid of event name `name`, interned in `interned` when new; None once
    /// [`MAX_INTERNED_NAMES`] are.
    fn name(&mut self, name: &str, interned: &mut InternedData) -> Option<u64> {
        if let Some(&iid) = self.names.get(name) {
            return Some(iid);
        }
        if self.names.len() >= MAX_INTERNED_NAMES {
            return None;
        }
        let iid = self.names.len() as u64 + 1;
        interned.event_names.push(EventName {
            iid: Some(iid),
            name: Some(name.to_owned()),
            ..EventName::default()
        });
        self.names.insert(name.to_owned(), iid);
        Some(iid)
    }

    fn category(&mut self, cat: &'static str, interned: &mut InternedData) -> u64 {
        let next = self.categories.len() as u64 + 1;
        *self.categories.entry(cat).or_insert_with(|| {
            interned.event_categories.push(EventCategory {
                iid: Some(next),
                name: Some(cat.to_owned()),
                ..EventCategory::default()
            });
            next
        })
    }

    fn key(&mut self, key: &'static str, interned: &mut InternedData) -> u64 {
        let next = self.keys.len() as u64 + 1;
        *self.keys.entry(key).or_insert_with(|| {
            interned.debug_annotation_names.push(DebugAnnotationName {
                iid: Some(next),
                name: Some(key.to_owned()),
                ..DebugAnnotationName::default()
            });
            next
        })
    }
}

impl Sink for Writer<'_, '_, '_> {
    fn slice(&mut self, track: &Track, slice: Slice) -> Result<()> {
        let named = Some((slice.cat, slice.name));
        let (packet, mut begin) = self.event(
            track,
            EventType::TYPE_SLICE_BEGIN,
            slice.start,
            named,
            slice.args,
        )?;
        if let Some(flow) = slice.flow {
            let (id, direction) = match flow {
                Flow::Out(id) => (id, FlowDirection::FLOW_OUT),
                Flow::In(id) => (id, FlowDirection::FLOW_IN),
            };
            let mut legacy = LegacyEvent::new();
            legacy.set_bind_id(id);
            legacy.set_flow_direction(direction);
            begin.legacy_event = MessageField::some(legacy);
        }
        self.send(packet, begin)?;
        let Some(end) = slice.end else {
            return Ok(());
        };
        let (packet, end) = self.event(track, EventType::TYPE_SLICE_END, end, None, Vec::new())?;
        self.send(packet, end)
    }

    fn instant(
        &mut self,
        track: &Track,
        cat: &'static str,
        name: &str,
        ts: u64,
        args: Args,
    ) -> Result<()> {
        let (packet, event) =
            self.event(track, EventType::TYPE_INSTANT, ts, Some((cat, name)), args)?;
        self.send(packet, event)
    }

    fn counter(&mut self, track: &Track, ts: u64, value: f64) -> Result<()> {
        let (packet, mut event) =
            self.event(track, EventType::TYPE_COUNTER, ts, None, Vec::new())?;
        event.set_double_counter_value(value);
        self.send(packet, event)
    }
}
