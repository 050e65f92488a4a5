//! `npu-sim-prof [--device D[,D...]] [--duration SECS] [--format jsonl|csv] [--output PATH]
//! [--no-read] [--period-ms MS]`
//!
//! Owns profiling channel 50 (STARS SoC log) of the given devices the way msprof and msPTI do:
//! checks the device offers it (`prof_drv_get_channels`), starts it with a StarsSocLogConfig
//! that turns task logging on, then polls and reads it until SIGINT/SIGTERM or `--duration`.
//! On the way out it flushes (`halProfDataFlush`), reads what is left, and stops the channel.
//! Each record read is written as one JSON line or CSV row; a summary with the lost-record
//! counts goes to stderr. With `--no-read` it reads nothing until it is told to stop, so a small
//! channel buffer (`NPU_SIM_PROF_BUF_BYTES`) overflows.
mod hal;
mod output;

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use npu_sim_common::abi::{
    self, ChannelList, PROF_CHANNEL_NUM_MAX, PROF_CHANNEL_STARS_SOC_LOG, ProfPollInfo,
    ProfStartPara, StarsSocLogConfig,
};

use hal::Hal;
use output::{Format, Writer};

const CH: u32 = PROF_CHANNEL_STARS_SOC_LOG;
/// msPTI's read buffer (ChannelReader).
const READ_BUF: usize = 2 << 20;
/// msPTI's poll timeout in seconds (ChannelPool).
const POLL_TIMEOUT_S: i32 = 1;
/// msPTI's sampling period for channel 50 on 910B (DevProfTaskStars::StartTask).
const DEFAULT_PERIOD_MS: u32 = 20;

const USAGE: &str = "usage: npu-sim-prof [--device D[,D...]] [--duration SECS] \
    [--format jsonl|csv] [--output PATH] [--no-read] [--period-ms MS]";

/// Set by SIGINT/SIGTERM.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

struct Args {
    devices: Vec<u32>,
    duration: Option<Duration>,
    format: Format,
    output: Option<String>,
    read_while_running: bool,
    period_ms: u32,
}

fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Args, String> {
    let mut it = args.into_iter();
    let mut a = Args {
        devices: Vec::new(),
        duration: None,
        format: Format::JsonLines,
        output: None,
        read_while_running: true,
        period_ms: DEFAULT_PERIOD_MS,
    };
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--device" => {
                for d in value("--device")?.split(',') {
                    a.devices.push(
                        d.trim()
                            .parse()
                            .map_err(|_| format!("--device: bad id {d:?}"))?,
                    );
                }
            }
            "--duration" => {
                let s: f64 = value("--duration")?
                    .parse()
                    .map_err(|_| "--duration: not a number of seconds")?;
                a.duration =
                    Some(Duration::try_from_secs_f64(s).map_err(|_| "--duration: out of range")?);
            }
            "--format" => {
                a.format = match value("--format")?.as_str() {
                    "jsonl" | "json" => Format::JsonLines,
                    "csv" => Format::Csv,
                    f => return Err(format!("--format: {f:?} is neither jsonl nor csv")),
                }
            }
            "--output" | "-o" => a.output = Some(value("--output")?),
            "--no-read" => a.read_while_running = false,
            "--period-ms" => {
                a.period_ms = value("--period-ms")?
                    .parse()
                    .map_err(|_| "--period-ms: not a number")?;
            }
            _ => return Err(USAGE.into()),
        }
    }
    if a.devices.is_empty() {
        a.devices.push(0);
    }
    a.devices.sort_unstable();
    a.devices.dedup();
    Ok(a)
}

fn install_signal_handlers() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction with a handler that only stores to an atomic, and no
        // SA_RESTART, so a blocking wait in the driver returns early when a signal arrives.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// Checks `dev` offers channel 50 and starts it with task logging on.
fn start(hal: &Hal, dev: u32, period_ms: u32) -> Result<(), String> {
    // SAFETY: ChannelList is plain integers and bytes; all-zero is a valid value.
    let mut list: Box<ChannelList> = Box::new(unsafe { std::mem::zeroed() });
    // SAFETY: a writable channel_list_t.
    let rc = unsafe { (hal.prof_drv_get_channels)(dev, &mut *list) };
    if rc != abi::DRV_ERROR_NONE {
        return Err(format!("prof_drv_get_channels(device {dev}) failed: {rc}"));
    }
    let n = (list.channel_num as usize).min(PROF_CHANNEL_NUM_MAX);
    if !list.channel[..n].iter().any(|c| c.channel_id == CH) {
        return Err(format!("device {dev} does not offer channel {CH}"));
    }
    let mut config = StarsSocLogConfig {
        acsq_task: abi::TS_PROFILE_ENABLE,
        ffts_thread_task: abi::TS_PROFILE_ENABLE,
        ..Default::default()
    };
    let mut para = ProfStartPara {
        channel_type: 0, // PROF_CHANNEL_TYPE_TS
        sample_period: period_ms,
        real_time: 1, // PROFILE_REAL_TIME
        user_data: (&mut config as *mut StarsSocLogConfig).cast(),
        user_data_size: std::mem::size_of::<StarsSocLogConfig>() as u32,
    };
    // SAFETY: `para` and the config it points to live across the call.
    let rc = unsafe { (hal.prof_drv_start)(dev, CH, &mut para) };
    if rc != abi::DRV_ERROR_NONE {
        return Err(format!(
            "prof_drv_start(device {dev}, channel {CH}) failed: {rc}"
        ));
    }
    Ok(())
}

