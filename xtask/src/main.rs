//! Developer tasks: `cargo xtask bench | build | demo | lint | setup | sim | test | vm`.
use std::{path::PathBuf, process::Command};

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};

mod bench;
mod demo;
mod lint;
mod platform;
mod setup;
mod sim;
mod vm;

use platform::Arch;

#[derive(Parser)]
#[command(name = "xtask", about = "npu-bpftrace developer tasks")]
struct Cli {
    #[command(subcommand)]
    command: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Measure tracing overhead, agent throughput, memory and output size (needs root);
    /// writes target/bench/results.json (see docs/bench.md).
    Bench {
        /// A short run (a few minutes): one round, shorter phases.
        #[arg(long)]
        quick: bool,
    },
    /// Build the release `npu-bpftrace` (BPF object embedded) and the simulator tree for an
    /// architecture: `--target aarch64` cross-builds for Kunpeng hosts on x86-64 with Debian's
    /// rustc-web and gcc-aarch64-linux-gnu (installed when missing, needs root and apt).
    ///
    /// Output: `target/<triple>/release/npu-bpftrace` and `target/<triple>/npu-sim/`.
    Build {
        #[arg(long, value_enum, default_value = "host")]
        target: Arch,
    },
    /// Trace a simulated 2-rank training run and print its report (needs root).
    ///
    /// Sets up the toolchain when missing, builds npu-bpftrace, installs the NPU simulator, records
    /// `npu-sim-run --nproc 2 -- npu-sim-app train` into `target/demo/<time>`, prints
    /// `npu-bpftrace report` and checks it against the simulator's ground truth.
    Demo,
    /// Install the BPF toolchain (bpf-linker, a Rust that can build for bpfel) and the
    /// tools the tests use, when missing. Quiet and quick when everything is present.
    Setup,
    /// Every static check CI runs: rustfmt, clippy (host crates, and the BPF programs for
    /// the BPF target per architecture), rustdoc, unused dependencies, import cycles.
    /// Sets up the toolchain first.
    Lint,
    /// Build the NPU simulator and install a CANN-like tree (default target/npu-sim).
    Sim {
        #[arg(long, value_name = "DIR")]
        dest: Option<PathBuf>,
    },
    /// Boot an arm64 Linux (Debian's arm64 kernel, a busybox initramfs) in qemu-system-aarch64
    /// (TCG emulation) and run the aarch64 builds of the smoke test, `record` of the 2-rank
    /// train against its truth and `attach --pid` there. Slow (tens of minutes); not part of
    /// `cargo xtask test`. See docs/build.md.
    Vm {
        /// Minutes before the VM is stopped and the run counts as failed.
        #[arg(long, default_value_t = 80)]
        timeout_minutes: u64,
    },
    /// Set up, install the simulator, and run every test of the workspace.
    Test {
        /// Extra arguments for `cargo test` (e.g. a test name filter).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Task::Bench { quick } => bench::run(quick),
        Task::Build { target } => build(target).map(drop),
        Task::Demo => demo::run(),
        Task::Lint => lint::run(),
        Task::Setup => setup::run(),
        Task::Sim { dest } => sim::install(&dest.unwrap_or_else(default_sim_dir), Arch::Host),
        Task::Test { args } => test(&args),
        Task::Vm { timeout_minutes } => {
            vm::run(std::time::Duration::from_secs(timeout_minutes * 60))
        }
    }
}

/// The workspace root (xtask lives one level below it).
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."))
}

fn default_sim_dir() -> PathBuf {
    Arch::Host.sim_dir()
}

/// `cargo xtask build --target ARCH`: the release `npu-bpftrace` (its BPF object embedded)
/// and the simulator tree for `arch`.
pub(crate) fn build(arch: Arch) -> Result<PathBuf> {
    arch.setup()?;
    run_checked(
        arch.cargo("build")
            .args(["--release", "-p", "npu-bpftrace"]),
    )?;
    let sim_dir = arch.sim_dir();
    sim::install(&sim_dir, arch)?;
    let bin = arch.artifact_dir("release").join("npu-bpftrace");
    if arch == Arch::Aarch64 && !platform::is_aarch64_elf(&bin) {
        bail!("{} is not an aarch64 executable", bin.display());
    }
    println!(
        "built {} and the simulator tree {}",
        bin.display(),
        sim_dir.display()
    );
    Ok(bin)
}

/// Runs `cmd`, failing with its command line when it fails.
pub(crate) fn run_checked(cmd: &mut Command) -> Result<()> {
    let status = cmd.status().with_context(|| format!("running {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed: {status}");
    }
    Ok(())
}

/// The cargo that runs xtask (rustup's), never whichever `cargo` is first on PATH.
pub fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(workspace_root());
    cmd
}

fn test(args: &[String]) -> Result<()> {
    setup::run()?;
    let sim_dir = default_sim_dir();
    sim::install(&sim_dir, Arch::Host)?;
    // The end-to-end tests run the agent binary next to them, which `cargo test` builds only
    // when it tests the whole workspace: a filtered run (`-p tests --test ops`) would run a
    // stale one.
    run_checked(cargo().args(["build", "-p", "npu-bpftrace"]))?;
    let status = cargo()
        .args(["test", "--no-fail-fast"])
        .args(args)
        .env("NPU_SIM_HOME", &sim_dir)
        .status()
        .context("running cargo test")?;
    if !status.success() {
        bail!("tests failed");
    }
    Ok(())
}
