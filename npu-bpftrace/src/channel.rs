//! Device task times the way Ascend hardware delivers them: the driver's profiling channel
//! `CHANNEL_STARS_SOC_LOG_BUFFER` (50), which carries a begin and an end record per task
//! (completion entries carry no start time, and ordinary kernels write none at all).
//!
//! The agent does what msPTI does (Ascend/mspti `csrc/activity/ascend/dev_prof_task.cpp`,
//! `channel/channel_pool.cpp`, `channel/channel_reader.cpp`): it starts channel 50 on every
//! device with `acsq_task` logging on (with the chip's sample period), one thread polls the
//! channels and reads each ready one into a 2 MiB buffer, splitting it into records of the
//! chip's layout, and at the end it flushes, reads what is left and stops them.
//! A device whose channel cannot be started (another profiler owns it, an old driver)
//! keeps completion-entry times; the agent says so in `session.json` and a critical event.
//! Prototypes and structs: hicann/driver `pkg_inc/ascend_hal_base.h`.
use std::{
    collections::BTreeMap,
    ffi::c_void,
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    thread,
    time::Duration,
};

use libloading::Library;
use tokio::sync::mpsc;
use tracer_catalog::{ChipLayout, SOC_LOG_CHANNEL};
use tracer_core::soclog::{SocBatch, SocLogReader};

use crate::{driver::DeviceList, session::clock_ns};

/// `struct prof_poll_info`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct ProfPollInfo {
    device_id: u32,
    channel_id: u32,
}

/// `CHANNEL_NUM`: entries of a channel list, and the most a poll reports.
const CHANNEL_NUM: usize = 160;

/// `struct channel_info` (the driver fills only the id; the agent reads nothing else).
#[repr(C)]
#[derive(Clone, Copy)]
struct ChannelInfo {
    _channel_name: [u8; 32],
    _channel_type: u32,
    channel_id: u32,
}

/// `channel_list_t`.
#[repr(C)]
struct ChannelList {
    _chip_type: u32,
    channel_num: u32,
    channel: [ChannelInfo; CHANNEL_NUM],
}

/// `struct prof_start_para`.
#[repr(C)]
struct ProfStartPara {
    /// `PROF_CHANNEL_TYPE`: 0 = TS.
    channel_type: u32,
    sample_period: u32,
    real_time: u32,
    user_data: *mut c_void,
    user_data_size: u32,
}

/// `StarsSocLogConfigT`, the `user_data` of a channel-50 start: 1 enables a log, 2 disables it.
#[repr(C)]
#[derive(Clone, Copy)]
struct StarsSocLogConfig {
    acsq_task: u32,
    acc_pmu: u32,
    cdqm_reg: u32,
    dvpp_vpc_block: u32,
    dvpp_jpegd_block: u32,
    dvpp_jpege_block: u32,
    ffts_thread_task: u32,
    ffts_block: u32,
    sdma_dmu: u32,
    tag: u32,
    block_shink_flag: u32,
}

const LOG_ON: u32 = 1;
const LOG_OFF: u32 = 2;
/// Bytes read per `prof_channel_read`, as msPTI.
const READ_BUFFER_BYTES: usize = 2 << 20;
/// Seconds a poll waits for data; also how long stopping may wait for the poll.
const POLL_TIMEOUT_S: i32 = 1;

type GetChannels = unsafe extern "C" fn(u32, *mut ChannelList) -> i32;
type Start = unsafe extern "C" fn(u32, u32, *mut ProfStartPara) -> i32;
type Stop = unsafe extern "C" fn(u32, u32) -> i32;
type Read = unsafe extern "C" fn(u32, u32, *mut u8, u32) -> i32;
type Poll = unsafe extern "C" fn(*mut ProfPollInfo, i32, i32) -> i32;
type Flush = unsafe extern "C" fn(u32, u32, *mut u32) -> i32;

/// The driver's device and profiling-channel functions.
struct ProfApi {
    _library: Library,
    device_list: DeviceList,
    get_channels: GetChannels,
    start: Start,
    stop: Stop,
    read: Read,
    poll: Poll,
    flush: Flush,
}

