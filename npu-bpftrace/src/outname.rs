//! `--out` templates: `%h` the host, `%p` the pid, `%r` the rank, `%t` the start time, `%%` a
//! percent sign; so that many agents (one per node, one per rank) can share one command
//! line and still write apart.
use std::{
    ffi::OsString,
    os::unix::ffi::{OsStrExt, OsStringExt},
    path::{Path, PathBuf},
    time::SystemTime,
};

use anyhow::{Result, bail};

/// The default `--out`.
pub const DEFAULT: &str = "npu-trace-%t";

/// Environment variables that hold a process's global rank, in the order they are tried:
/// torchrun and `torch.distributed` launchers, Open MPI, MPICH/Intel MPI, PMIx, Slurm.
pub const RANK_VARIABLES: [&str; 5] = [
    "RANK",
    "OMPI_COMM_WORLD_RANK",
    "PMI_RANK",
    "PMIX_RANK",
    "SLURM_PROCID",
];

/// What the placeholders stand for in one session.
#[derive(Debug, Clone)]
pub struct Vars {
    /// `%h`: this host's name.
    pub host: String,
    /// `%p`: the traced pids (joined by `+`).
    pub pids: Vec<u32>,
    /// `%r`: the rank, or why there is none.
    pub rank: Result<String, String>,
    /// `%t`: the local start time, `YYYYMMDD-HHMMSS`.
    pub time: String,
}

/// `template` with its placeholders replaced. An unknown placeholder, or `%r` without a
/// rank, is an error that says so.
pub fn expand(template: &Path, vars: &Vars) -> Result<PathBuf> {
    let mut out = Vec::new();
    let mut bytes = template.as_os_str().as_bytes().iter();
    while let Some(&b) = bytes.next() {
        if b != b'%' {
            out.push(b);
            continue;
        }
        let value = match bytes.next() {
            Some(b'h') => vars.host.clone(),
            Some(b'p') => {
                let pids: Vec<String> = vars.pids.iter().map(u32::to_string).collect();
                pids.join("+")
            }
            Some(b'r') => match &vars.rank {
                Ok(rank) => rank.clone(),
                Err(why) => bail!("--out {}: %r: {why}", template.display()),
            },
            Some(b't') => vars.time.clone(),
            Some(b'%') => "%".to_owned(),
            Some(&other) => bail!(
                "--out {}: unknown placeholder %{} (use %h host, %p pid, %r rank, %t time, %% for %)",
                template.display(),
                char::from(other)
            ),
            None => bail!(
                "--out {}: a lone % at the end (%% for a percent sign)",
                template.display()
            ),
        };
        out.extend_from_slice(value.as_bytes());
    }
    Ok(PathBuf::from(OsString::from_vec(out)))
}

/// The rank in an environment (`get` reads a variable): the first of [`RANK_VARIABLES`]
/// set to a number, or why none is.
pub fn rank_in(get: impl Fn(&str) -> Option<String>, whose: &str) -> Result<String, String> {
    RANK_VARIABLES
        .iter()
        .find_map(|var| get(var).filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit())))
        .ok_or_else(|| {
            format!(
                "no rank in {whose} (none of {} is set)",
                RANK_VARIABLES.join(", ")
            )
        })
}

/// The environment variable `var` of process `pid` (as it was started), if readable.
pub fn process_var(pid: u32, var: &str) -> Option<String> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    environ.split(|&b| b == 0).find_map(|entry| {
        let value = entry.strip_prefix(var.as_bytes())?.strip_prefix(b"=")?;
        Some(String::from_utf8_lossy(value).into_owned())
    })
}

/// Now, in local time, as `YYYYMMDD-HHMMSS`.
pub fn local_time() -> String {
    let secs = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as libc::time_t);
    // SAFETY: `libc::tm` is a C struct of integers (and a pointer that may be null), for
    // which all-zero bytes are a valid value.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers; localtime_r is thread-safe.
    unsafe { libc::localtime_r(&secs, &mut tm) };
    format!(
        "{:04}{:02}{:02}-{:02}{:02}{:02}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> Vars {
        Vars {
            host: "node1".into(),
            pids: vec![42, 43],
            rank: Ok("3".into()),
            time: "20260101-120000".into(),
        }
    }

    #[test]
    fn expands_placeholders() {
        let got = expand(Path::new("/data/%h/trace-r%r-%p-%t-100%%"), &vars()).expect("valid");
        assert_eq!(
            got,
            Path::new("/data/node1/trace-r3-42+43-20260101-120000-100%")
        );
        assert_eq!(
            expand(Path::new("plain"), &vars()).expect("plain"),
            Path::new("plain")
        );
        let err = expand(Path::new("t-%x"), &vars()).expect_err("unknown");
        assert!(err.to_string().contains("unknown placeholder %x"), "{err}");
        assert!(expand(Path::new("t-%"), &vars()).is_err());
        let no_rank = Vars {
            rank: Err("no rank in the agent's environment".into()),
            ..vars()
        };
        let err = expand(Path::new("t-%r"), &no_rank).expect_err("no rank");
        assert!(err.to_string().contains("%r: no rank"), "{err}");
        assert!(
            expand(Path::new("t-%h"), &no_rank).is_ok(),
            "%r only when used"
        );
    }

    #[test]
    fn finds_ranks() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |var: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == var)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(rank_in(env(&[("RANK", "5")]), "x"), Ok("5".into()));
        assert_eq!(
            rank_in(env(&[("RANK", "oops"), ("SLURM_PROCID", "2")]), "x"),
            Ok("2".into())
        );
        assert!(rank_in(env(&[]), "x").is_err());
    }
}
