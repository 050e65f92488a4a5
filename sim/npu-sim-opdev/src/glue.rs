//! The simulator-internal calls from the operator libraries into `libnnopbase.so` (in CANN the
//! op libraries call nnopbase's C++ API: `CREATE_EXECUTOR`, `ADD_TO_LAUNCHER_LIST_AICORE`,
//! `CommonOpExecutorRun`, ...). Like every `npu_sim_*` export they are never recorded as API calls.
use std::ffi::{c_char, c_void};

/// What a first-phase parameter is, as far as nnopbase cares.
pub mod kind {
    pub const TENSOR_IN: u8 = 0;
    pub const TENSOR_OUT: u8 = 1;
    pub const TENSOR_LIST_IN: u8 = 2;
    pub const TENSOR_LIST_OUT: u8 = 3;
    pub const SCALAR: u8 = 4;
    pub const INT_ARRAY: u8 = 5;
    pub const BOOL_ARRAY: u8 = 6;
    pub const FLOAT_ARRAY: u8 = 7;
    pub const SCALAR_LIST: u8 = 8;
    /// Any plain value (integers, floats, bools, enums, strings).
    pub const VALUE: u8 = 9;
}

/// One operator: its API name (`aclnnAdd`), library, kernel op type (`Add`) and engine.
#[repr(C)]
pub struct NnopOp {
    pub api: *const c_char,
    pub lib: *const c_char,
    pub op_type: *const c_char,
    pub engine: u8,
}

/// One argument of a first phase: its [`kind`], whether it may be NULL, and its value (object
/// pointer, or the bits of a plain value).
#[repr(C)]
pub struct NnopArg {
    pub kind: u8,
    pub optional: u8,
    pub value: u64,
}

npu_sim_common::import_table! {
    pub struct Nnop from "libnnopbase.so" {
        fn npu_sim_nnop_prepare(op: *const NnopOp, args: *const NnopArg, nargs: usize, workspaceSize: *mut u64, executor: *mut *mut c_void) -> i32;
        fn npu_sim_nnop_run(op: *const NnopOp, workspace: *mut c_void, workspaceSize: u64, executor: *mut c_void, stream: *mut c_void) -> i32;
    }
}
