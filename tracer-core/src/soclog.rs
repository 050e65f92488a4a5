//! The driver profiling channel's device-side task records (`StarsSocLog`), as a reader
//! gets them from `prof_channel_read`: a byte stream of fixed-size records in which a
//! read may end inside a record. [`SocLogReader`] carries the partial record over to the
//! next read, as msPTI's channel reader does.
use tracer_catalog::{SOC_FUNC_BEGIN, SOC_FUNC_END, SOC_LOG, soc_log_ids};

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
    pub stream_id: u16,
    pub task_id: u16,
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
#[derive(Debug, Default)]
pub struct SocLogReader {
    partial: Vec<u8>,
    /// Records of other function types (FFTS+ subtasks), skipped.
    pub skipped: u64,
}

impl SocLogReader {
    /// The complete records in `partial ++ bytes`; keeps the tail of an incomplete one.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<SocRecord> {
        self.partial.extend_from_slice(bytes);
        let whole = self.partial.len() / SOC_LOG.record_size * SOC_LOG.record_size;
        let mut records = Vec::with_capacity(whole / SOC_LOG.record_size);
        for raw in self.partial[..whole].chunks_exact(SOC_LOG.record_size) {
            match parse(raw) {
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

/// A begin or end record; None for the other function types.
fn parse(raw: &[u8]) -> Option<SocRecord> {
    let u16_at = |at: usize| Some(u16::from_le_bytes(raw.get(at..at + 2)?.try_into().ok()?));
    let u64_at = |at: usize| Some(u64::from_le_bytes(raw.get(at..at + 8)?.try_into().ok()?));
    let edge = match (u16_at(SOC_LOG.func_type)? & 0x3f) as u8 {
        SOC_FUNC_BEGIN => SocEdge::Begin,
        SOC_FUNC_END => SocEdge::End,
        _ => return None,
    };
    let (stream_id, task_id) = soc_log_ids(u16_at(SOC_LOG.stream_id)?, u16_at(SOC_LOG.task_id)?);
    Some(SocRecord {
        edge,
        stream_id,
        task_id,
        cnt: u64_at(SOC_LOG.timestamp)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let mut reader = SocLogReader::default();
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

    #[test]
    fn encoded_ids_decode_as_mspti_does() {
        // Bit 12: the task's top three bits ride in the stream field.
        let r = parse(&record(0, (1 << 12) | 0xe000 | 7, 0x1234, 1)).unwrap();
        assert_eq!((r.stream_id, r.task_id), (7, 0xf234));
        // Bit 13: the low 12 bits of stream and task are swapped.
        let r = parse(&record(1, (1 << 13) | 0x0abc, 0x5007, 1)).unwrap();
        assert_eq!((r.stream_id, r.task_id), (7, 0x5abc));
    }
}
