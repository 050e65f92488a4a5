//! The device's side: every task's begin and end time is taken here. When channel 50 of the
//! device is logging, the time is read under the channel lock and the record is stored with it,
//! so a record carries exactly the time the ground truth reports, and records from every core
//! of every process using the device reach the channel in timestamp order.
use npu_sim_common::time::monotonic_ns;

use npu_sim_common::abi::Chip;

use crate::config::Config;
use crate::prof::{local, record};
use crate::task::Task;

/// The host time `task` begins or ends (`func_type` STARS_FUNC_TYPE_BEGIN / _END) on device
/// `dev`, logged on its channel 50 if that is on.
pub(crate) fn stamp(dev: u32, cfg: &Config, task: &Task, func_type: u8) -> u64 {
    let Some(ch) = local::channel(dev).filter(|c| c.logging()) else {
        return monotonic_ns();
    };
    let locked = ch.lock();
    let ns = monotonic_ns();
    if locked.logging() {
        let ids = record::Ids {
            ty: task.sqe.ty(),
            kind: task.sqe.kind(),
            stream: task.stream,
            task: task.task_id as u16,
            sq: task.sq_id,
        };
        let cnt = cfg.clock.cnt_at(ns);
        match cfg.chip {
            Chip::Ascend910B => locked.append(&record::encode(func_type, &ids, cnt).to_bytes(), ns),
            Chip::Ascend950 => {
                let rec = record::encode_v6(func_type, &ids, task.task_id, cnt);
                locked.append(&rec.to_bytes(), ns);
            }
        }
    }
    ns
}
