//! Kernel functions of the runtime that operator libraries use: the `rts*` kernel API
//! (hicann/runtime `pkg_inc/runtime/runtime/rts/rts_kernel.h`), which AscendCL's
//! `aclrtBinaryGetFunctionByEntry` and `aclrtLaunchKernelWithHostArgs` forward to
//! (`src/acl/aclrt_impl/kernel.cpp`), and `rtAicpuKernelLaunchExWithArgs`
//! (`pkg_inc/runtime/rt_external_kernel.h`), the AI CPU launch nnopbase uses
//! (`src/nnopbase/aicpu/task_handler/aicpu_task.cpp`). `rtRegisterAllKernel`, which
//! libacl_op_compiler uses, is with the other binary loaders in the crate root.
use std::ffi::{c_char, c_void};

use npu_sim_common::abi;
use npu_sim_common::trace::{api, out_ptr};

use crate::{LIB, Stm, c_str, handles, kernel, kernel_name, launch, put, rc};

/// `rtAicpuArgsEx_t`: what the simulator reads of it (`args` @0, `argsSize` @24).
#[repr(C)]
pub struct RtAicpuArgsEx {
    args: *mut c_void,
    host_input_info_ptr: *mut c_void,
    kernel_offset_info_ptr: *mut c_void,
    args_size: u32,
    host_input_info_num: u16,
    kernel_offset_info_num: u16,
    so_name_addr_offset: u16,
    kernel_name_addr_offset: u16,
    is_no_need_h2d_copy: bool,
    reserved: [u8; 3],
}

// SAFETY: the C caller's contract: `funcHandle` is null or valid for what the prototype says it
// points to; `binHandle` is an opaque handle, never trusted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtsFuncGetByEntry(
    binHandle: *mut c_void,
    funcEntry: u64,
    funcHandle: *mut *mut c_void,
) -> i32 {
    api(
        LIB,
        "rtsFuncGetByEntry",
        || {
            rc((|| {
                if funcHandle.is_null() {
                    return Err(abi::ACL_ERROR_RT_PARAM_INVALID);
                }
                let h = kernel::function_by_entry(binHandle, funcEntry)?;
                // SAFETY: `funcHandle` is the caller's out-parameter; `put` rejects NULL.
                unsafe { put(funcHandle, h) }
            })())
        },
        |a| {
            a.u64("binHandle", binHandle as u64)
                .u64("funcEntry", funcEntry)
                .u64("funcHandle", funcHandle as u64);
            // SAFETY: `funcHandle` is null or the caller's out-parameter, readable once the call returned.
            let h = unsafe { out_ptr(funcHandle) };
            a.u64("out_handle", h);
            if h != 0 {
                kernel_name(kernel::by_handle(h as *mut c_void), a);
            }
        },
    )
}

// SAFETY: the C caller's contract: `funcHandle`, `cfg`, `hostArgs`, `placeHolderArray` are null
// or valid for what the prototype says they point to; `stm` is an opaque handle, never trusted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtsLaunchKernelWithHostArgs(
    funcHandle: *mut c_void,
    numBlocks: u32,
    stm: Stm,
    cfg: *mut c_void,
    hostArgs: *mut c_void,
    argsSize: u32,
    placeHolderArray: *mut c_void,
    placeHolderNum: u32,
) -> i32 {
    api(
        LIB,
        "rtsLaunchKernelWithHostArgs",
        || {
            rc((|| {
                if hostArgs.is_null() && argsSize > 0 {
                    return Err(abi::ACL_ERROR_RT_PARAM_INVALID);
                }
                let f = kernel::by_handle(funcHandle)?;
                launch(f, numBlocks, hostArgs, argsSize, stm)
            })())
        },
        |a| {
            a.u64("funcHandle", funcHandle as u64)
                .u64("numBlocks", numBlocks.into())
                .u64("stm", stm as u64);
            a.u64("cfg", cfg as u64)
                .u64("hostArgs", hostArgs as u64)
                .u64("argsSize", argsSize.into());
            a.u64("placeHolderArray", placeHolderArray as u64)
                .u64("placeHolderNum", placeHolderNum.into());
            kernel_name(kernel::by_handle(funcHandle), a);
        },
    )
}

// SAFETY: the C caller's contract: `opName` is null or NUL-terminated; `argsInfo`, `smDesc` are
// null or valid for what the prototype says they point to; `stm` is an opaque handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtAicpuKernelLaunchExWithArgs(
    kernelType: u32,
    opName: *const c_char,
    numBlocks: u32,
    argsInfo: *const RtAicpuArgsEx,
    smDesc: *mut c_void,
    stm: Stm,
    flags: u32,
) -> i32 {
    api(
        LIB,
        "rtAicpuKernelLaunchExWithArgs",
        || {
            rc((|| {
                // SAFETY: `opName` is null (rejected by `c_str`) or a NUL-terminated string.
                let name = unsafe { c_str(opName) }?;
                // SAFETY: NULL or a valid rtAicpuArgsEx_t.
                let args = unsafe { argsInfo.as_ref() }.ok_or(abi::ACL_ERROR_RT_PARAM_INVALID)?;
                launch(
                    kernel::aicpu(&name),
                    numBlocks,
                    args.args,
                    args.args_size,
                    stm,
                )
            })())
        },
        |a| {
            a.u64("kernelType", kernelType.into());
            // SAFETY: `opName` is null or a NUL-terminated string, per the prototype.
            unsafe { a.cstr("opName", opName) };
            a.u64("numBlocks", numBlocks.into())
                .u64("argsInfo", argsInfo as u64)
                .u64("smDesc", smDesc as u64);
            a.u64("stm", stm as u64).u64("flags", flags.into());
        },
    )
}

/// The device, stream id and task id of the last task this thread submitted on `stm` (NULL: the
/// default stream), as the ground truth's `task` lines carry them (the device-wide stream id;
/// the SQE header's task id: 16 bits on 910B, the task serial number on 950), for the operator
/// libraries' ground truth. Not a CANN API: never recorded.
// SAFETY: the C caller's contract: the out-pointers are null or writable; `stm` is an opaque
// handle, never trusted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn npu_sim_rt_last_task(
    stm: Stm,
    devId: *mut u32,
    streamId: *mut u32,
    taskId: *mut u32,
) -> i32 {
    rc((|| {
        let s = handles::stream(stm)?;
        let last = crate::stream::LAST_TASK.with(|l| l.get());
        // SAFETY: the caller's out-parameters; `put` rejects NULL before writing.
        unsafe {
            put(devId, s.dev)?;
            put(streamId, last.stream)?;
            put(taskId, last.task)
        }
    })())
}
