//! `libopapi_math.so`: the ops-math feature op library. CANN ships operator packages as feature
//! libraries next to `libopapi.so`, and torch_npu dlopens every `lib64/libopapi_*.so` to find
//! operators `libopapi.so` lacks (Ascend/op-plugin `op_plugin/utils/op_api_common.cpp`). This one
//! exports the ops-math rows of `npu-sim-opapi/ops.tsv`, generated like `libopapi.so`.
#![allow(clippy::missing_safety_doc, clippy::too_many_arguments, non_snake_case)]

#[allow(unused_imports)]
use std::ffi::c_char;
use std::ffi::c_void;

use npu_sim_opdev::glue::kind;
use npu_sim_opdev::kernel::engine;
use npu_sim_opdev::opapi::{OpSpec, Param, phase1, phase2, value};

include!(concat!(env!("OUT_DIR"), "/ops_gen.rs"));
