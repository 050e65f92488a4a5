//! Reading the device clock through the driver, from the agent itself. A device's syscnt
//! is global hardware state: `halGetDeviceInfo(dev, MODULE_TYPE_SYSTEM, INFO_TYPE_SYS_COUNT)`
//! bracketed by two CLOCK_MONOTONIC reads in this process is a direct clock sample whose
//! uncertainty is a few hundred ns, far tighter than anything seen through uprobes.
use std::{
    collections::BTreeSet,
    path::Path,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use libloading::{Library, Symbol};
use tokio::sync::mpsc;

use tracer_core::clock::ClockReading;

use crate::session::clock_ns;

const MODULE_TYPE_SYSTEM: i32 = 0;
const INFO_TYPE_SYS_COUNT: i32 = 13;
const INFO_TYPE_DEV_OSC_FREQUE: i32 = 25;
/// How often each device's clock is sampled.
const SAMPLE_INTERVAL: Duration = Duration::from_millis(100);
/// Counter reads per sample, of which the tightest bracket is kept.
const READS_PER_SAMPLE: usize = 3;
/// How soon a newly seen device gets its first sample.
const POLL_INTERVAL: Duration = Duration::from_millis(5);

type GetDeviceInfo = unsafe extern "C" fn(u32, i32, i32, *mut i64) -> i32;

/// The driver library loaded into the agent.
pub struct Driver {
    _library: Library,
    get_device_info: GetDeviceInfo,
}

impl Driver {
    /// Loads `libascend_hal.so`; None when it cannot be loaded or lacks the function.
    pub fn open(path: &Path) -> Option<Self> {
        // SAFETY: loading the vendor driver library runs its initializers, as any CANN
        // program does; the symbol has the documented C signature.
        unsafe {
            let library = Library::new(path).ok()?;
            let symbol: Symbol<GetDeviceInfo> = library.get(b"halGetDeviceInfo\0").ok()?;
            let get_device_info = *symbol;
            Some(Self {
                _library: library,
                get_device_info,
            })
        }
    }

    fn info(&self, device: u32, info_type: i32) -> Option<i64> {
        let mut value = 0i64;
        // SAFETY: documented signature; `value` is a valid out-pointer.
        let rc =
            unsafe { (self.get_device_info)(device, MODULE_TYPE_SYSTEM, info_type, &mut value) };
        (rc == 0).then_some(value)
    }

    pub fn frequency_hz(&self, device: u32) -> Option<f64> {
        self.info(device, INFO_TYPE_DEV_OSC_FREQUE)
            .filter(|&khz| khz > 0)
            .map(|khz| khz as f64 * 1e3)
    }

    /// The tightest of [`READS_PER_SAMPLE`] bracketed counter reads: a read the agent's
    /// thread was preempted in is wide, and the clock model is as precise as its brackets.
    pub fn sample(&self, device: u32) -> Option<ClockReading> {
        (0..READS_PER_SAMPLE)
            .filter_map(|_| {
                let enter_ns = clock_ns(libc::CLOCK_MONOTONIC);
                let cnt = self.info(device, INFO_TYPE_SYS_COUNT)?;
                let exit_ns = clock_ns(libc::CLOCK_MONOTONIC);
                Some((enter_ns, cnt as u64, exit_ns))
            })
            .min_by_key(|(enter_ns, _, exit_ns)| exit_ns.saturating_sub(*enter_ns))
            .map(|(enter_ns, cnt, exit_ns)| ClockReading::Sample {
                device,
                cnt,
                enter_ns,
                exit_ns,
            })
    }
}

/// Devices to sample, filled as completions name them.
pub type Devices = Arc<Mutex<BTreeSet<u32>>>;

/// Samples every known device's clock until `stop`, sending readings to `tx`: a device
/// when it first appears, then every [`SAMPLE_INTERVAL`], and all of them once more at
/// `stop` so the samples span the whole trace.
pub fn spawn_sampler<T: From<ClockReading> + Send + 'static>(
    driver: Driver,
    devices: Devices,
    tx: mpsc::Sender<T>,
    stop: Arc<AtomicBool>,
) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let mut known = BTreeSet::new();
        let mut last_round = Instant::now();
        loop {
            let stopping = stop.load(Ordering::Relaxed);
            let due = stopping || last_round.elapsed() >= SAMPLE_INTERVAL;
            let current = devices.lock().map(|d| d.clone()).unwrap_or_default();
            for device in current {
                let new = known.insert(device);
                if (new || due) && !send_readings(&driver, device, new, &tx) {
                    return;
                }
            }
            if due {
                last_round = Instant::now();
            }
            if stopping {
                return;
            }
            thread::sleep(POLL_INTERVAL);
        }
    })
}

/// Sends a sample (and the frequency, for a new device); false once nobody listens.
fn send_readings<T: From<ClockReading>>(
    driver: &Driver,
    device: u32,
    new: bool,
    tx: &mpsc::Sender<T>,
) -> bool {
    let frequency = new
        .then(|| driver.frequency_hz(device))
        .flatten()
        .map(|hz| ClockReading::Frequency { device, hz });
    frequency
        .into_iter()
        .chain(driver.sample(device))
        .all(|reading| tx.blocking_send(reading.into()).is_ok())
}