impl ProfApi {
    fn open(path: &Path) -> Result<Self, String> {
        // SAFETY: loading the vendor driver library runs its initializers, as any CANN
        // program does; each symbol is looked up with its documented C signature.
        unsafe {
            let library = Library::new(path).map_err(|e| e.to_string())?;
            macro_rules! sym {
                ($name:literal) => {
                    *library
                        .get(concat!($name, "\0").as_bytes())
                        .map_err(|_| format!("the driver has no {}", $name))?
                };
            }
            Ok(Self {
                device_list: DeviceList::load(&library)?,
                get_channels: sym!("prof_drv_get_channels"),
                start: sym!("prof_drv_start"),
                stop: sym!("prof_stop"),
                read: sym!("prof_channel_read"),
                poll: sym!("prof_channel_poll"),
                flush: sym!("halProfDataFlush"),
                _library: library,
            })
        }
    }

    /// Starts channel 50 on `device`, with the sample period msPTI uses on `chip`: Err says
    /// why not.
    fn start_soc_log(&self, device: u32, chip: &ChipLayout) -> Result<(), String> {
        // SAFETY: all-zero bytes are a valid channel list (integers and byte arrays).
        let mut list: Box<ChannelList> = Box::new(unsafe { std::mem::zeroed() });
        // SAFETY: `list` is a valid, writable `channel_list_t`.
        let rc = unsafe { (self.get_channels)(device, &mut *list) };
        let listed = list
            .channel
            .iter()
            .take((list.channel_num as usize).min(CHANNEL_NUM))
            .any(|c| c.channel_id == SOC_LOG_CHANNEL);
        if rc != 0 || !listed {
            return Err(format!(
                "the device does not offer channel {SOC_LOG_CHANNEL} ({rc})"
            ));
        }
        let mut config = StarsSocLogConfig {
            acsq_task: LOG_ON,
            acc_pmu: LOG_OFF,
            cdqm_reg: LOG_OFF,
            dvpp_vpc_block: LOG_OFF,
            dvpp_jpegd_block: LOG_OFF,
            dvpp_jpege_block: LOG_OFF,
            ffts_thread_task: LOG_ON,
            ffts_block: LOG_OFF,
            sdma_dmu: LOG_OFF,
            tag: LOG_OFF,
            block_shink_flag: LOG_OFF,
        };
        let mut para = ProfStartPara {
            channel_type: 0,
            sample_period: chip.soc_log_period_ms,
            real_time: 1,
            user_data: (&mut config as *mut StarsSocLogConfig).cast(),
            user_data_size: size_of::<StarsSocLogConfig>() as u32,
        };
        // SAFETY: `para` and the config it points at outlive the call.
        match unsafe { (self.start)(device, SOC_LOG_CHANNEL, &mut para) } {
            0 => Ok(()),
            rc => Err(format!(
                "prof_drv_start refused channel {SOC_LOG_CHANNEL} ({rc}; another profiler \
                 such as msprof or msPTI may own it)"
            )),
        }
    }

    /// Devices with data to read, waiting up to [`POLL_TIMEOUT_S`].
    fn poll(&self) -> Vec<u32> {
        let mut ready = [ProfPollInfo::default(); CHANNEL_NUM];
        // SAFETY: `ready` has room for the CHANNEL_NUM entries the call may write.
        let n = unsafe { (self.poll)(ready.as_mut_ptr(), CHANNEL_NUM as i32, POLL_TIMEOUT_S) };
        let n = usize::try_from(n).unwrap_or(0).min(CHANNEL_NUM);
        ready[..n]
            .iter()
            .filter(|p| p.channel_id == SOC_LOG_CHANNEL)
            .map(|p| p.device_id)
            .collect()
    }

