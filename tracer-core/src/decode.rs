//! Ring-buffer bytes to typed records. The BPF side writes `#[repr(C)]` structs from
//! `tracer-common`; anything short or of an unknown kind is rejected, never trusted.
use std::mem::size_of;

use tracer_common::{
    ApiEnter, ApiExit, BinaryPiece, ChannelData, OutScan, RecordHeader, RecordKind, TaskComplete,
    TaskSubmit, WindowEdge,
};

/// One record from the kernel.
#[derive(Debug, Clone, Copy)]
pub enum Record {
    Enter(ApiEnter),
    Exit(ApiExit),
    OutScan(OutScan),
    ThreadExit(RecordHeader),
    TaskComplete(TaskComplete),
    TaskSubmit(TaskSubmit),
}

impl Record {
    pub fn header(&self) -> &RecordHeader {
        match self {
            Self::Enter(e) => &e.header,
            Self::Exit(e) => &e.header,
            Self::OutScan(o) => &o.header,
            Self::ThreadExit(h) => h,
            Self::TaskComplete(t) => &t.header,
            Self::TaskSubmit(t) => &t.header,
        }
    }
}

/// A ring-buffer record: a fixed-size one, or a piece of profiling-channel bytes or of a
/// device binary (boxed and kept out of [`Record`], which would grow to their size).
#[derive(Debug, Clone)]
pub enum Decoded {
    Record(Record),
    Channel(Box<ChannelData>),
    Binary(Box<BinaryPiece>),
    /// A capture window opened or closed: for the agent's session metadata, not the
    /// correlator.
    Window(WindowEdge),
}

/// Why a record could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    Short { kind: u8, len: usize },
    UnknownKind(u8),
}

pub fn decode(bytes: &[u8]) -> Result<Decoded, DecodeError> {
    let kind = *bytes
        .first()
        .ok_or(DecodeError::Short { kind: 0, len: 0 })?;
    let record = match RecordKind::from_u8(kind).ok_or(DecodeError::UnknownKind(kind))? {
        RecordKind::ApiEnter => read::<ApiEnter>(bytes).map(Record::Enter),
        RecordKind::ApiExit => read::<ApiExit>(bytes).map(Record::Exit),
        RecordKind::OutScan => read::<OutScan>(bytes).map(Record::OutScan),
        RecordKind::ThreadExit => read::<RecordHeader>(bytes).map(Record::ThreadExit),
        RecordKind::TaskComplete => read::<TaskComplete>(bytes).map(Record::TaskComplete),
        RecordKind::TaskSubmit => read::<TaskSubmit>(bytes).map(Record::TaskSubmit),
        RecordKind::ChannelData => {
            return read::<ChannelData>(bytes).map(|piece| Decoded::Channel(Box::new(piece)));
        }
        RecordKind::BinaryPiece => {
            return read::<BinaryPiece>(bytes).map(|piece| Decoded::Binary(Box::new(piece)));
        }
        RecordKind::Window => return read::<WindowEdge>(bytes).map(Decoded::Window),
    };
    record.map(Decoded::Record)
}

/// A record the BPF programs write into the ring buffer, readable from its bytes.
///
/// # Safety
/// Implementors are `#[repr(C)]` structs of integers and integer arrays only (no padding
/// the compiler may assume anything about, no references, enums or bools), so that every
/// bit pattern of `size_of::<Self>()` bytes is a valid value.
pub unsafe trait WireRecord: Copy {}

// SAFETY: `tracer-common` declares each of these #[repr(C)] with integer fields and
// integer arrays only, padding made explicit as `_pad` fields.
unsafe impl WireRecord for RecordHeader {}
// SAFETY: as above.
unsafe impl WireRecord for ApiEnter {}
// SAFETY: as above.
unsafe impl WireRecord for ApiExit {}
// SAFETY: as above.
unsafe impl WireRecord for OutScan {}
// SAFETY: as above.
unsafe impl WireRecord for TaskComplete {}
// SAFETY: as above.
unsafe impl WireRecord for TaskSubmit {}
// SAFETY: as above.
unsafe impl WireRecord for ChannelData {}
// SAFETY: as above.
unsafe impl WireRecord for BinaryPiece {}
// SAFETY: as above.
unsafe impl WireRecord for WindowEdge {}

fn read<T: WireRecord>(bytes: &[u8]) -> Result<T, DecodeError> {
    if bytes.len() < size_of::<T>() {
        return Err(DecodeError::Short {
            kind: bytes[0],
            len: bytes.len(),
        });
    }
    // SAFETY: the length is checked, `read_unaligned` needs no alignment, and a
    // `WireRecord` is valid for any bit pattern.
    Ok(unsafe { bytes.as_ptr().cast::<T>().read_unaligned() })
}

/// The bytes of a record as the ring buffer carries them (for replays and tests).
pub fn record_bytes<T: WireRecord>(record: &T) -> &[u8] {
    // SAFETY: a `WireRecord` is plain integers with explicit padding, so all
    // `size_of::<T>()` bytes behind the reference are initialized.
    unsafe { std::slice::from_raw_parts((record as *const T).cast(), size_of::<T>()) }
}

/// The valid part of a captured C string.
pub fn text(enter: &ApiEnter) -> &[u8] {
    let len = (enter.text_len as usize).min(enter.text.len());
    &enter.text[..len]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_exit_and_rejects_garbage() {
        let exit = ApiExit {
            header: RecordHeader::new(RecordKind::ApiExit, 0, 0, 7, 8, 0),
            correlation_id: 42,
            ret: 3,
            ..Default::default()
        };
        let Ok(Decoded::Record(Record::Exit(got))) = decode(record_bytes(&exit)) else {
            panic!("exit record not decoded");
        };
        assert_eq!((got.correlation_id, got.ret, got.header.tid), (42, 3, 8));
        assert!(matches!(
            decode(&[]),
            Err(DecodeError::Short { kind: 0, len: 0 })
        ));
        assert!(matches!(
            decode(&[200, 0, 0]),
            Err(DecodeError::UnknownKind(200))
        ));
        assert!(matches!(
            decode(&record_bytes(&exit)[..10]),
            Err(DecodeError::Short { kind: 2, len: 10 })
        ));
    }
}
