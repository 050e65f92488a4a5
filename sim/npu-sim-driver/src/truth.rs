//! The device's ground-truth lines: one `clock` line per device, one `task` line per task.
use npu_sim_common::abi::{self, sqe_off, sqe_type};
use npu_sim_common::core;
use npu_sim_common::json::Obj;
use npu_sim_common::time::{monotonic_ns, pid};

use crate::config::Config;
use crate::task::{Outcome, Task, name_of};

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
/// Whether a place-holder SQE is a flip task (`task_type` TS_TASK_TYPE_FLIP in bytes 2-3).
pub(crate) fn is_flip(sqe: &npu_sim_common::abi::Sqe) -> bool {
    sqe.u16_at(abi::flip::TASK_TYPE_OFF) == abi::flip::TS_TASK_TYPE_FLIP
}

pub(crate) fn task_line(device: u32, cfg: &Config, task: &Task, out: &Outcome, cqe: bool) {
    if core::truth().is_none() {
        return;
    }
    let sqe = &task.sqe;
    let ty = sqe.ty();
    let mut line = String::with_capacity(400);
    let mut o = Obj::begin(&mut line);
    o.str("type", "task")
        .u64("pid", pid().into())
        .u64("device", device.into());
    let flip = sqe.u16_at(abi::annot::FLIP);
    o.u64("stream", task.stream.into())
        .u64("task", sqe.task_id().into())
        .u64("sq", task.sq_id.into());
    o.u64("flip", flip.into()).u64(
        "prof_task_id",
        (u64::from(flip) << 16) | u64::from(sqe.task_id()),
    );
    let (kind, name, bytes) = match ty {
        sqe_type::AICORE | sqe_type::AICPU | sqe_type::AIV => {
            ("KERNEL", name_of(sqe, sqe_off::KERNEL_NAME), 0)
        }
        sqe_type::SDMA => {
            let k = sqe.u32_at(sqe_off::COPY_KIND);
            (
                "MEMCPY",
                copy_name(k).to_string(),
                sqe.u64_at(sqe_off::COPY_BYTES),
            )
        }
        sqe_type::MEMSET => (
            "MEMSET",
            "MEMSET".to_string(),
            sqe.u64_at(sqe_off::SET_BYTES),
        ),
        sqe_type::HCCL => (
            "HCCL",
            name_of(sqe, sqe_off::HCCL_NAME),
            sqe.u64_at(sqe_off::HCCL_BYTES),
        ),
        sqe_type::PLACE_HOLDER if is_flip(sqe) => ("FLIP", "FLIP_TASK".to_string(), 0),
        sqe_type::EVENT_RECORD | sqe_type::PLACE_HOLDER => ("EVENT", "EVENT_RECORD".to_string(), 0),
        sqe_type::EVENT_WAIT => ("EVENT", "EVENT_WAIT".to_string(), 0),
        _ => ("OTHER", String::new(), 0),
    };
    o.str("kind", kind)
        .str("name", &name)
        .u64("sqe_type", ty.into())
        .u64(
            "block_dim",
            if kind == "KERNEL" || kind == "HCCL" {
                sqe.block_dim().into()
            } else {
                0
            },
        );
    o.u64("bytes", bytes).u64("status", out.status.into());
    o.bool("wr_cqe", sqe.wr_cqe()).bool("cqe", cqe);
    o.bool(
        "sync_flag",
        sqe.stream_field() & abi::RT_SYNC_TASK_FLAG != 0,
    );
    match ty {
        sqe_type::SDMA => {
            o.u64("copy_kind", sqe.u32_at(sqe_off::COPY_KIND).into());
            o.bool(
                "async",
                sqe.u32_at(sqe_off::COPY_FLAGS) & abi::SQE_FLAG_SYNC == 0,
            );
        }
        sqe_type::MEMSET => {
            o.u64("value", sqe.u32_at(sqe_off::SET_VALUE).into());
            o.bool(
                "async",
                sqe.u32_at(sqe_off::SET_FLAGS) & abi::SQE_FLAG_SYNC == 0,
            );
        }
        sqe_type::HCCL => {
            o.u64("nranks", sqe.u32_at(sqe_off::HCCL_NRANKS).into());
        }
        sqe_type::EVENT_RECORD | sqe_type::EVENT_WAIT => {
            o.u64("event", sqe.u32_at(sqe_off::EVENT_ID).into());
        }
        _ => {}
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
