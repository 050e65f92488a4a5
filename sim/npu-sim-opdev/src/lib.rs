//! Operator plumbing shared by the simulator's operator libraries: `libnnopbase.so`, the
//! `libopapi*.so` / `libcust_opapi.so` operator libraries and `libacl_op_compiler.so`.
//!
//! - [`glue`]: the simulator-internal calls from op libraries into nnopbase;
//! - [`opapi`]: the two phases every generated `aclnn` export runs;
//! - [`kernel`]: kernel names, tiling keys and the ELF kernel binaries;
//! - [`truth`]: the ground truth's `op` line;
//! - [`codegen`]: the generator op libraries' build scripts run on their operator tables.
#![allow(clippy::missing_safety_doc)]

pub mod codegen;
pub mod glue;
pub mod kernel;
pub mod opapi;
pub mod truth;

/// aclnn status codes (hicann/opbase `include/nnopbase/opdev/op_errno.h`).
pub mod status {
    pub const ACLNN_SUCCESS: i32 = 0;
    pub const ACLNN_ERR_PARAM_NULLPTR: i32 = 161001;
    pub const ACLNN_ERR_PARAM_INVALID: i32 = 161002;
    pub const ACLNN_ERR_RUNTIME_ERROR: i32 = 361001;
    pub const ACLNN_ERR_INNER: i32 = 561000;
    pub const ACLNN_ERR_INNER_NULLPTR: i32 = 561103;
}

/// aclDataType values and element sizes (hicann/runtime `include/external/acl/acl_base_rt.h`).
pub mod dtype {
    pub const ACL_DT_UNDEFINED: i32 = -1;
    pub const ACL_FLOAT: i32 = 0;
    pub const ACL_FLOAT16: i32 = 1;
    pub const ACL_INT8: i32 = 2;
    pub const ACL_INT32: i32 = 3;
    pub const ACL_UINT8: i32 = 4;
    pub const ACL_INT16: i32 = 6;
    pub const ACL_UINT16: i32 = 7;
    pub const ACL_UINT32: i32 = 8;
    pub const ACL_INT64: i32 = 9;
    pub const ACL_UINT64: i32 = 10;
    pub const ACL_DOUBLE: i32 = 11;
    pub const ACL_BOOL: i32 = 12;
    pub const ACL_STRING: i32 = 13;
    pub const ACL_COMPLEX64: i32 = 16;
    pub const ACL_COMPLEX128: i32 = 17;
    pub const ACL_BF16: i32 = 27;

    /// Bytes per element (1 for the sub-byte and unknown types).
    pub fn size_of(dt: i32) -> u64 {
        match dt {
            ACL_FLOAT | ACL_INT32 | ACL_UINT32 => 4,
            ACL_FLOAT16 | ACL_INT16 | ACL_UINT16 | ACL_BF16 => 2,
            ACL_INT64 | ACL_UINT64 | ACL_DOUBLE | ACL_COMPLEX64 => 8,
            ACL_COMPLEX128 => 16,
            _ => 1,
        }
    }
}
