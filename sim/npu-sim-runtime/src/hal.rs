//! The driver functions the runtime calls (through libascend_hal.so's dynamic exports).
use std::ffi::c_void;

use npu_sim_common::abi::{
    HalReportRecvInfo, HalResourceIdInputInfo, HalResourceIdOutputInfo, HalSqCqFreeInfo,
    HalSqCqInputInfo, HalSqCqOutputInfo, HalSqCqQueryInfo, HalTaskSendInfo,
};

npu_sim_common::import_table! {
    pub struct Hal from "libascend_hal.so" {
        fn halSqTaskSend(devId: u32, info: *mut HalTaskSendInfo) -> i32;
        fn halCqReportRecv(devId: u32, info: *mut HalReportRecvInfo) -> i32;
        fn halGetDeviceInfo(devId: u32, moduleType: i32, infoType: i32, value: *mut i64) -> i32;
        fn halSqCqQuery(devId: u32, info: *mut HalSqCqQueryInfo) -> i32;
        fn halResourceIdAlloc(devId: u32, input: *mut HalResourceIdInputInfo, out: *mut HalResourceIdOutputInfo) -> i32;
        fn halResourceIdFree(devId: u32, input: *mut HalResourceIdInputInfo) -> i32;
        fn halSqCqAllocate(devId: u32, input: *mut HalSqCqInputInfo, out: *mut HalSqCqOutputInfo) -> i32;
        fn halSqCqFree(devId: u32, info: *mut HalSqCqFreeInfo) -> i32;
        fn halStreamTaskFill(dev_id: u32, stream_id: u32, stream_mem: *mut c_void, task_info: *mut c_void, task_cnt: u32) -> i32;
        fn drvMemcpy(dst: u64, dest_max: usize, src: u64, byte_count: usize) -> i32;
        fn drvMemsetD8(dst: u64, destMax: usize, value: u8, num: usize) -> i32;
    }
}
