//! The kernel functions operator libraries launch with (hicann/opbase `op_kernel.cpp`,
//! `rts_arg.cpp`): `aclrtBinaryGetFunctionByEntry` and `aclrtLaunchKernelWithHostArgs`, which
//! forward to `rtsFuncGetByEntry` / `rtsLaunchKernelWithHostArgs` as hicann/runtime
//! `src/acl/aclrt_impl/kernel.cpp` does. As there, ACL itself rejects NULL handles and arguments
//! (`ACL_REQUIRES_NOT_NULL`) with `ACL_ERROR_INVALID_PARAM`; runtime errors pass through.
use std::ffi::c_void;

use npu_sim_common::abi;
use npu_sim_common::trace::{api, out_ptr};

use crate::LIB;

npu_sim_common::import_table! {
    pub(crate) struct Rts from "libruntime.so" {
        fn rtsFuncGetByEntry(binHandle: *mut c_void, funcEntry: u64, funcHandle: *mut *mut c_void) -> i32;
        fn rtsLaunchKernelWithHostArgs(funcHandle: *mut c_void, numBlocks: u32, stm: *mut c_void, cfg: *mut c_void, hostArgs: *mut c_void, argsSize: u32, placeHolderArray: *mut c_void, placeHolderNum: u32) -> i32;
    }
}

// SAFETY: the C caller's contract: `funcHandle` is null or writable; `binHandle` is an opaque
// handle, never trusted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtBinaryGetFunctionByEntry(
    binHandle: *mut c_void,
    funcEntry: u64,
    funcHandle: *mut *mut c_void,
) -> i32 {
    api(
        LIB,
        "aclrtBinaryGetFunctionByEntry",
        || {
            if binHandle.is_null() || funcHandle.is_null() {
                return abi::ACL_ERROR_INVALID_PARAM;
            }
            // SAFETY: forwards the caller's arguments to rtsFuncGetByEntry, which has this
            // function's contract.
            unsafe { (Rts::get().rtsFuncGetByEntry)(binHandle, funcEntry, funcHandle) }
        },
        |a| {
            a.u64("binHandle", binHandle as u64)
                .u64("funcEntry", funcEntry)
                .u64("funcHandle", funcHandle as u64);
            // SAFETY: `funcHandle` is null or the caller's out-parameter, readable once the call returned.
            a.u64("out_handle", unsafe { out_ptr(funcHandle) });
        },
    )
}

// SAFETY: the C caller's contract: `cfg`, `hostArgs`, `placeHolderArray` are null or valid for
// what the prototype says they point to; `funcHandle` and `stream` are opaque handles.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtLaunchKernelWithHostArgs(
    funcHandle: *mut c_void,
    numBlocks: u32,
    stream: *mut c_void,
    cfg: *mut c_void,
    hostArgs: *mut c_void,
    argsSize: usize,
    placeHolderArray: *mut c_void,
    placeHolderNum: usize,
) -> i32 {
    api(
        LIB,
        "aclrtLaunchKernelWithHostArgs",
        || {
            if funcHandle.is_null() || hostArgs.is_null() {
                return abi::ACL_ERROR_INVALID_PARAM;
            }
            let (Ok(size), Ok(num)) = (u32::try_from(argsSize), u32::try_from(placeHolderNum))
            else {
                return abi::ACL_ERROR_INVALID_PARAM;
            };
            // SAFETY: forwards the caller's arguments to rtsLaunchKernelWithHostArgs, which has
            // this function's contract (aclrtLaunchKernelCfg and aclrtPlaceHolderInfo have the
            // runtime types' layouts).
            unsafe {
                (Rts::get().rtsLaunchKernelWithHostArgs)(
                    funcHandle,
                    numBlocks,
                    stream,
                    cfg,
                    hostArgs,
                    size,
                    placeHolderArray,
                    num,
                )
            }
        },
        |a| {
            a.u64("funcHandle", funcHandle as u64)
                .u64("numBlocks", numBlocks.into())
                .u64("stream", stream as u64);
            a.u64("cfg", cfg as u64)
                .u64("hostArgs", hostArgs as u64)
                .u64("argsSize", argsSize as u64);
            a.u64("placeHolderArray", placeHolderArray as u64)
                .u64("placeHolderNum", placeHolderNum as u64);
        },
    )
}
