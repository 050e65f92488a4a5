//! Asking the driver, from the agent itself, which chip it drives and what its device clocks
//! read. The chip (`halGetDeviceInfo(dev, MODULE_TYPE_SYSTEM, INFO_TYPE_VERSION)`, as msPTI
//! asks it) decides how the device path is read: SQE headers, completion entries, profiling
//! records and SQE type numbers. A device's syscnt is global hardware state:
//! `halGetDeviceInfo(dev, MODULE_TYPE_SYSTEM, INFO_TYPE_SYS_COUNT)` bracketed by two
//! CLOCK_MONOTONIC reads in this process is a direct clock sample whose uncertainty is a few
//! hundred ns, far tighter than anything seen through uprobes.
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

use tracer_catalog::{self as catalog, ChipLayout};
use tracer_core::clock::ClockReading;
use tracer_schema::session::ChipSummary;

use crate::session::clock_ns;

const MODULE_TYPE_SYSTEM: i32 = 0;
/// The chip id is in bits 8-15 of the value (msPTI `GetChipTypeImpl`).
const INFO_TYPE_VERSION: i32 = 1;
const INFO_TYPE_SYS_COUNT: i32 = 13;
const INFO_TYPE_DEV_OSC_FREQUE: i32 = 25;
/// How often each device's clock is sampled.
const SAMPLE_INTERVAL: Duration = Duration::from_millis(100);
/// Counter reads per sample, of which the tightest bracket is kept.
const READS_PER_SAMPLE: usize = 3;
/// How soon a newly seen device gets its first sample.
const POLL_INTERVAL: Duration = Duration::from_millis(5);

type GetDeviceInfo = unsafe extern "C" fn(u32, i32, i32, *mut i64) -> i32;
type GetDevNum = unsafe extern "C" fn(*mut u32) -> i32;
type GetDevIds = unsafe extern "C" fn(*mut u32, u32) -> i32;

/// The driver's device list: `drvGetDevNum`, `drvGetDevIDs` (hicann/driver
/// `pkg_inc/ascend_hal_base.h`).
#[derive(Clone, Copy)]
pub struct DeviceList {
    get_dev_num: GetDevNum,
    get_dev_ids: GetDevIds,
}

impl DeviceList {
    /// The two functions of the loaded driver `library`; Err names the one it lacks.
    pub fn load(library: &Library) -> Result<Self, String> {
        // SAFETY: the symbols are looked up with their documented C signatures.
        unsafe {
            let get_dev_num: Symbol<GetDevNum> = library
                .get(b"drvGetDevNum\0")
                .map_err(|_| "the driver has no drvGetDevNum".to_owned())?;
            let get_dev_ids: Symbol<GetDevIds> = library
                .get(b"drvGetDevIDs\0")
                .map_err(|_| "the driver has no drvGetDevIDs".to_owned())?;
            Ok(Self {
                get_dev_num: *get_dev_num,
                get_dev_ids: *get_dev_ids,
            })
        }
    }

    /// The ids of the devices the driver lists.
    pub fn devices(&self) -> Result<Vec<u32>, String> {
        let mut count = 0u32;
        // SAFETY: documented signature; `count` is a valid out-pointer.
        let rc = unsafe { (self.get_dev_num)(&mut count) };
        if rc != 0 {
            return Err(format!("drvGetDevNum failed ({rc})"));
        }
        let mut ids = vec![0u32; count as usize];
        // SAFETY: `ids` has room for `count` ids.
        let rc = unsafe { (self.get_dev_ids)(ids.as_mut_ptr(), count) };
        if rc != 0 {
            return Err(format!("drvGetDevIDs failed ({rc})"));
        }
        Ok(ids)
    }
}

