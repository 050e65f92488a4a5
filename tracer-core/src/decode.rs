//! Ring-buffer bytes to typed records. The BPF side writes `#[repr(C)]` structs from
//! `tracer-common`; anything short or of an unknown kind is rejected, never trusted.
use std::mem::size_of;

use tracer_common::{ApiEnter, ApiExit, RecordHeader, RecordKind, TaskComplete};

/// One record from the kernel.
#[derive(Debug, Clone, Copy)]
pub enum Record {
    Enter(ApiEnter),
    Exit(ApiExit),
    ThreadExit(RecordHeader),
    TaskComplete(TaskComplete),
}

impl Record {
    pub fn header(&self) -> &RecordHeader {
        match self {
            Self::Enter(e) => &e.header,
            Self::Exit(e) => &e.header,
            Self::ThreadExit(h) => h,
            Self::TaskComplete(t) => &t.header,
        }
    }
}

/// Why a record could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    Short { kind: u8, len: usize },
    UnknownKind(u8),
}

pub fn decode(bytes: &[u8]) -> Result<Record, DecodeError> {
    let kind = *bytes
        .first()
        .ok_or(DecodeError::Short { kind: 0, len: 0 })?;
    match RecordKind::from_u8(kind).ok_or(DecodeError::UnknownKind(kind))? {
        RecordKind::ApiEnter => read::<ApiEnter>(bytes).map(Record::Enter),
        RecordKind::ApiExit => read::<ApiExit>(bytes).map(Record::Exit),
        RecordKind::ThreadExit => read::<RecordHeader>(bytes).map(Record::ThreadExit),
        RecordKind::TaskComplete => read::<TaskComplete>(bytes).map(Record::TaskComplete),
    }
}

fn read<T: Copy>(bytes: &[u8]) -> Result<T, DecodeError> {
    if bytes.len() < size_of::<T>() {
        return Err(DecodeError::Short {
            kind: bytes[0],
            len: bytes.len(),
        });
    }
    // SAFETY: length checked; T is a plain #[repr(C)] record valid for any bit pattern.
    Ok(unsafe { bytes.as_ptr().cast::<T>().read_unaligned() })
}

/// The valid part of a captured C string.
pub fn text(enter: &ApiEnter) -> &[u8] {
    let len = (enter.text_len as usize).min(enter.text.len());
    &enter.text[..len]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes_of<T>(value: &T) -> &[u8] {
        // SAFETY: viewing a plain struct as bytes.
        unsafe { std::slice::from_raw_parts((value as *const T).cast(), size_of::<T>()) }
    }

    #[test]
    fn decodes_exit_and_rejects_garbage() {
        let exit = ApiExit {
            header: RecordHeader::new(RecordKind::ApiExit, 0, 0, 7, 8, 0),
            correlation_id: 42,
            ret: 3,
            ..Default::default()
        };
        let Ok(Record::Exit(got)) = decode(bytes_of(&exit)) else {
            panic!("exit record not decoded");
        };
        assert_eq!((got.correlation_id, got.ret, got.header.tid), (42, 3, 8));
        assert!(matches!(
            decode(&[]),
            Err(DecodeError::Short { kind: 0, len: 0 })
        ));
        assert!(matches!(
            decode(&[9, 0, 0]),
            Err(DecodeError::UnknownKind(9))
        ));
        assert!(matches!(
            decode(&bytes_of(&exit)[..10]),
            Err(DecodeError::Short { kind: 2, len: 10 })
        ));
    }
}
