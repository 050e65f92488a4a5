//! `cargo xtask vm`: the aarch64 build verified on an arm64 Linux.
//!
//! There is no arm64 machine here, so this boots one in `qemu-system-aarch64` (TCG emulation
//! of a Cortex-A72) from Debian packages only: the `linux-image-arm64` kernel (Linux 6.1 in
//! Debian 12: BTF, BPF ring buffers and uprobes built in, but older than uprobe_multi, so the
//! perf-event fallback is what runs), `busybox-static:arm64` as userland, and the arm64 C
//! library of `libc6-dev-arm64-cross`. Everything the tests need is packed into an initramfs
//! at the absolute paths the cross build gave them (the test binaries find `npu-bpftrace`
//! next to themselves and the C fixtures through compile-time paths), and `/init` runs:
//!
//! - `smoke`: both uprobe modes load, attach and deliver ENTER/EXIT records;
//! - `record::train_with_two_ranks`: `record` of the simulated 2-rank train, against truth;
//! - `live::attach_to_running_process_names_kernels_registered_before`: `attach --pid`.
//!
//! The console goes to the terminal and to `target/vm/aarch64/console.log`; the run passes
//! when `/init` reports that every test binary exited 0.
use std::{
    fs,
    io::{BufRead, BufReader, Write},
    os::unix::fs::{PermissionsExt, symlink},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::{
    platform::{Arch, target_root},
    run_checked, setup,
};

/// Host tools the VM run needs.
const HOST_PACKAGES: &[&str] = &["qemu-system-arm", "cpio"];
/// The arm64 C library the cross linker links against, copied into the VM.
const ARM64_LIBC: &str = "/usr/aarch64-linux-gnu/lib";
/// The line `/init` prints last, followed by the number of failed test binaries.
const RESULT_MARK: &str = "npu-bpftrace-vm: failed test binaries:";
/// Busybox applets `/init` and the tests use.
const APPLETS: &[&str] = &[
    "sh", "mount", "mkdir", "poweroff", "cat", "echo", "uname", "sleep", "env", "ls", "id",
    "nproc", "free", "date", "dmesg", "grep", "timeout", "tail",
];
/// Seconds one test binary may run in the VM before it is stopped and counted as failed.
const TEST_TIMEOUT_SECS: u32 = 1200;
/// (test binary, test-name filter) pairs run in the VM; an empty filter runs them all.
const TESTS: &[(&str, &str)] = &[
    ("smoke", ""),
    ("record", "train_with_two_ranks"),
    (
        "live",
        "attach_to_running_process_names_kernels_registered_before",
    ),
];

pub(crate) fn run(timeout: Duration) -> Result<()> {
    let arch = Arch::Aarch64;
    setup::host_packages(HOST_PACKAGES)?;
    let bin = crate::build(arch)?;
    let built = build_tests(arch)?;
    let dir = target_root().join("vm/aarch64");
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let kernel = debian_kernel(&dir)?;
    let busybox = debian_busybox(&dir)?;

    let root = dir.join("root");
    if root.exists() {
        fs::remove_dir_all(&root).with_context(|| format!("removing {}", root.display()))?;
    }
    populate(&root, &busybox, &bin, &arch.sim_dir(), &built)?;
    let initrd = dir.join("initrd.cpio");
    pack(&root, &initrd)?;
    let started = Instant::now();
    let failed = boot(&kernel, &initrd, &dir.join("console.log"), timeout)?;
    let minutes = started.elapsed().as_secs_f64() / 60.0;
    match failed {
        Some(0) => {
            println!("vm: every test passed on arm64 in {minutes:.1} min");
            Ok(())
        }
        Some(n) => bail!("vm: {n} test binaries failed on arm64 ({minutes:.1} min)"),
        None => bail!(
            "vm: the VM stopped without a result after {minutes:.1} min (see {})",
            dir.join("console.log").display()
        ),
    }
}

/// What the VM runs: the test executables (in [`TESTS`] order) and the build-script output
/// directories of the `tests` package (its C fixtures).
struct Built {
    tests: Vec<PathBuf>,
    fixture_dirs: Vec<PathBuf>,
}

/// Cross-builds the test binaries without running them and reads their paths from cargo's
/// JSON messages.
fn build_tests(arch: Arch) -> Result<Built> {
    let mut cmd = arch.cargo("test");
    cmd.args(["--release", "--no-run", "-p", "tests"])
        .arg("--message-format=json-render-diagnostics")
        .stdout(Stdio::piped());
    for (test, _) in TESTS {
        cmd.args(["--test", test]);
    }
    let out = cmd.output().context("running cargo test --no-run")?;
    if !out.status.success() {
        bail!("building the aarch64 tests failed: {}", out.status);
    }
    let mut by_name = Vec::new();
    let mut fixture_dirs = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(msg) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        match msg["reason"].as_str() {
            Some("compiler-artifact") if msg["profile"]["test"] == true => {
                if let (Some(name), Some(exe)) =
                    (msg["target"]["name"].as_str(), msg["executable"].as_str())
                {
                    by_name.push((name.to_owned(), PathBuf::from(exe)));
                }
            }
            Some("build-script-executed") => {
                if let Some(out_dir) = msg["out_dir"].as_str()
                    && out_dir.contains("/build/tests-")
                {
                    fixture_dirs.push(PathBuf::from(out_dir));
                }
            }
            _ => {}
        }
    }
    let tests = TESTS
        .iter()
        .map(|(test, _)| {
            by_name
                .iter()
                .find(|(name, _)| name == test)
                .map(|(_, exe)| exe.clone())
                .with_context(|| format!("cargo built no `{test}` test binary"))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Built {
        tests,
        fixture_dirs,
    })
}

/// Downloads (once) the Debian package `package` of architecture arm64 into `dir/debs` and
/// returns the .deb.
fn download(dir: &Path, package: &str) -> Result<PathBuf> {
    let debs = dir.join("debs");
    fs::create_dir_all(&debs)?;
    let find = || -> Result<Option<PathBuf>> {
        Ok(fs::read_dir(&debs)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&format!("{package}_")) && n.ends_with(".deb"))
            }))
    };
    if let Some(deb) = find()? {
        return Ok(deb);
    }
    eprintln!("vm: downloading {package}:arm64");
    run_checked(
        Command::new("apt-get")
            .args(["download", "-qq", &format!("{package}:arm64")])
            .current_dir(&debs),
    )?;
    find()?.with_context(|| format!("apt-get download left no {package} package"))
}