/// The driver library loaded into the agent.
pub struct Driver {
    _library: Library,
    get_device_info: GetDeviceInfo,
    /// None when the driver cannot list its devices (device 0 is then asked for the chip).
    device_list: Option<DeviceList>,
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
            let device_list = DeviceList::load(&library).ok();
            Some(Self {
                _library: library,
                get_device_info,
                device_list,
            })
        }
    }

    /// `halGetDeviceInfo(device, MODULE_TYPE_SYSTEM, info_type)`: Err is the driver's code.
    fn query(&self, device: u32, info_type: i32) -> Result<i64, i32> {
        let mut value = 0i64;
        // SAFETY: documented signature; `value` is a valid out-pointer.
        let rc =
            unsafe { (self.get_device_info)(device, MODULE_TYPE_SYSTEM, info_type, &mut value) };
        if rc == 0 { Ok(value) } else { Err(rc) }
    }

    fn info(&self, device: u32, info_type: i32) -> Option<i64> {
        self.query(device, info_type).ok()
    }

    /// The chip the driver's devices are, and the layout the agent reads their device path
    /// with (the first device that answers decides). An unknown chip id, or no answer, reads
    /// as [`catalog::DEFAULT_CHIP`], with a one-line warning.
    pub fn chip(&self) -> Chip {
        let devices = match self.device_list.as_ref().map(DeviceList::devices) {
            Some(Ok(devices)) if !devices.is_empty() => devices,
            _ => vec![0],
        };
        let answers: Vec<(u32, Result<i64, i32>)> = devices
            .iter()
            .map(|&device| (device, self.query(device, INFO_TYPE_VERSION)))
            .collect();
        let ids: Vec<(u32, u32)> = answers
            .iter()
            .filter_map(|(device, answer)| {
                let version = answer.as_ref().ok()?;
                Some((*device, catalog::chip_id_of_version(*version)))
            })
            .collect();
        let Some(&(first, id)) = ids.first() else {
            let rc = answers.first().map_or(0, |(_, a)| a.err().unwrap_or(0));
            return Chip::fallback(
                None,
                format!(
                    "the driver did not report the chip (halGetDeviceInfo INFO_TYPE_VERSION failed: {rc})"
                ),
            );
        };
        if let Some((other, other_id)) = ids.iter().find(|(_, i)| *i != id) {
            eprintln!(
                "npu-bpftrace: device {first} reports chip id {id} but device {other} chip id \
                 {other_id}; reading every device as device {first}"
            );
        }
        match catalog::chip_by_id(id) {
            Some(layout) => Chip {
                layout,
                summary: ChipSummary {
                    layout: layout.name.to_owned(),
                    id: Some(id),
                    fallback: None,
                },
            },
            None => Chip::fallback(
                Some(id),
                format!("unknown NPU chip id {id} (halGetDeviceInfo INFO_TYPE_VERSION)"),
            ),
        }
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

    /// msPTI's sample (Ascend/mspti `csrc/common/context_manager.cpp` `InitDevTimeInfo`):
    /// the counter between two CLOCK_REALTIME reads, carried to CLOCK_MONOTONIC through a
    /// REALTIME-MONOTONIC offset bracketed just before. It can only be wider than
    /// [`Driver::sample`] (the offset's own uncertainty adds to it) and a REALTIME step (NTP)
    /// between the reads makes the offset and the bracket disagree, so such a sample is
    /// dropped; the clock model takes it as one more bound.
    pub fn realtime_sample(&self, device: u32) -> Option<ClockReading> {
        let mono_before = clock_ns(libc::CLOCK_MONOTONIC);
        let real_at = clock_ns(libc::CLOCK_REALTIME);
        let mono_after = clock_ns(libc::CLOCK_MONOTONIC);
        let real_enter = clock_ns(libc::CLOCK_REALTIME);
        let cnt = self.info(device, INFO_TYPE_SYS_COUNT)?;
        let real_exit = clock_ns(libc::CLOCK_REALTIME);
        let offset = (mono_before, real_at, mono_after);
        let (enter_ns, exit_ns) = to_monotonic((real_enter, real_exit), offset)?;
        Some(ClockReading::Sample {
            device,
            cnt: cnt as u64,
            enter_ns,
            exit_ns,
        })
    }
}

/// A CLOCK_REALTIME bracket `(enter, exit)` as a CLOCK_MONOTONIC one, through an offset
/// read as `(monotonic, realtime, monotonic)`: REALTIME - MONOTONIC lies between
/// `realtime - second monotonic` and `realtime - first monotonic`, so the bracket widens by
/// that much. None for a bracket that runs backwards (a REALTIME step).
fn to_monotonic(
    (enter, exit): (u64, u64),
    (mono_before, real, mono_after): (u64, u64, u64),
) -> Option<(u64, u64)> {
    if exit < enter || mono_after < mono_before {
        return None;
    }
    let (offset_lo, offset_hi) = (
        real.checked_sub(mono_after)?,
        real.checked_sub(mono_before)?,
    );
    Some((enter.checked_sub(offset_hi)?, exit.checked_sub(offset_lo)?))
}

/// The chip whose device path the agent reads.
pub struct Chip {
    pub layout: &'static ChipLayout,
    /// What `session.json` says of it.
    pub summary: ChipSummary,
}

impl Chip {
    /// The default layout, for a chip the agent could not identify (`id`, when the driver
    /// gave one): says so on stderr, in one line.
    pub fn fallback(id: Option<u32>, why: String) -> Self {
        let layout = catalog::DEFAULT_CHIP;
        let why = format!(
            "{why}; reading the device path as {} ({})",
            layout.name, layout.stars
        );
        eprintln!("npu-bpftrace: {why}");
        Self {
            layout,
            summary: ChipSummary {
                layout: layout.name.to_owned(),
                id,
                fallback: Some(why),
            },
        }
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

/// Sends a sample of each kind (and the frequency, for a new device); false once nobody
/// listens.
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
        .chain(driver.realtime_sample(device))
        .all(|reading| tx.blocking_send(reading.into()).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The monotonic bracket contains the true monotonic time of the read, widened by the
    /// offset's own uncertainty.
    #[test]
    fn a_realtime_bracket_carries_to_monotonic() {
        // REALTIME = MONOTONIC + 1_000_000; the offset read took 40 ns, the counter read 100.
        let (mono_before, mono_after) = (5_000, 5_040);
        let real = 1_005_020;
        let bracket = to_monotonic((1_006_000, 1_006_100), (mono_before, real, mono_after));
        assert_eq!(bracket, Some((5_980, 6_120)));
        let (enter, exit) = bracket.unwrap();
        assert!(enter <= 6_000 && 6_100 <= exit);
        assert_eq!(to_monotonic((10, 5), (mono_before, real, mono_after)), None);
    }
}
