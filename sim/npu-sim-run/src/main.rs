//! `npu-sim-run --nproc N [--straggler RANK:MS] [--rdzv-dir DIR] -- PROGRAM ARGS...`
//!
//! Starts N copies of PROGRAM as ranks, like torchrun: each gets RANK, LOCAL_RANK, WORLD_SIZE,
//! LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT and NPU_SIM_RDZV_DIR (a directory the ranks share
//! to exchange the HcclRootInfo). The straggler rank also gets NPU_SIM_STRAGGLER_MS. Waits for
//! all ranks; if one fails, stops the others and exits non-zero.
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitCode};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Set by SIGINT/SIGTERM: stop the ranks and exit.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

struct Args {
    nproc: u32,
    straggler: Option<(u32, u64)>,
    rdzv_dir: Option<PathBuf>,
    cmd: Vec<String>,
}

const USAGE: &str =
    "usage: npu-sim-run --nproc N [--straggler RANK:MS] [--rdzv-dir DIR] -- PROGRAM [ARGS...]";

fn parse_args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let mut a = Args {
        nproc: 1,
        straggler: None,
        rdzv_dir: None,
        cmd: Vec::new(),
    };
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--nproc" | "--nproc-per-node" | "--nproc_per_node" => {
                a.nproc = value("--nproc")?
                    .parse()
                    .map_err(|_| "--nproc: not a number".to_string())?;
            }
            "--straggler" => {
                let v = value("--straggler")?;
                let (r, ms) = v.split_once(':').ok_or("--straggler takes RANK:MS")?;
                let r = r.parse().map_err(|_| "--straggler: bad rank")?;
                let ms = ms.parse().map_err(|_| "--straggler: bad milliseconds")?;
                a.straggler = Some((r, ms));
            }
            "--rdzv-dir" => a.rdzv_dir = Some(value("--rdzv-dir")?.into()),
            "-h" | "--help" => return Err(USAGE.into()),
            "--" => {
                a.cmd = it.collect();
                break;
            }
            other => {
                a.cmd = std::iter::once(other.to_string()).chain(it).collect();
                break;
            }
        }
    }
    if a.cmd.is_empty() || a.nproc == 0 {
        return Err(USAGE.into());
    }
    if a.straggler.is_some_and(|(r, _)| r >= a.nproc) {
        return Err("--straggler: rank out of range".into());
    }
    Ok(a)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("npu-sim-run: {e}");
            return ExitCode::from(2);
        }
    };
    // SAFETY: installing an async-signal-safe handler that only stores to an atomic.
    unsafe {
        libc::signal(
            libc::SIGINT,
            on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
        libc::signal(
            libc::SIGTERM,
            on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
    }
    let own_rdzv = args.rdzv_dir.is_none();
    let rdzv = args.rdzv_dir.clone().unwrap_or_else(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        std::env::temp_dir().join(format!("npu-sim-rdzv-{}-{nanos}", std::process::id()))
    });
    if let Err(e) = std::fs::create_dir_all(&rdzv) {
        eprintln!("npu-sim-run: {}: {e}", rdzv.display());
        return ExitCode::FAILURE;
    }
    let code = run(&args, &rdzv);
    if own_rdzv {
        let _ = std::fs::remove_dir_all(&rdzv);
    }
    code
}

fn run(args: &Args, rdzv: &std::path::Path) -> ExitCode {
    let mut children: Vec<(u32, Child)> = Vec::new();
    for rank in 0..args.nproc {
        let mut cmd = Command::new(&args.cmd[0]);
        cmd.args(&args.cmd[1..])
            .env("RANK", rank.to_string())
            .env("LOCAL_RANK", rank.to_string())
            .env("WORLD_SIZE", args.nproc.to_string())
            .env("LOCAL_WORLD_SIZE", args.nproc.to_string())
            .env("MASTER_ADDR", "127.0.0.1")
            .env("MASTER_PORT", "29500")
            .env("NPU_SIM_RDZV_DIR", rdzv);
        // SAFETY: prctl is async-signal-safe; ranks die with the launcher even if it is killed.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        if let Some((r, ms)) = args.straggler.filter(|(r, _)| *r == rank) {
            cmd.env("NPU_SIM_STRAGGLER_MS", ms.to_string());
            eprintln!("npu-sim-run: rank {r} is a straggler ({ms} ms per collective)");
        }
        match cmd.spawn() {
            Ok(c) => children.push((rank, c)),
            Err(e) => {
                eprintln!("npu-sim-run: cannot start {}: {e}", args.cmd[0]);
                stop(&mut children);
                return ExitCode::FAILURE;
            }
        }
    }
    let mut failed = false;
    let mut deadline: Option<Instant> = None;
    while !children.is_empty() {
        let mut i = 0;
        while i < children.len() {
            match children[i].1.try_wait() {
                Ok(Some(status)) => {
                    let (rank, _) = children.swap_remove(i);
                    if !status.success() {
                        eprintln!("npu-sim-run: rank {rank} failed: {status}");
                        if !failed {
                            failed = true;
                            // Give the others a moment to fail on their own, then stop them.
                            deadline = Some(Instant::now() + Duration::from_secs(2));
                        }
                    }
                }
                Ok(None) => i += 1,
                Err(e) => {
                    eprintln!("npu-sim-run: waiting for rank {}: {e}", children[i].0);
                    children.swap_remove(i);
                    failed = true;
                }
            }
        }
        if INTERRUPTED.load(Ordering::Relaxed) {
            eprintln!("npu-sim-run: interrupted, stopping the ranks");
            failed = true;
            stop(&mut children);
        }
        if deadline.is_some_and(|d| Instant::now() > d) {
            stop(&mut children);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Stops the remaining ranks (SIGTERM, then SIGKILL) and reaps them.
fn stop(children: &mut Vec<(u32, Child)>) {
    for (_, c) in children.iter() {
        // SAFETY: signalling a child we started and have not reaped.
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
    }
    let until = Instant::now() + Duration::from_secs(2);
    for (_, c) in children.iter_mut() {
        while c.try_wait().ok().flatten().is_none() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = c.kill();
        let _ = c.wait();
    }
    children.clear();
}
