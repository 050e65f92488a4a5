//! Channel ownership and the profiling API's return codes, with this test process owning the
//! channel through the installed libascend_hal.so and `npu-sim-prof` as the other process.
//! (One test in this binary: it sets the environment and loads the driver into this process.)
use std::ffi::{CString, c_void};

use npu_sim_app::prof;
use npu_sim_app::*;

type Start = unsafe extern "C" fn(u32, u32, *mut StartPara) -> i32;
type Stop = extern "C" fn(u32, u32) -> i32;
type Read = unsafe extern "C" fn(u32, u32, *mut u8, u32) -> i32;
type Flush = unsafe extern "C" fn(u32, u32, *mut u32) -> i32;
type Poll = unsafe extern "C" fn(*mut [u32; 2], i32, i32) -> i32;
type Channels = unsafe extern "C" fn(u32, *mut ChannelList) -> i32;

/// `struct prof_start_para`.
#[repr(C)]
struct StartPara {
    channel_type: i32,
    sample_period: u32,
    real_time: u32,
    user_data: *mut c_void,
    user_data_size: u32,
}

/// `channel_list_t`: chip type, count, 160 x (name[32], type, id).
#[repr(C)]
struct ChannelList {
    chip_type: u32,
    channel_num: u32,
    channel: [[u32; 10]; 160],
}

const DRV_ERROR_INVALID_VALUE: i32 = 3;
const DRV_ERROR_INVALID_DEVICE: i32 = 2;
const DRV_ERROR_INNER_ERR: i32 = 7;
const DRV_ERROR_STATUS_FAIL: i32 = 30;
const DRV_ERROR_NOT_SUPPORT: i32 = 0xfffe;
const PROF_ERROR: i32 = -1;
const PROF_STOPPED_ALREADY: i32 = -4;

struct Driver {
    start: Start,
    stop: Stop,
    read: Read,
    flush: Flush,
    poll: Poll,
    channels: Channels,
}

fn load_driver() -> Driver {
    let path = sim_home().join("driver/lib64/libascend_hal.so");
    let path = CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: loading the installed driver and resolving functions of the documented types
    // (pkg_inc/ascend_hal_base.h).
    unsafe {
        let h = libc::dlopen(path.as_ptr(), libc::RTLD_NOW);
        assert!(!h.is_null(), "dlopen libascend_hal.so");
        let sym = |name: &std::ffi::CStr| {
            let f = libc::dlsym(h, name.as_ptr());
            assert!(!f.is_null(), "{name:?}");
            f
        };
        Driver {
            start: std::mem::transmute::<*mut c_void, Start>(sym(c"prof_drv_start")),
            stop: std::mem::transmute::<*mut c_void, Stop>(sym(c"prof_stop")),
            read: std::mem::transmute::<*mut c_void, Read>(sym(c"prof_channel_read")),
            flush: std::mem::transmute::<*mut c_void, Flush>(sym(c"halProfDataFlush")),
            poll: std::mem::transmute::<*mut c_void, Poll>(sym(c"prof_channel_poll")),
            channels: std::mem::transmute::<*mut c_void, Channels>(sym(c"prof_drv_get_channels")),
        }
    }
}

/// Starts `channel` of `dev` with acsq_task on (StarsSocLogConfigT's first word).
fn start(d: &Driver, dev: u32, channel: u32) -> i32 {
    let mut config = [0u32; 11];
    config[0] = 1;
    let mut para = StartPara {
        channel_type: 0,
        sample_period: 20,
        real_time: 1,
        user_data: config.as_mut_ptr().cast(),
        user_data_size: 44,
    };
    // SAFETY: `para` and `config` outlive the call.
    unsafe { (d.start)(dev, channel, &mut para) }
}

fn other_process_starts(host: &str, dir: &std::path::Path) -> Result<prof::Prof, String> {
    prof::start(host, dir, &[], &["--device", "0"]).map_err(|end| {
        assert!(!end.success, "refused, yet exited 0:\n{}", end.stderr);
        end.stderr
    })
}

