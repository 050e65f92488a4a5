//! `cargo xtask sim`: builds the NPU simulator and installs a tree laid out like a CANN host:
//!
//! ```text
//! DEST/ascend-toolkit/latest/lib64/  libascendcl.so libruntime.so libhccl.so libms_tools_ext.so
//!                                    libnnopbase.so libopapi.so libopapi_math.so libcust_opapi.so
//!                                    libacl_op_compiler.so
//!                                    libnpu_sim_core.so (simulator-internal shared state)
//! DEST/ascend-toolkit/latest/include/npu_sim_cann.h npu_sim_cann_ops.h
//! DEST/driver/lib64/libascend_hal.so
//! DEST/bin/npu-sim-app  npu-sim-app-dlopen  npu-sim-run  npu-sim-prof
//! DEST/set_env.sh
//! ```
//!
//! Files are only replaced when their content changed (atomically, so running programs keep
//! their mapping) and the C workload is only recompiled when its inputs are newer.
use std::path::Path;
use std::process::Command;

use anyhow::Context;

use crate::{platform::Arch, run_checked};

/// Cargo packages of the simulator that produce installed artifacts.
const PACKAGES: [&str; 13] = [
    "npu-sim-core",
    "npu-sim-driver",
    "npu-sim-runtime",
    "npu-sim-acl",
    "npu-sim-hccl",
    "npu-sim-mstx",
    "npu-sim-nnopbase",
    "npu-sim-opapi",
    "npu-sim-opapi-math",
    "npu-sim-cust-opapi",
    "npu-sim-op-compiler",
    "npu-sim-run",
    "npu-sim-prof",
];

pub(crate) const TOOLKIT_LIB: &str = "ascend-toolkit/latest/lib64";
pub(crate) const DRIVER_LIB: &str = "driver/lib64";

/// (artifact in target/release, destination relative to the tree).
const ARTIFACTS: [(&str, &str); 13] = [
    ("libnpu_sim_core.so", TOOLKIT_LIB),
    ("libascendcl.so", TOOLKIT_LIB),
    ("libruntime.so", TOOLKIT_LIB),
    ("libhccl.so", TOOLKIT_LIB),
    ("libms_tools_ext.so", TOOLKIT_LIB),
    ("libnnopbase.so", TOOLKIT_LIB),
    ("libopapi.so", TOOLKIT_LIB),
    ("libopapi_math.so", TOOLKIT_LIB),
    ("libcust_opapi.so", TOOLKIT_LIB),
    ("libacl_op_compiler.so", TOOLKIT_LIB),
    ("libascend_hal.so", DRIVER_LIB),
    ("npu-sim-run", "bin"),
    ("npu-sim-prof", "bin"),
];

/// Builds the simulator for `arch` and installs it under `dest`.
pub(crate) fn install(dest: &Path, arch: Arch) -> anyhow::Result<()> {
    let mut build = arch.cargo("build");
    build.arg("--release");
    for p in PACKAGES {
        build.args(["-p", p]);
    }
    run_checked(&mut build)?;
    let release = arch.artifact_dir("release");

    for dir in [
        TOOLKIT_LIB,
        DRIVER_LIB,
        "bin",
        "ascend-toolkit/latest/include",
    ] {
        std::fs::create_dir_all(dest.join(dir))
            .with_context(|| format!("creating {}", dest.join(dir).display()))?;
    }
    let dest = dest
        .canonicalize()
        .with_context(|| format!("resolving {}", dest.display()))?;
    for (file, dir) in ARTIFACTS {
        install_file(&release.join(file), &dest.join(dir).join(file))?;
    }
    let app_dir = crate::workspace_root().join("sim/npu-sim-app/c");
    install_file(
        &app_dir.join("cann.h"),
        &dest.join("ascend-toolkit/latest/include/npu_sim_cann.h"),
    )?;
    install_file(
        &app_dir.join("cann_ops.h"),
        &dest.join("ascend-toolkit/latest/include/npu_sim_cann_ops.h"),
    )?;
    build_app(&app_dir, &dest, &arch.cc())?;
    write_if_changed(&dest.join("set_env.sh"), set_env(&dest).as_bytes())?;
    println!(
        "npu-sim installed in {} (source {}/set_env.sh)",
        dest.display(),
        dest.display()
    );
    Ok(())
}

fn install_file(src: &Path, dst: &Path) -> anyhow::Result<()> {
    let data = std::fs::read(src).with_context(|| format!("reading {}", src.display()))?;
    write_if_changed(dst, &data)?;
    let mode = std::fs::metadata(src)?.permissions();
    std::fs::set_permissions(dst, mode)?;
    Ok(())
}

/// Replaces `dst` by `data` through a rename, unless it already holds exactly that.
fn write_if_changed(dst: &Path, data: &[u8]) -> anyhow::Result<()> {
    if std::fs::read(dst).is_ok_and(|old| old == data) {
        return Ok(());
    }
    let tmp = dst.with_extension("npu-sim-tmp");
    std::fs::write(&tmp, data).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, dst).with_context(|| format!("installing {}", dst.display()))?;
    Ok(())
}

fn mtime(p: &Path) -> Option<std::time::SystemTime> {
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

/// Compiles the C workload twice: linked against the CANN libraries like a real application,
/// and a dlopen-only variant that links none of them.
fn build_app(src_dir: &Path, dest: &Path, cc: &str) -> anyhow::Result<()> {
    let lib = dest.join(TOOLKIT_LIB);
    let inputs = ["app.c", "cann.h", "eager.c", "cann_ops.h"]
        .map(|f| src_dir.join(f))
        .into_iter()
        .chain(
            [
                "libascendcl.so",
                "libruntime.so",
                "libhccl.so",
                "libms_tools_ext.so",
            ]
            .map(|l| lib.join(l)),
        );
    let newest = inputs.filter_map(|p| mtime(&p)).max();
    for (out, linked) in [("npu-sim-app", true), ("npu-sim-app-dlopen", false)] {
        let out = dest.join("bin").join(out);
        if mtime(&out).zip(newest).is_some_and(|(o, n)| o >= n) {
            continue;
        }
        let mut cmd = Command::new(cc);
        cmd.args([
            "-std=gnu11",
            "-O2",
            "-g",
            "-Wall",
            "-Wextra",
            "-rdynamic",
            "-pthread",
            "-I",
        ])
        .arg(src_dir)
        .arg(src_dir.join("app.c"))
        .arg("-o")
        .arg(&out);
        if linked {
            cmd.arg(format!("-L{}", lib.display()))
                .args(["-lascendcl", "-lruntime", "-lhccl", "-lms_tools_ext"])
                .arg(format!(
                    "-Wl,-rpath,$ORIGIN/../{TOOLKIT_LIB}:$ORIGIN/../{DRIVER_LIB}"
                ));
        } else {
            cmd.arg("-DNPU_SIM_DLOPEN_ONLY");
        }
        cmd.arg("-ldl");
        run_checked(&mut cmd)?;
    }
    Ok(())
}

fn set_env(dest: &Path) -> String {
    let d = dest.display();
    format!(
        "# Generated by `cargo xtask sim`. Source it like CANN's set_env.sh.\n\
         export NPU_SIM_HOME={d}\n\
         export ASCEND_HOME_PATH={d}/ascend-toolkit/latest\n\
         export ASCEND_TOOLKIT_HOME=\"$ASCEND_HOME_PATH\"\n\
         export LD_LIBRARY_PATH={d}/{TOOLKIT_LIB}:{d}/{DRIVER_LIB}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}\n\
         export PATH={d}/bin${{PATH:+:$PATH}}\n"
    )
}
