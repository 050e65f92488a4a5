//! The driver functions a profiler calls (through libascend_hal.so's dynamic exports, as msprof
//! and msPTI do), plus the simulator's lost-record counter.
use npu_sim_common::abi::{ChannelList, ProfPollInfo, ProfStartPara};

npu_sim_common::import_table! {
    pub struct Hal from "libascend_hal.so" {
        fn prof_drv_get_channels(device_id: u32, channels: *mut ChannelList) -> i32;
        fn prof_drv_start(device_id: u32, channel_id: u32, para: *mut ProfStartPara) -> i32;
        fn prof_stop(device_id: u32, channel_id: u32) -> i32;
        fn prof_channel_poll(out: *mut ProfPollInfo, num: i32, timeout: i32) -> i32;
        fn prof_channel_read(device_id: u32, channel_id: u32, buf: *mut u8, size: u32) -> i32;
        fn halProfDataFlush(device_id: u32, channel_id: u32, data_len: *mut u32) -> i32;
        fn npu_sim_prof_stats(device_id: u32, channel_id: u32, produced: *mut u64, lost: *mut u64) -> i32;
    }
}
