//! `libcust_opapi.so`: custom aclnn operators, as a vendor package built with msopgen installs
//! them (`vendors/customize/op_api/lib/libcust_opapi.so`). torch_npu looks an operator up here
//! before `libopapi.so` (Ascend/op-plugin `op_plugin/utils/op_api_common.h`). The operators of
//! `ops.tsv` follow the headers msopgen generates: inputs, then the output as
//! `const aclTensor *`, then workspaceSize and executor.
#![allow(clippy::missing_safety_doc, clippy::too_many_arguments, non_snake_case)]

#[allow(unused_imports)]
use std::ffi::c_char;
use std::ffi::c_void;

use npu_sim_opdev::glue::kind;
use npu_sim_opdev::kernel::engine;
use npu_sim_opdev::opapi::{OpSpec, Param, phase1, phase2, value};

include!(concat!(env!("OUT_DIR"), "/ops_gen.rs"));
