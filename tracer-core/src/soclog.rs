//! The driver profiling channel's device-side task records (`StarsSocLog` on STARS v100,
//! `StarsSocLogV6` on v2, laid out as the chip's [`SocLogLayout`] says), as a reader gets
//! them from `prof_channel_read`: a byte stream of fixed-size records in which a read may
//! end inside a record. [`SocLogReader`] carries the partial record over to the next read,
//! as msPTI's channel reader does.
use std::collections::HashMap;

use tracer_catalog::{SOC_FUNC_BEGIN, SOC_FUNC_END, SocLogIds, SocLogLayout, soc_log_ids};
use tracer_common::{CHANNEL_CHUNK, ChannelData};

/// Whether a record marks a task's start or its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SocEdge {
    Begin,
    End,
}

/// One task begin or end on a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocRecord {
    pub edge: SocEdge,
    /// 0 when the record names no stream (`StarsSocLogV6`).
    pub stream_id: u16,
    pub task_id: u32,
    /// Device system counter.
    pub cnt: u64,
}

/// Records of one device read at host time `read_ns` (CLOCK_MONOTONIC): every record in
/// it was written on the device before then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SocBatch {
    pub device: u32,
    pub read_ns: u64,
    pub records: Vec<SocRecord>,
}

/// Splits one device's channel byte stream into records.
#[derive(Debug)]
pub struct SocLogReader {
    layout: SocLogLayout,
    partial: Vec<u8>,
    /// Records of other function types (FFTS+ subtasks), skipped.
    pub skipped: u64,
}

impl SocLogReader {
    /// A reader of records laid out as `layout` says.
    pub fn new(layout: SocLogLayout) -> Self {
        Self {
            layout,
            partial: Vec::new(),
            skipped: 0,
        }
    }

    /// The complete records in `partial ++ bytes`; keeps the tail of an incomplete one.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<SocRecord> {
        self.partial.extend_from_slice(bytes);
        let size = self.layout.record_size.max(1);
        let whole = self.partial.len() / size * size;
        let mut records = Vec::with_capacity(whole / size);
        for raw in self.partial[..whole].chunks_exact(size) {
            match parse(&self.layout, raw) {
                Some(record) => records.push(record),
                None => self.skipped += 1,
            }
        }
        self.partial.drain(..whole);
        records
    }

    /// Bytes of an incomplete record still waiting for the rest.
    pub fn pending_bytes(&self) -> usize {
        self.partial.len()
    }
}

/// What other profilers read from the channels they own, copied by the BPF programs
/// (passive mode): each reader's byte stream of each device is split on its own, since a
/// read may end inside a record.
#[derive(Debug)]
pub struct PassiveChannels {
    layout: SocLogLayout,
    readers: HashMap<(u32, u32), SocLogReader>,
}

impl PassiveChannels {
    /// Channels whose records are laid out as `layout` says.
    pub fn new(layout: SocLogLayout) -> Self {
        Self {
            layout,
            readers: HashMap::new(),
        }
    }

    /// The complete records of a piece of a read (pieces of one read arrive in order).
    pub fn push(&mut self, piece: &ChannelData) -> SocBatch {
        let len = (piece.len as usize).min(CHANNEL_CHUNK);
        let reader = self
            .readers
            .entry((piece.header.pid, piece.device_id))
            .or_insert_with(|| SocLogReader::new(self.layout));
        SocBatch {
            device: piece.device_id,
            read_ns: piece.header.ts_ns,
            records: reader.push(&piece.data[..len]),
        }
    }
}

