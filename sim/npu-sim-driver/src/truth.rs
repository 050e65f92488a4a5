//! The device's ground-truth lines: one `clock` line per device, one `task` line per task.
use npu_sim_common::abi::{self, Chip, annot, kind, pl};
use npu_sim_common::core;
use npu_sim_common::json::Obj;
use npu_sim_common::time::{monotonic_ns, pid};

use crate::config::Config;
use crate::task::{Outcome, Task, is_event_wait, name_of};

pub(crate) fn clock_line(device: u32, cfg: &Config) {
    if core::truth().is_none() {
        return;
    }
    let c = cfg.clock;
    let mut line = String::with_capacity(160);
    let mut o = Obj::begin(&mut line);
    o.str("type", "clock")
        .u64("pid", pid().into())
        .u64("device", device.into());
    o.str("chip", cfg.chip.tag());
    o.u64("freq_hz", c.freq_hz)
        .i64("offset_ns", c.offset_ns)
        .f64("drift_ppm", c.drift_ppm);
    o.end();
    line.push('\n');
    core::write_truth(&line);
}

fn copy_name(kind: u32) -> &'static str {
    match kind {
        abi::RT_MEMCPY_HOST_TO_HOST => "MEMCPY_H2H",
        abi::RT_MEMCPY_HOST_TO_DEVICE | abi::RT_MEMCPY_HOST_TO_DEVICE_EX => "MEMCPY_H2D",
        abi::RT_MEMCPY_DEVICE_TO_HOST | abi::RT_MEMCPY_DEVICE_TO_HOST_EX => "MEMCPY_D2H",
        abi::RT_MEMCPY_DEVICE_TO_DEVICE => "MEMCPY_D2D",
        _ => "MEMCPY",
    }
}

/// One `task` line; `cqe` says whether the task wrote a completion entry.
/// One `task` line; `cqe` says whether the task wrote a completion entry.
pub(crate) fn task_line(device: u32, cfg: &Config, task: &Task, out: &Outcome, cqe: bool) {
    if core::truth().is_none() {
        return;
    }
    let sqe = &task.sqe;
    let k = sqe.kind();
    let mut line = String::with_capacity(400);
    let mut o = Obj::begin(&mut line);
    o.str("type", "task")
        .u64("pid", pid().into())
        .u64("device", device.into());
    let flip = sqe.u16_at(annot::FLIP);
    o.u64("stream", task.stream.into())
        .u64("task", task.task_id.into())
        .u64("sq", task.sq_id.into());
    o.u64("flip", flip.into())
        .u64("prof_task_id", prof_task_id(cfg, task));
    let sdma = sqe.ty() == abi::v100::SDMA;
    let (kind_name, name, bytes) = match k {
        kind::KERNEL => ("KERNEL", name_of(sqe, annot::NAME), 0),
        kind::MEMCPY => (
            "MEMCPY",
            copy_name(sqe.u32_at(pl::COPY_KIND)).to_string(),
            sqe.u64_at(pl::COPY_BYTES),
        ),
        kind::MEMSET => ("MEMSET", "MEMSET".to_string(), sqe.u64_at(pl::COPY_BYTES)),
        kind::HCCL => (
            "HCCL",
            name_of(sqe, annot::NAME),
            if sdma { sqe.u64_at(pl::COPY_BYTES) } else { 0 },
        ),
        kind::EVENT if is_event_wait(cfg.chip, sqe) => ("EVENT", "EVENT_WAIT".to_string(), 0),
        kind::EVENT => ("EVENT", "EVENT_RECORD".to_string(), 0),
        kind::FLIP => ("FLIP", "FLIP_TASK".to_string(), 0),
        kind::MODEL => ("MODEL", "MODEL_EXECUTE".to_string(), 0),
        _ => ("OTHER", String::new(), 0),
    };
    o.str("kind", kind_name)
        .str("name", &name)
        .u64("sqe_type", sqe.ty().into());
    o.u64(
        "block_dim",
        if k == kind::KERNEL || k == kind::HCCL {
            sqe.block_dim().into()
        } else {
            0
        },
    );
    o.u64("bytes", bytes).u64("status", out.status.into());
    o.bool("wr_cqe", sqe.wr_cqe(cfg.chip)).bool("cqe", cqe);
    o.bool("sync_flag", task.sync_flag);
    match k {
        kind::KERNEL => {
            o.str(
                "engine",
                match sqe.u32_at(pl::KERNEL_ENGINE) {
                    abi::engine::AIV => "AIV",
                    abi::engine::AICPU => "AICPU",
                    _ => "AIC",
                },
            );
        }
        kind::MEMCPY => {
            o.u64("copy_kind", sqe.u32_at(pl::COPY_KIND).into());
            o.bool("async", true);
        }
        kind::MEMSET => {
            o.u64("value", sqe.u32_at(annot::AUX).into());
            if sqe.u32_at(pl::SDMA_OP) == abi::SDMA_OP_COPY {
                o.u64("copy_kind", sqe.u32_at(pl::COPY_KIND).into());
            }
            o.bool("async", true);
        }
        kind::HCCL => {
            o.u64("nranks", sqe.u32_at(annot::AUX).into())
                .u64("step", sqe.u32_at(pl::HCCL_STEP).into());
        }
        kind::EVENT if sqe.u64_at(pl::EVENT_GEN) != 0 => {
            o.u64("event", sqe.u32_at(pl::EVENT_ID).into());
        }
        kind::MODEL => {
            o.u64("model_id", sqe.u16_at(pl::MODEL_ID).into());
        }
        _ => {}
    }
    if let Some(m) = task.model {
        o.u64("model_id", m.into());
    }
    let c = cfg.clock;
    o.u64("start_cnt", c.cnt_at(out.start_ns))
        .u64("end_cnt", c.cnt_at(out.end_ns));
    o.u64("start_ns", out.start_ns)
        .u64("end_ns", out.end_ns)
        .u64("submit_ns", task.submit_ns);
    o.u64("tid", task.tid.into());
    match &task.api {
        Some(api) => o.str("api_fn", &api.0).u64("api_enter_ns", api.1),
        None => o.null("api_fn").null("api_enter_ns"),
    };
    o.end();
    line.push('\n');
    core::write_truth(&line);
}

/// The id profilers see for `task`: `(flip << 16) | taskId` on v100, the 32-bit task id on v2.
pub(crate) fn prof_task_id(cfg: &Config, task: &Task) -> u64 {
    match cfg.chip {
        Chip::Ascend910B => {
            (u64::from(task.sqe.u16_at(annot::FLIP)) << 16) | u64::from(task.task_id)
        }
        Chip::Ascend950 => task.task_id.into(),
    }
}

/// One `prof` line when a profiling channel this process started stops: the session's record
/// counts (records the devices produced, read completely, and dropped for a full buffer).
pub(crate) fn prof_line(device: u32, channel: u32, produced: u64, read: u64, lost: u64) {
    if core::truth().is_none() {
        return;
    }
    let mut line = String::with_capacity(160);
    let mut o = Obj::begin(&mut line);
    o.str("type", "prof")
        .u64("pid", pid().into())
        .u64("device", device.into());
    o.u64("channel", channel.into())
        .u64("produced", produced)
        .u64("read", read);
    o.u64("lost", lost).u64("stop_ns", monotonic_ns());
    o.end();
    line.push('\n');
    core::write_truth(&line);
}
