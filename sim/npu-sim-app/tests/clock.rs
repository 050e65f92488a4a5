//! The device clock read through halGetDeviceInfo follows the documented model and settings.
//! (One test in this binary: it sets the environment and loads the driver into this process.)
use std::ffi::{CString, c_void};

use npu_sim_app::sim_home;

type GetInfo = unsafe extern "C" fn(u32, i32, i32, *mut i64) -> i32;

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid clock and out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[test]
fn device_clock_follows_env_settings() {
    let (freq, offset, drift) = (25_000_000u64, 7_200_000_000_000i64, -20.0f64);
    // SAFETY: set before any thread of this test process reads the environment.
    unsafe {
        std::env::set_var("NPU_SIM_DEV_FREQ_HZ", freq.to_string());
        std::env::set_var("NPU_SIM_CLOCK_OFFSET_NS", offset.to_string());
        std::env::set_var("NPU_SIM_CLOCK_DRIFT_PPM", drift.to_string());
        std::env::remove_var("NPU_SIM_TRUTH");
    }
    let lib = CString::new(
        sim_home()
            .join("driver/lib64/libascend_hal.so")
            .to_str()
            .unwrap(),
    )
    .unwrap();
    // SAFETY: loading the installed driver and resolving a function of the documented type.
    let get: GetInfo = unsafe {
        let h = libc::dlopen(lib.as_ptr(), libc::RTLD_NOW);
        assert!(!h.is_null(), "dlopen libascend_hal.so");
        let f = libc::dlsym(h, c"halGetDeviceInfo".as_ptr());
        assert!(!f.is_null());
        std::mem::transmute::<*mut c_void, GetInfo>(f)
    };
    let info = |dev: u32, ty: i32| {
        let mut v = 0i64;
        // SAFETY: valid out-pointer.
        let rc = unsafe { get(dev, 0, ty, &mut v) };
        (rc, v)
    };
    assert_eq!(info(0, 25), (0, 25_000), "INFO_TYPE_DEV_OSC_FREQUE in kHz");
    assert_eq!(info(99, 13).0, 2, "DRV_ERROR_INVALID_DEVICE");
    assert_eq!(info(0, 1234).0, 0xfffe, "DRV_ERROR_NOT_SUPPORT");
    assert_eq!(
        // SAFETY: the driver checks the value pointer for NULL before writing through it.
        unsafe { get(0, 0, 13, std::ptr::null_mut()) },
        3,
        "DRV_ERROR_INVALID_VALUE"
    );

    let expect = |ns: u64| {
        let t = i128::from(ns) + i128::from(offset);
        (t * i128::from(freq) * (1_000_000_000 + (drift * 1000.0) as i128)
            / 1_000_000_000_000_000_000) as i64
    };
    // Each reading lies between the model's counts at host times taken just before and just
    // after it: exact, whatever the scheduling delays. Readings far apart check the drift.
    for _ in 0..5 {
        let before = monotonic_ns();
        let (rc, cnt) = info(0, 13);
        let after = monotonic_ns();
        assert_eq!(rc, 0);
        assert!(
            expect(before) <= cnt && cnt <= expect(after),
            "syscnt {cnt} outside [{}, {}]",
            expect(before),
            expect(after)
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