/// The kernel image of Debian's arm64 kernel (the package `linux-image-arm64` depends on).
fn debian_kernel(dir: &Path) -> Result<PathBuf> {
    let deps = Command::new("apt-cache")
        .args(["depends", "linux-image-arm64:arm64"])
        .output()
        .context("running apt-cache")?;
    let deps = String::from_utf8_lossy(&deps.stdout);
    let package = deps
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Depends: "))
        .map(|p| p.trim_end_matches(":arm64"))
        .find(|p| p.starts_with("linux-image-"))
        .context("apt knows no linux-image-arm64:arm64 (is the arm64 architecture enabled?)")?
        .to_owned();
    let kernel = dir.join(format!("vmlinuz-{package}"));
    if kernel.exists() {
        return Ok(kernel);
    }
    let deb = download(dir, &package)?;
    let unpack = dir.join("kernel");
    fs::create_dir_all(&unpack)?;
    // Only the image: the package's modules are hundreds of megabytes the VM does not need.
    run_checked(Command::new("sh").arg("-c").arg(format!(
        "dpkg-deb --fsys-tarfile '{}' | tar -x -C '{}' --wildcards './boot/vmlinuz-*'",
        deb.display(),
        unpack.display()
    )))?;
    let image = fs::read_dir(unpack.join("boot"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .next()
        .context("the kernel package holds no /boot/vmlinuz")?;
    fs::rename(&image, &kernel)?;
    Ok(kernel)
}

/// The static arm64 busybox of `busybox-static:arm64`.
fn debian_busybox(dir: &Path) -> Result<PathBuf> {
    let busybox = dir.join("busybox");
    if busybox.exists() {
        return Ok(busybox);
    }
    let deb = download(dir, "busybox-static")?;
    let unpack = dir.join("busybox-static");
    run_checked(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&unpack))?;
    fs::rename(unpack.join("bin/busybox"), &busybox)?;
    fs::remove_dir_all(&unpack)?;
    Ok(busybox)
}

/// Lays out the VM's root file system under `root`.
fn populate(root: &Path, busybox: &Path, bin: &Path, sim: &Path, built: &Built) -> Result<()> {
    for d in [
        "bin",
        "dev",
        "proc",
        "sys",
        "tmp",
        "root",
        "lib/aarch64-linux-gnu",
    ] {
        fs::create_dir_all(root.join(d))?;
    }
    fs::copy(busybox, root.join("bin/busybox"))?;
    for applet in APPLETS {
        symlink("busybox", root.join("bin").join(applet))?;
    }
    copy_libc(root)?;
    for file in std::iter::once(bin).chain(built.tests.iter().map(PathBuf::as_path)) {
        copy_at_same_path(root, file)?;
    }
    for dir in std::iter::once(sim).chain(built.fixture_dirs.iter().map(PathBuf::as_path)) {
        copy_tree(dir, &at_same_path(root, dir))?;
    }
    let init = root.join("init");
    fs::write(&init, init_script(sim, &built.tests))?;
    fs::set_permissions(&init, fs::Permissions::from_mode(0o755))?;
    Ok(())
}

/// The arm64 dynamic loader and shared C libraries, where the loader looks for them.
fn copy_libc(root: &Path) -> Result<()> {
    let libdir = root.join("lib/aarch64-linux-gnu");
    for entry in fs::read_dir(ARM64_LIBC).with_context(|| format!("reading {ARM64_LIBC}"))? {
        let path = entry?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        // Run-time names only (`libc.so.6`), never the link-time `libc.so` scripts.
        if name.starts_with("ld-linux") || (name.starts_with("lib") && name.contains(".so.")) {
            fs::copy(&path, libdir.join(name))?;
        }
    }
    fs::copy(
        Path::new(ARM64_LIBC).join("ld-linux-aarch64.so.1"),
        root.join("lib/ld-linux-aarch64.so.1"),
    )?;
    Ok(())
}

fn at_same_path(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

fn copy_at_same_path(root: &Path, file: &Path) -> Result<()> {
    let dst = at_same_path(root, file);
    if let Some(parent) = dst.parent() {
        fs::create_dir_all(parent)?;
    }
    fs::copy(file, &dst).with_context(|| format!("copying {}", file.display()))?;
    Ok(())
}

/// Copies directory `src` to `dst` (files keep their modes; links are followed).
fn copy_tree(src: &Path, dst: &Path) -> Result<()> {
    fs::create_dir_all(dst)?;
    for entry in fs::read_dir(src).with_context(|| format!("reading {}", src.display()))? {
        let path = entry?.path();
        let target = dst.join(path.file_name().context("directory entry without a name")?);
        if path.is_dir() {
            copy_tree(&path, &target)?;
        } else {
            fs::copy(&path, &target).with_context(|| format!("copying {}", path.display()))?;
        }
    }
    Ok(())
}

/// How much longer test time windows are under emulation (TCG runs this workload about ten
/// times slower than the host).
const TIME_SCALE: u32 = 5;

/// `/init`: mounts what the tracer and the simulator (its driver's `/dev/shm` files) need,
/// runs each test binary, prints the result, powers off.
fn init_script(sim: &Path, tests: &[PathBuf]) -> String {
    let mut script = format!(
        "#!/bin/sh\n\
         mount -t proc proc /proc\n\
         mount -t sysfs sys /sys\n\
         mount -t devtmpfs dev /dev\n\
         mount -t tmpfs tmp /tmp\n\
         mkdir -p /dev/shm\n\
         mount -t tmpfs shm /dev/shm\n\
         mount -t debugfs debugfs /sys/kernel/debug\n\
         mount -t tracefs tracefs /sys/kernel/tracing\n\
         mount -t bpf bpf /sys/fs/bpf\n\
         export PATH=/bin HOME=/root TMPDIR=/tmp NPU_SIM_HOME={sim}\n\
         export NPU_BPFTRACE_TEST_TIME_SCALE={TIME_SCALE}\n\
         echo \"npu-bpftrace-vm: Linux $(uname -r) $(uname -m), $(nproc) CPUs\"\n\
         ls /sys/kernel/btf/vmlinux\n\
         failed=0\n",
        sim = sim.display()
    );
    for (exe, (_, filter)) in tests.iter().zip(TESTS) {
        let exact = if filter.is_empty() {
            String::new()
        } else {
            format!(" --exact {filter}")
        };
        script.push_str(&format!(
            "echo \"npu-bpftrace-vm: running {exe}{exact}\"\n\
             if ! timeout {TEST_TIMEOUT_SECS} {exe} --test-threads=1 --nocapture{exact}; then\n\
             \x20 failed=$((failed + 1)); echo \"npu-bpftrace-vm: failed; kernel log:\"; dmesg | tail -40\n\
             fi\n",
            exe = exe.display()
        ));
    }
    script.push_str(&format!("echo \"{RESULT_MARK} $failed\"\npoweroff -f\n"));
    script
}

/// Packs `root` into a newc cpio archive (what the kernel unpacks as initramfs).
fn pack(root: &Path, initrd: &Path) -> Result<()> {
    run_checked(
        Command::new("sh")
            .arg("-c")
            .arg(format!(
                "find . | LC_ALL=C sort | cpio --quiet -o -H newc > '{}'",
                initrd.display()
            ))
            .current_dir(root),
    )
}

/// Boots the VM, mirrors its console to the terminal and `log`, and returns the number of
/// failed test binaries `/init` reported (`None` when it reported nothing).
fn boot(kernel: &Path, initrd: &Path, log: &Path, timeout: Duration) -> Result<Option<u32>> {
    let mut qemu = Command::new("timeout")
        .arg(format!("{}s", timeout.as_secs()))
        .arg("qemu-system-aarch64")
        .args([
            "-M",
            "virt",
            "-cpu",
            "cortex-a72",
            "-smp",
            "2",
            "-m",
            "4096",
        ])
        .args(["-nographic", "-no-reboot", "-kernel"])
        .arg(kernel)
        .arg("-initrd")
        .arg(initrd)
        .args([
            "-append",
            "console=ttyAMA0 rdinit=/init panic=-1 loglevel=4",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .context("starting qemu-system-aarch64")?;
    let stdout = qemu.stdout.take().context("qemu stdout")?;
    let mut log = fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let mut failed = None;
    for line in BufReader::new(stdout).lines() {
        let line = line.context("reading the VM console")?;
        println!("{line}");
        writeln!(log, "{line}")?;
        if let Some(n) = line.trim().strip_prefix(RESULT_MARK) {
            failed = n.trim().parse().ok();
        }
    }
    qemu.wait().context("waiting for qemu")?;
    Ok(failed)
}