#[test]
fn one_owner_per_device_channel_host_wide() {
    let host = prof::unique_host("prof-owner");
    let dir = scratch_dir("prof-owner");
    // SAFETY: set before this process loads the driver, which reads it once.
    unsafe {
        std::env::set_var("NPU_SIM_HOST", &host);
        std::env::remove_var("NPU_SIM_TRUTH");
    }
    let d = load_driver();

    // Argument checks.
    let mut list: Box<ChannelList> = Box::new(ChannelList {
        chip_type: 0,
        channel_num: 0,
        channel: [[0; 10]; 160],
    });
    // SAFETY: a writable channel_list_t, or NULL where NULL is the point.
    unsafe {
        assert_eq!((d.channels)(0, &mut *list), 0);
        assert_eq!(
            (list.channel_num, list.channel[0][9]),
            (1, 50),
            "channel 50 offered"
        );
        assert_eq!((d.channels)(64, &mut *list), DRV_ERROR_INVALID_VALUE);
        assert_eq!((d.channels)(9, &mut *list), DRV_ERROR_INVALID_DEVICE);
        assert_eq!(
            (d.start)(0, 50, std::ptr::null_mut()),
            DRV_ERROR_INVALID_VALUE
        );
    }
    assert_eq!(start(&d, 64, 50), DRV_ERROR_INVALID_VALUE);
    assert_eq!(start(&d, 0, 160), DRV_ERROR_INVALID_VALUE);
    assert_eq!(
        start(&d, 0, 44),
        DRV_ERROR_NOT_SUPPORT,
        "only channel 50 exists"
    );
    assert_eq!((d.stop)(0, 50), DRV_ERROR_STATUS_FAIL, "not started");

    // This process owns device 0's channel: a second start here and a start from any other
    // process are refused; device 1 is still free.
    assert_eq!(start(&d, 0, 50), 0);
    assert_eq!(start(&d, 0, 50), DRV_ERROR_STATUS_FAIL);
    let err = other_process_starts(&host, &dir)
        .err()
        .expect("second owner refused");
    assert!(
        err.contains(&format!(
            "prof_drv_start(device 0, channel 50) failed: {DRV_ERROR_INNER_ERR}"
        )),
        "{err}"
    );
    let other = prof::start(&host, &dir, &[], &["--device", "1"])
        .ok()
        .expect("device 1 is free");
    assert!(other.stop().success);

    let mut buf = [0u8; 256];
    let mut len = 0u32;
    let mut ready = [[0u32; 2]; 4];
    // SAFETY: valid buffers of the sizes passed.
    unsafe {
        assert_eq!(
            (d.read)(0, 50, buf.as_mut_ptr(), 256),
            0,
            "nothing ran: empty"
        );
        assert_eq!((d.read)(0, 50, std::ptr::null_mut(), 256), PROF_ERROR);
        assert_eq!(
            (d.read)(1, 50, buf.as_mut_ptr(), 256),
            PROF_STOPPED_ALREADY,
            "not ours"
        );
        assert_eq!((d.flush)(0, 50, &mut len), 0);
        assert_eq!(len, 0);
        assert_eq!((d.poll)(ready.as_mut_ptr(), 0, 1), PROF_ERROR);
        assert_eq!(
            (d.poll)(ready.as_mut_ptr(), 4, 1),
            0,
            "no data: times out empty"
        );
    }
    assert_eq!((d.stop)(0, 50), 0);
    assert_eq!((d.stop)(0, 50), DRV_ERROR_STATUS_FAIL);
    // SAFETY: as above.
    unsafe {
        assert_eq!((d.read)(0, 50, buf.as_mut_ptr(), 256), PROF_STOPPED_ALREADY);
        assert_eq!((d.flush)(0, 50, &mut len), PROF_STOPPED_ALREADY);
        assert_eq!((d.poll)(ready.as_mut_ptr(), 4, 1), PROF_STOPPED_ALREADY);
    }

    // Released: another process takes it. When that owner dies without stopping, the channel
    // is free again, as when the real driver closes a dead process's descriptor.
    let owner = other_process_starts(&host, &dir).expect("free after prof_stop");
    assert_eq!(start(&d, 0, 50), DRV_ERROR_INNER_ERR);
    owner.kill();
    assert_eq!(start(&d, 0, 50), 0, "a dead owner's channel can be taken");
    assert_eq!((d.stop)(0, 50), 0);
    prof::remove_host(&host);
    let _ = std::fs::remove_dir_all(&dir);
}
