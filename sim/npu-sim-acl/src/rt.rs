//! The runtime functions AscendCL forwards to (through libruntime.so's dynamic exports, so
//! the nested calls are visible to uprobes exactly as in CANN).
use std::ffi::{c_char, c_void};

use npu_sim_common::abi::{RtArgsEx, RtDevBinary};

npu_sim_common::import_table! {
    pub struct Rt from "libruntime.so" {
        fn rtSetDevice(devId: i32) -> i32;
        fn rtDeviceReset(devId: i32) -> i32;
        fn rtGetDevice(devId: *mut i32) -> i32;
        fn rtDeviceSynchronize() -> i32;
        fn rtStreamCreate(stm: *mut *mut c_void, priority: i32) -> i32;
        fn rtStreamDestroy(stm: *mut c_void) -> i32;
        fn rtStreamSynchronize(stm: *mut c_void) -> i32;
        fn rtStreamWaitEvent(stm: *mut c_void, evt: *mut c_void) -> i32;
        fn rtEventCreate(evt: *mut *mut c_void) -> i32;
        fn rtEventDestroy(evt: *mut c_void) -> i32;
        fn rtEventRecord(evt: *mut c_void, stm: *mut c_void) -> i32;
        fn rtEventSynchronize(evt: *mut c_void) -> i32;
        fn rtMalloc(devPtr: *mut *mut c_void, size: u64, type_: u32, moduleId: u16) -> i32;
        fn rtFree(devPtr: *mut c_void) -> i32;
        fn rtMallocHost(hostPtr: *mut *mut c_void, size: u64, moduleId: u16) -> i32;
        fn rtFreeHost(hostPtr: *mut c_void) -> i32;
        fn rtMemcpy(dst: *mut c_void, destMax: u64, src: *const c_void, cnt: u64, kind: u32) -> i32;
        fn rtMemcpyAsync(dst: *mut c_void, destMax: u64, src: *const c_void, cnt: u64, kind: u32, stm: *mut c_void) -> i32;
        fn rtMemset(devPtr: *mut c_void, destMax: u64, val: u32, cnt: u64) -> i32;
        fn rtMemsetAsync(ptr: *mut c_void, destMax: u64, val: u32, cnt: u64, stm: *mut c_void) -> i32;
        fn rtBinaryLoad(bin: *const RtDevBinary, binHandle: *mut *mut c_void) -> i32;
        fn rtBinaryGetFunctionByName(binHandle: *mut c_void, kernelName: *const c_char, funcHandle: *mut *mut c_void) -> i32;
        fn rtLaunchKernelByFuncHandleV3(funcHandle: *mut c_void, blockDim: u32, argsInfo: *const RtArgsEx, stm: *mut c_void, cfgInfo: *const c_void) -> i32;
        fn rtModelCreate(mdl: *mut *mut c_void, flag: u32) -> i32;
        fn rtModelGetId(mdl: *mut c_void, modelId: *mut u32) -> i32;
        fn rtModelBindStream(mdl: *mut c_void, stm: *mut c_void, flag: u32) -> i32;
        fn rtModelUnbindStream(mdl: *mut c_void, stm: *mut c_void) -> i32;
        fn rtModelLoadComplete(mdl: *mut c_void) -> i32;
        fn rtModelExecute(mdl: *mut c_void, stm: *mut c_void, flag: u32) -> i32;
        fn rtModelDestroy(mdl: *mut c_void) -> i32;
    }
}
