//! `cargo xtask setup`: make the BPF toolchain and test tools present.
//!
//! The toolchain choice itself lives in the `bpf-toolchain` crate (shared with the
//! build script); this module only installs what that choice needs.
use std::{path::Path, process::Command};

use anyhow::{Context, Result, bail};
use bpf_toolchain::{DEBIAN_LLVM_PREFIX, DEBIAN_PACKAGES, Toolchain};

use crate::{cargo, run_checked};

/// Pinned so every machine builds the same linker against the same LLVM.
const BPF_LINKER_VERSION: &str = "0.13.0";
/// Tools the tests and benchmarks compare against (bpftrace), and clippy for the BPF
/// toolchain (`cargo xtask lint` checks the BPF programs with Debian's rustc).
const TEST_PACKAGES: &[&str] = &["bpftrace", "rust-web-clippy"];

pub(crate) fn run() -> Result<()> {
    let mut missing: Vec<&str> = Vec::new();
    let toolchain = bpf_toolchain::detect().ok();
    let need_llvm = bpf_toolchain::find_bpf_linker().is_none();
    if toolchain.is_none() || need_llvm {
        missing.extend(DEBIAN_PACKAGES.iter().filter(|p| !dpkg_installed(p)));
    }
    missing.extend(TEST_PACKAGES.iter().filter(|p| !dpkg_installed(p)));
    if !missing.is_empty() {
        apt_install(&missing)?;
    }
    let toolchain = bpf_toolchain::detect()?;
    if bpf_toolchain::find_bpf_linker().is_none() {
        install_bpf_linker()?;
    }
    let linker = bpf_toolchain::find_bpf_linker().context("bpf-linker still missing")?;
    println!(
        "BPF toolchain ready: {} (core {}), {}",
        toolchain.rustup_name(),
        if toolchain.builds_core() {
            "built from rust-src"
        } else {
            "precompiled"
        },
        linker.display()
    );
    if let Toolchain::Prefix(prefix) = &toolchain {
        check_prefix(prefix)?;
    }
    ensure_tracefs()
}

/// bpftrace (compared against in tests and benchmarks) and tracepoints need tracefs; a
/// fresh machine may not have it mounted.
fn ensure_tracefs() -> Result<()> {
    const TRACEFS: &str = "/sys/kernel/tracing";
    if Path::new(TRACEFS).join("events").is_dir() {
        return Ok(());
    }
    eprintln!("setup: mounting tracefs at {TRACEFS}");
    run_checked(Command::new("mount").args(["-t", "tracefs", "nodev", TRACEFS]))
}

fn dpkg_installed(package: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", package])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
}

fn apt_install(packages: &[&str]) -> Result<()> {
    let command = format!("apt-get install -y {}", packages.join(" "));
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root || !Path::new("/usr/bin/apt-get").exists() {
        bail!(
            "missing packages and no root/apt to install them; as root run:\n  apt-get update && {command}\n\
             then, without root: LLVM_PREFIX={DEBIAN_LLVM_PREFIX} LLVM_SYS_221_PREFIX={DEBIAN_LLVM_PREFIX} \
             cargo install bpf-linker --version {BPF_LINKER_VERSION} --locked --no-default-features --features llvm-22"
        );
    }
    eprintln!("setup: installing {}", packages.join(" "));
    run_checked(Command::new("apt-get").args(["update", "-qq"]))?;
    run_checked(
        Command::new("apt-get")
            .args(["install", "-y", "-qq", "--no-install-recommends"])
            .args(packages)
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )
}

fn install_bpf_linker() -> Result<()> {
    eprintln!("setup: building bpf-linker {BPF_LINKER_VERSION} against LLVM 22 (about a minute)");
    run_checked(
        cargo()
            .args([
                "install",
                "bpf-linker",
                "--version",
                BPF_LINKER_VERSION,
                "--locked",
                "--no-default-features",
                "--features",
                "llvm-22",
            ])
            .env("LLVM_PREFIX", DEBIAN_LLVM_PREFIX)
            .env("LLVM_SYS_221_PREFIX", DEBIAN_LLVM_PREFIX),
    )
}

/// Debian's toolchain must really be able to build for the BPF target.
fn check_prefix(prefix: &Path) -> Result<()> {
    if !bpf_toolchain::prefix_has_bpf_core(prefix) {
        bail!(
            "{} has no precompiled core for bpfel-unknown-none (package libstd-rust-web-dev-bpf)",
            prefix.display()
        );
    }
    Ok(())
}

/// Installs `packages` of Debian architecture `arch` (e.g. `arm64` for the aarch64 cross
/// build), first enabling it in dpkg when it is not yet a foreign architecture.
pub(crate) fn foreign_packages(arch: &str, packages: &[&str]) -> Result<()> {
    if packages.iter().all(|p| dpkg_installed(p)) {
        return Ok(());
    }
    let foreign = Command::new("dpkg")
        .arg("--print-foreign-architectures")
        .output()
        .context("running dpkg")?;
    if !String::from_utf8_lossy(&foreign.stdout)
        .lines()
        .any(|a| a == arch)
    {
        eprintln!("setup: enabling the {arch} architecture in dpkg");
        run_checked(Command::new("dpkg").args(["--add-architecture", arch]))?;
    }
    host_packages(packages)
}

/// Installs the host's `packages` that are missing (tools a task needs beyond the build).
pub(crate) fn host_packages(packages: &[&str]) -> Result<()> {
    let missing: Vec<&str> = packages
        .iter()
        .copied()
        .filter(|p| !dpkg_installed(p))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    apt_install(&missing)
}
