//! The device side of channel 50: the StarsSocLog record the hardware writes when a task begins
//! or ends.
//!
//! The stream and task ids are written in one of the three forms msPTI decodes
//! (`StarsCommon::GetStreamId/GetTaskId`, csrc/activity/ascend/channel/stars_common.cpp). The
//! public sources do not say which form the hardware uses for which task, so the simulator
//! uses all three, chosen by SQE type, and a reader that decodes only the plain form fails.
use npu_sim_common::abi::{SOC_LOG_STREAM_BIT12, SOC_LOG_STREAM_BIT13, StarsSocLog, sqe_type};

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

fn form_of(ty: u8) -> IdForm {
    match ty {
        sqe_type::SDMA | sqe_type::MEMSET => IdForm::TaskHighInStream,
        sqe_type::EVENT_RECORD | sqe_type::EVENT_WAIT | sqe_type::HCCL => IdForm::Swapped,
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

/// The record of `func_type` (begin or end) for the task of SQE type `ty`, stream `stream` and
/// task id `task`, queued on SQ `sq_id`, stamped with device count `cnt`.
pub(super) fn encode(
    func_type: u8,
    ty: u8,
    stream: u16,
    task: u16,
    sq_id: u32,
    cnt: u64,
) -> StarsSocLog {
    let (stream_id, task_id) = id_fields(form_of(ty), stream, task);
    StarsSocLog {
        word0: u16::from(func_type & 0x3f) | (u16::from(ty & 0x3f) << 10),
        stream_id,
        task_id,
        timestamp: cnt,
        // accId 0; acsqId: the 10-bit SQ id.
        acc: ((sq_id & 0x3ff) as u16) << 6,
        ..StarsSocLog::default()
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
        let rec = encode(STARS_FUNC_TYPE_END, sqe_type::MEMSET, 5, 0xe123, 5, 42);
        let b = rec.to_bytes();
        assert_eq!(b[0] & 0x3f, 1, "funcType in bits 0-5");
        assert_eq!(
            u16::from_le_bytes([b[0], b[1]]) >> 10,
            12,
            "taskType in bits 10-15"
        );
        assert_eq!(u64::from_le_bytes(b[8..16].try_into().unwrap()), 42);
        assert_eq!(u16::from_le_bytes([b[18], b[19]]) >> 6, 5, "acsqId");
        assert_eq!(rec.ids(), (5, 0xe123));
        assert_ne!(rec.stream_id & SOC_LOG_STREAM_BIT12, 0);
    }
}
