//! `libnnopbase.so`: the simulated aclnn base library (hicann/opbase `src/nnopbase`). It owns the
//! aclnn argument objects (`aclCreateTensor` & co), the executors the operator libraries'
//! first phases create and their second phases run, and torch_npu's PTA executor cache; it
//! launches operator kernels through AscendCL (`aclrtBinaryLoadFromData`,
//! `aclrtBinaryGetFunctionByEntry`, `aclrtLaunchKernelWithHostArgs`) and AI CPU kernels through
//! `rtAicpuKernelLaunchExWithArgs`, as nnopbase does. Every CANN export runs in the API wrapper;
//! `npu_sim_nnop_*` are the simulator-internal calls of the op libraries.
#![allow(clippy::missing_safety_doc, non_snake_case)]

pub mod executor;
pub mod launch;
pub mod objects;

const LIB: &str = "libnnopbase.so";
