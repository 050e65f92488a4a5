//! What a build is for: this machine, or aarch64 (Kunpeng hosts) cross-built on x86-64.
//!
//! The cross build uses Debian packages only: Debian's `rustc-web` (the same compiler that
//! builds the BPF programs) with the multiarch `libstd-rust-web-dev:arm64` standard library,
//! and `gcc-aarch64-linux-gnu` as linker and C compiler. rustup's toolchains have no arm64
//! standard library installed, so the cross build never uses them: it runs `/usr/bin/cargo`
//! with `RUSTC=/usr/bin/rustc`, whatever comes first on PATH.
use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::Result;
use clap::ValueEnum;

use crate::{cargo, setup, workspace_root};

/// Architectures `cargo xtask build --target` knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Arch {
    /// The machine this runs on (native build with the usual toolchain).
    Host,
    /// aarch64-unknown-linux-gnu: Kunpeng 920 hosts (Atlas 800T A2 and kin).
    Aarch64,
}

/// Debian packages the aarch64 cross build needs.
pub(crate) const AARCH64_PACKAGES: &[&str] = &[
    "libstd-rust-web-dev:arm64",
    "gcc-aarch64-linux-gnu",
    "libc6-dev-arm64-cross",
];

const AARCH64_TRIPLE: &str = "aarch64-unknown-linux-gnu";
const AARCH64_GCC: &str = "aarch64-linux-gnu-gcc";

impl Arch {
    /// The Rust target triple of a cross build, `None` for the host.
    pub(crate) fn triple(self) -> Option<&'static str> {
        match self {
            Arch::Host => None,
            Arch::Aarch64 => Some(AARCH64_TRIPLE),
        }
    }

    /// Installs what building for this architecture needs (the BPF toolchain always; the
    /// cross compilers and arm64 standard library for aarch64).
    pub(crate) fn setup(self) -> Result<()> {
        setup::run()?;
        if self == Arch::Aarch64 {
            setup::foreign_packages("arm64", AARCH64_PACKAGES)?;
        }
        Ok(())
    }

    /// `cargo SUBCOMMAND` for this architecture, run from the workspace root; for a cross
    /// build with `--target` and the cross linker and C compiler set.
    pub(crate) fn cargo(self, subcommand: &str) -> Command {
        let Some(triple) = self.triple() else {
            let mut cmd = cargo();
            cmd.arg(subcommand);
            return cmd;
        };
        let mut cmd = Command::new("/usr/bin/cargo");
        cmd.current_dir(workspace_root())
            .env("RUSTC", "/usr/bin/rustc")
            // rustup's proxies would otherwise pick rustup's rustdoc and clippy.
            .env_remove("RUSTUP_TOOLCHAIN")
            .env("CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER", AARCH64_GCC)
            .env("CC_aarch64_unknown_linux_gnu", AARCH64_GCC)
            .arg(subcommand)
            .args(["--target", triple]);
        cmd
    }

    /// The C compiler for programs of the simulator tree.
    pub(crate) fn cc(self) -> String {
        match self {
            Arch::Host => std::env::var("CC").unwrap_or_else(|_| "cc".into()),
            Arch::Aarch64 => AARCH64_GCC.into(),
        }
    }

    /// Where cargo puts this architecture's `profile` artifacts.
    pub(crate) fn artifact_dir(self, profile: &str) -> PathBuf {
        let mut dir = target_root();
        if let Some(triple) = self.triple() {
            dir.push(triple);
        }
        dir.join(profile)
    }

    /// The simulator tree's default place for this architecture.
    pub(crate) fn sim_dir(self) -> PathBuf {
        match self.triple() {
            None => target_root().join("npu-sim"),
            Some(triple) => target_root().join(triple).join("npu-sim"),
        }
    }
}

/// The cargo target directory (CARGO_TARGET_DIR, else `target/`), absolute.
pub(crate) fn target_root() -> PathBuf {
    let root = workspace_root();
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || root.join("target"),
        |t| {
            let t = PathBuf::from(t);
            if t.is_absolute() { t } else { root.join(t) }
        },
    )
}

/// Whether `path` is an ELF file for aarch64 (e_machine 183), for the build's own check.
pub(crate) fn is_aarch64_elf(path: &Path) -> bool {
    const EM_AARCH64: u16 = 183;
    std::fs::read(path).is_ok_and(|b| {
        b.len() > 20 && b[..4] == *b"\x7fELF" && u16::from_le_bytes([b[18], b[19]]) == EM_AARCH64
    })
}
