//! `libnpu_sim_core.so`: the single owner of the simulator's process-wide state, so that every
//! CANN library of a process shares it: the ground-truth file and, per thread, the stack of
//! exported-API calls in progress (whose outermost entry the driver stamps on each device task).
//! Its `npu_sim_*` exports are internal and never recorded as API calls.
#![allow(clippy::missing_safety_doc)]

mod api_stack;
mod truth;

pub use api_stack::{npu_sim_api_enter, npu_sim_api_exit, npu_sim_outermost_api};
pub use truth::{npu_sim_truth_enabled, npu_sim_truth_flush, npu_sim_truth_write};