    /// One read of `device`'s channel into `buf`: the bytes read (0 when empty).
    fn read(&self, device: u32, buf: &mut [u8]) -> usize {
        let len = u32::try_from(buf.len()).unwrap_or(u32::MAX);
        // SAFETY: `buf` is writable for `len` bytes.
        let n = unsafe { (self.read)(device, SOC_LOG_CHANNEL, buf.as_mut_ptr(), len) };
        usize::try_from(n).unwrap_or(0).min(buf.len())
    }

    fn flush(&self, device: u32) {
        let mut pending = 0u32;
        // SAFETY: documented signature; `pending` is a valid out-pointer.
        unsafe { (self.flush)(device, SOC_LOG_CHANNEL, &mut pending) };
    }

    fn stop(&self, device: u32) {
        // SAFETY: documented signature, plain integer arguments.
        unsafe { (self.stop)(device, SOC_LOG_CHANNEL) };
    }
}

/// What starting the channel gave on each device: Ok, or why it was not used.
pub type Outcomes = BTreeMap<u32, Result<(), String>>;

/// The thread reading the started channels.
pub struct ChannelReader {
    thread: thread::JoinHandle<()>,
    stop: Arc<AtomicBool>,
}

impl ChannelReader {
    /// Starts channel 50 on every device of the driver at `path` and a thread that sends
    /// their records, read as `chip` lays them out, to `tx`. The outcome per device (an empty
    /// map when the driver has no profiling channel API, with the reason) is for the
    /// session's metadata.
    pub fn start<T: From<SocBatch> + Send + 'static>(
        path: &Path,
        chip: &'static ChipLayout,
        tx: mpsc::Sender<T>,
    ) -> Result<(Option<Self>, Outcomes), String> {
        let api = ProfApi::open(path)?;
        let outcomes: Outcomes = api
            .device_list
            .devices()?
            .into_iter()
            .map(|device| (device, api.start_soc_log(device, chip)))
            .collect();
        let started: Vec<u32> = outcomes
            .iter()
            .filter(|(_, r)| r.is_ok())
            .map(|(&d, _)| d)
            .collect();
        if started.is_empty() {
            return Ok((None, outcomes));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = thread::Builder::new()
            .name("npu-prof-channel".into())
            .spawn(move || read_loop(&api, chip, &started, &tx, &flag))
            .map_err(|e| format!("starting the channel reader: {e}"))?;
        Ok((Some(Self { thread, stop }), outcomes))
    }

    /// Flushes and reads what the devices still hold, stops the channels and waits.
    pub fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
    }
}

fn read_loop<T: From<SocBatch>>(
    api: &ProfApi,
    chip: &ChipLayout,
    devices: &[u32],
    tx: &mpsc::Sender<T>,
    stop: &AtomicBool,
) {
    let mut readers: BTreeMap<u32, SocLogReader> = devices
        .iter()
        .map(|&d| (d, SocLogReader::new(chip.soc_log)))
        .collect();
    let mut buf = vec![0u8; READ_BUFFER_BYTES];
    while !stop.load(Ordering::Relaxed) {
        let ready = api.poll();
        if ready.is_empty() {
            // A failed poll returns at once: do not spin.
            thread::sleep(Duration::from_millis(5));
        }
        for device in ready {
            if let Some(reader) = readers.get_mut(&device)
                && !drain(api, device, reader, &mut buf, tx)
            {
                return;
            }
        }
    }
    for (&device, reader) in &mut readers {
        api.flush(device);
        drain(api, device, reader, &mut buf, tx);
        api.stop(device);
    }
}

/// Reads `device`'s channel until it is empty; false once nobody listens.
fn drain<T: From<SocBatch>>(
    api: &ProfApi,
    device: u32,
    reader: &mut SocLogReader,
    buf: &mut [u8],
    tx: &mpsc::Sender<T>,
) -> bool {
    loop {
        let n = api.read(device, buf);
        if n == 0 {
            return true;
        }
        let batch = SocBatch {
            device,
            read_ns: clock_ns(libc::CLOCK_MONOTONIC),
            records: reader.push(&buf[..n]),
        };
        if tx.blocking_send(batch.into()).is_err() {
            return false;
        }
    }
}