/// Reads `dev`'s channel until it has nothing readable, feeding `out`.
fn drain(hal: &Hal, dev: u32, buf: &mut [u8], out: &mut Writer) -> Result<(), String> {
    loop {
        // SAFETY: `buf` has buf.len() writable bytes.
        let n = unsafe { (hal.prof_channel_read)(dev, CH, buf.as_mut_ptr(), buf.len() as u32) };
        let Ok(n @ 1..) = usize::try_from(n) else {
            return match n {
                0 => Ok(()),
                rc => Err(format!("prof_channel_read(device {dev}) failed: {rc}")),
            };
        };
        out.feed(dev, &buf[..n.min(buf.len())])
            .map_err(|e| format!("writing records: {e}"))?;
    }
}

/// Waits for readable channels and reads them, until stopped.
fn run(hal: &Hal, args: &Args, buf: &mut [u8], out: &mut Writer) -> Result<(), String> {
    let deadline = args.duration.map(|d| Instant::now() + d);
    let mut ready = [ProfPollInfo::default(); PROF_CHANNEL_NUM_MAX];
    while !STOP.load(Ordering::Relaxed) && deadline.is_none_or(|d| Instant::now() < d) {
        if !args.read_while_running {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        // SAFETY: room for PROF_CHANNEL_NUM_MAX entries.
        let n = unsafe {
            (hal.prof_channel_poll)(ready.as_mut_ptr(), ready.len() as i32, POLL_TIMEOUT_S)
        };
        let Ok(n) = usize::try_from(n) else {
            return Err(format!("prof_channel_poll failed: {n}"));
        };
        for info in &ready[..n.min(ready.len())] {
            drain(hal, info.device_id, buf, out)?;
        }
    }
    Ok(())
}

/// Flushes, reads the rest and stops `dev`'s channel; reports what was read and lost.
fn finish(hal: &Hal, dev: u32, buf: &mut [u8], out: &mut Writer) -> Result<(), String> {
    let mut pending = 0u32;
    // SAFETY: valid out-pointer.
    let rc = unsafe { (hal.halProfDataFlush)(dev, CH, &mut pending) };
    if rc != abi::DRV_ERROR_NONE {
        eprintln!("npu-sim-prof: halProfDataFlush(device {dev}) failed: {rc}");
    }
    let drained = drain(hal, dev, buf, out);
    let (mut produced, mut lost) = (0u64, 0u64);
    // SAFETY: valid out-pointers.
    let stats_rc = unsafe { (hal.npu_sim_prof_stats)(dev, CH, &mut produced, &mut lost) };
    // SAFETY: plain call with ids.
    let stop_rc = unsafe { (hal.prof_stop)(dev, CH) };
    if stats_rc == abi::DRV_ERROR_NONE {
        eprintln!(
            "npu-sim-prof: device {dev} channel {CH}: read {} records, produced {produced}, \
             lost {lost}",
            out.records(dev)
        );
    }
    drained?;
    if stop_rc != abi::DRV_ERROR_NONE {
        return Err(format!("prof_stop(device {dev}) failed: {stop_rc}"));
    }
    Ok(())
}

fn open_output(path: Option<&str>) -> Result<Box<dyn std::io::Write>, String> {
    Ok(match path {
        Some(p) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).map_err(|e| format!("creating {p}: {e}"))?,
        )),
        None => Box::new(std::io::BufWriter::new(std::io::stdout())),
    })
}

fn profile(args: &Args) -> Result<(), String> {
    let hal = Hal::get();
    let mut out = Writer::new(
        open_output(args.output.as_deref())?,
        args.format,
        npu_sim_common::env::chip(),
    )
    .map_err(|e| format!("writing output: {e}"))?;
    let mut started = Vec::new();
    let mut result = Ok(());
    for &dev in &args.devices {
        match start(hal, dev, args.period_ms) {
            Ok(()) => started.push(dev),
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    if result.is_ok() {
        eprintln!(
            "npu-sim-prof: started channel {CH} on devices {:?}",
            args.devices
        );
        let mut buf = vec![0u8; READ_BUF];
        result = run(hal, args, &mut buf, &mut out);
        for &dev in &started {
            result = result.and(finish(hal, dev, &mut buf, &mut out));
        }
    } else {
        for &dev in &started {
            // SAFETY: plain call with ids.
            unsafe { (hal.prof_stop)(dev, CH) };
        }
    }
    if out.leftover() > 0 {
        eprintln!(
            "npu-sim-prof: {} bytes of an incomplete record",
            out.leftover()
        );
    }
    out.flush().map_err(|e| format!("writing output: {e}"))?;
    result
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("npu-sim-prof: {e}");
            return ExitCode::from(2);
        }
    };
    install_signal_handlers();
    match profile(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("npu-sim-prof: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Args, String> {
        parse_args(s.split_whitespace().map(String::from))
    }

    #[test]
    fn parses_options() {
        let a = parse("--device 1,0 --device 1 --format csv --no-read --period-ms 5").unwrap();
        assert_eq!(a.devices, [0, 1]);
        assert_eq!(a.format, Format::Csv);
        assert!(!a.read_while_running);
        assert_eq!(a.period_ms, 5);
        assert_eq!(parse("").unwrap().devices, [0]);
        assert!(parse("--device x").is_err());
        assert!(parse("--duration -1").is_err());
        assert!(parse("--bogus").is_err());
    }
}
