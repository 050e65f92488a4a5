//! The device side of channel 50: the StarsSocLog record the hardware writes when a task begins
//! or ends.
//!
//! The stream and task ids are written in one of the three forms msPTI decodes
//! (`StarsCommon::GetStreamId/GetTaskId`, csrc/activity/ascend/channel/stars_common.cpp). The
//! public sources do not say which form the hardware uses for which task, so the simulator
//! uses all three, chosen by SQE type, and a reader that decodes only the plain form fails.
use npu_sim_common::abi::{
    SOC_LOG_STREAM_BIT12, SOC_LOG_STREAM_BIT13, StarsSocLog, StarsSocLogV6, kind,
};

/// Stream ids the record can carry: the decoders keep the stream id modulo 2048.
const STREAM_MASK: u16 = 0x07ff;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum IdForm {
    /// streamId = stream, taskId = task.
    Plain,
    /// Bit 12 set: the task id's top 3 bits ride in the stream field's bits 13-15.
    TaskHighInStream,
    /// Bit 13 set: the low 12 bits of stream and task swap places.
    Swapped,
}

/// The form a task's records use, by what the task does (the simulator's choice): kernels,
/// flip and model tasks plain; copies and memsets bit 12; events and collectives bit 13.
fn form_of(k: u8) -> IdForm {
    match k {
        kind::MEMCPY | kind::MEMSET => IdForm::TaskHighInStream,
        kind::EVENT | kind::HCCL => IdForm::Swapped,
        _ => IdForm::Plain,
    }
}

/// (stream field, task field) for `stream` and `task` in `form`.
fn id_fields(form: IdForm, stream: u16, task: u16) -> (u16, u16) {
    let stream = stream & STREAM_MASK;
    match form {
        IdForm::Plain => (stream, task),
        IdForm::TaskHighInStream => (
            SOC_LOG_STREAM_BIT12 | (task & 0xe000) | stream,
            task & 0x1fff,
        ),
        IdForm::Swapped => (
            SOC_LOG_STREAM_BIT13 | (task & 0x0fff),
            (task & 0xf000) | stream,
        ),
    }
}

/// What a record says about its task.
pub(super) struct Ids {
    /// SQE type (the record's `taskType`).
    pub ty: u8,
    /// What the task does (`kind::*`), which picks the id form.
    pub kind: u8,
    pub stream: u16,
    pub task: u16,
    pub sq: u32,
}

/// The record of `func_type` (begin or end) for a task, stamped with device count `cnt`.
pub(super) fn encode(func_type: u8, ids: &Ids, cnt: u64) -> StarsSocLog {
    let (stream_id, task_id) = id_fields(form_of(ids.kind), ids.stream, ids.task);
    StarsSocLog {
        word0: u16::from(func_type & 0x3f) | (u16::from(ids.ty & 0x3f) << 10),
        stream_id,
        task_id,
        timestamp: cnt,
        // accId 0; acsqId: the 10-bit SQ id.
        acc: ((ids.sq & 0x3ff) as u16) << 6,
        ..StarsSocLog::default()
    }
}

/// The 950 record (`StarsSocLogV6`): the 32-bit task id, no stream.
pub(super) fn encode_v6(func_type: u8, ids: &Ids, task: u32, cnt: u64) -> StarsSocLogV6 {
    StarsSocLogV6 {
        word0: u16::from(func_type & 0x3f) | (u16::from(ids.ty & 0x3f) << 10),
        task_id: task,
        timestamp: cnt,
        acc: ((ids.sq & 0x3ff) as u16) << 6,
        ..StarsSocLogV6::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use npu_sim_common::abi::STARS_FUNC_TYPE_END;

    #[test]
    fn every_form_decodes_back_as_msprof_decodes_it() {
        for form in [IdForm::Plain, IdForm::TaskHighInStream, IdForm::Swapped] {
            for stream in [0u16, 1, 7, 1000, 2047] {
                for task in (0..=u16::MAX)
                    .step_by(97)
                    .chain([0xffff, 0x1fff, 0x2000, 0x0fff])
                {
                    let (s, t) = id_fields(form, stream, task);
                    let rec = StarsSocLog {
                        stream_id: s,
                        task_id: t,
                        ..Default::default()
                    };
                    assert_eq!(rec.ids(), (stream, task), "{form:?} {stream} {task}");
                }
            }
        }
    }

    #[test]
    fn header_bits_are_where_msprof_reads_them() {
        let ids = Ids {
            ty: 11,
            kind: kind::MEMSET,
            stream: 5,
            task: 0xe123,
            sq: 5,
        };
        let rec = encode(STARS_FUNC_TYPE_END, &ids, 42);
        let b = rec.to_bytes();
        assert_eq!(b[0] & 0x3f, 1, "funcType in bits 0-5");
        assert_eq!(
            u16::from_le_bytes([b[0], b[1]]) >> 10,
            11,
            "taskType in bits 10-15"
        );
        assert_eq!(u64::from_le_bytes(b[8..16].try_into().unwrap()), 42);
        assert_eq!(u16::from_le_bytes([b[18], b[19]]) >> 6, 5, "acsqId");
        assert_eq!(rec.ids(), (5, 0xe123));
        assert_ne!(rec.stream_id & SOC_LOG_STREAM_BIT12, 0);
    }
}