/// A begin or end record; None for the other function types.
fn parse(layout: &SocLogLayout, raw: &[u8]) -> Option<SocRecord> {
    let u16_at = |at: usize| Some(u16::from_le_bytes(raw.get(at..at + 2)?.try_into().ok()?));
    let u32_at = |at: usize| Some(u32::from_le_bytes(raw.get(at..at + 4)?.try_into().ok()?));
    let u64_at = |at: usize| Some(u64::from_le_bytes(raw.get(at..at + 8)?.try_into().ok()?));
    let edge = match (u16_at(layout.func_type)? & 0x3f) as u8 {
        SOC_FUNC_BEGIN => SocEdge::Begin,
        SOC_FUNC_END => SocEdge::End,
        _ => return None,
    };
    let (stream_id, task_id) = match layout.ids {
        SocLogIds::Encoded { stream_id, task_id } => {
            let (stream, task) = soc_log_ids(u16_at(stream_id)?, u16_at(task_id)?);
            (stream, u32::from(task))
        }
        SocLogIds::Task32 { task_id } => (0, u32_at(task_id)?),
    };
    Some(SocRecord {
        edge,
        stream_id,
        task_id,
        cnt: u64_at(layout.timestamp)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracer_catalog::{CHIP_910B, CHIP_950};

    fn record(func: u16, stream: u16, task: u16, cnt: u64) -> [u8; 64] {
        let mut raw = [0u8; 64];
        raw[0..2].copy_from_slice(&(func | (5 << 10)).to_le_bytes());
        raw[4..6].copy_from_slice(&stream.to_le_bytes());
        raw[6..8].copy_from_slice(&task.to_le_bytes());
        raw[8..16].copy_from_slice(&cnt.to_le_bytes());
        raw
    }

    #[test]
    fn records_split_across_reads_are_joined() {
        let mut bytes = Vec::new();
        bytes.extend(record(0, 3, 9, 100));
        bytes.extend(record(1, 3, 9, 150));
        bytes.extend(record(0x22, 3, 9, 160)); // an FFTS+ subtask record: skipped
        let mut reader = SocLogReader::new(CHIP_910B.soc_log);
        let first = reader.push(&bytes[..100]);
        assert_eq!(first.len(), 1);
        assert_eq!(reader.pending_bytes(), 36);
        let rest = reader.push(&bytes[100..]);
        assert_eq!(
            rest,
            [SocRecord {
                edge: SocEdge::End,
                stream_id: 3,
                task_id: 9,
                cnt: 150
            }]
        );
        assert_eq!((reader.skipped, reader.pending_bytes()), (1, 0));
    }

    fn piece(pid: u32, device: u32, bytes: &[u8]) -> ChannelData {
        let mut data = [0u8; CHANNEL_CHUNK];
        data[..bytes.len()].copy_from_slice(bytes);
        ChannelData {
            header: tracer_common::RecordHeader::new(
                tracer_common::RecordKind::ChannelData,
                0,
                0,
                pid,
                pid,
                5,
            ),
            device_id: device,
            len: bytes.len() as u32,
            offset: 0,
            _pad: 0,
            data,
        }
    }

    /// Two profilers' reads (or two devices) interleaved in the ring buffer do not mix
    /// their split records.
    #[test]
    fn passive_reads_are_split_per_reader_and_device() {
        let (a, b) = (record(0, 1, 2, 10), record(1, 4, 5, 20));
        let mut channels = PassiveChannels::new(CHIP_910B.soc_log);
        assert!(channels.push(&piece(7, 0, &a[..40])).records.is_empty());
        assert!(channels.push(&piece(8, 0, &b[..10])).records.is_empty());
        assert!(channels.push(&piece(7, 1, &b[..30])).records.is_empty());
        let first = channels.push(&piece(7, 0, &a[40..]));
        assert_eq!((first.device, first.read_ns), (0, 5));
        assert_eq!(first.records[0].cnt, 10);
        let second = channels.push(&piece(8, 0, &b[10..]));
        assert_eq!(second.records[0].task_id, 5);
    }

    #[test]
    fn encoded_ids_decode_as_mspti_does() {
        // Bit 12: the task's top three bits ride in the stream field.
        let v100 = &CHIP_910B.soc_log;
        let r = parse(v100, &record(0, (1 << 12) | 0xe000 | 7, 0x1234, 1)).unwrap();
        assert_eq!((r.stream_id, r.task_id), (7, 0xf234));
        // Bit 13: the low 12 bits of stream and task are swapped.
        let r = parse(v100, &record(1, (1 << 13) | 0x0abc, 0x5007, 1)).unwrap();
        assert_eq!((r.stream_id, r.task_id), (7, 0x5abc));
    }

    /// A 950 `StarsSocLogV6` record (msPTI channel_data.h): funcType:6 | cnt:4 | taskType:6
    /// @0, u32 taskId @4, u64 timestamp @8, accId:6 | acsqId:10 @18, 32 bytes.
    fn record_v6(func: u16, task: u32, cnt: u64) -> [u8; 32] {
        let mut raw = [0u8; 32];
        raw[0..2].copy_from_slice(&(func | (6 << 10)).to_le_bytes());
        raw[4..8].copy_from_slice(&task.to_le_bytes());
        raw[8..16].copy_from_slice(&cnt.to_le_bytes());
        raw[18..20].copy_from_slice(&(9u16 << 6).to_le_bytes());
        raw
    }

    /// 950 records: 32 bytes, the 32-bit task id as it is, no stream (0), split across
    /// reads like any other.
    #[test]
    fn v6_records_carry_a_32_bit_task_id_and_no_stream() {
        let mut bytes = Vec::new();
        bytes.extend(record_v6(0, 0x7fff_fffe, 100));
        bytes.extend(record_v6(1, 0x7fff_fffe, 150));
        bytes.extend(record_v6(0x22, 3, 160));
        let mut reader = SocLogReader::new(CHIP_950.soc_log);
        let first = reader.push(&bytes[..40]);
        assert_eq!(
            first,
            [SocRecord {
                edge: SocEdge::Begin,
                stream_id: 0,
                task_id: 0x7fff_fffe,
                cnt: 100
            }]
        );
        assert_eq!(reader.pending_bytes(), 8);
        let rest = reader.push(&bytes[40..]);
        assert_eq!(rest.len(), 1);
        assert_eq!(
            (rest[0].edge, rest[0].task_id, rest[0].cnt),
            (SocEdge::End, 0x7fff_fffe, 150)
        );
        assert_eq!((reader.skipped, reader.pending_bytes()), (1, 0));
    }
}
