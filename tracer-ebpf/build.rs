//! Declares `bpf_target_arch` (set by aya-build for BPF builds, derived from the host
//! otherwise) and rebuilds the object when the linker changes.
fn main() -> anyhow::Result<()> {
    if let Ok(linker) = which::which("bpf-linker") {
        println!("cargo:rerun-if-changed={}", linker.display());
    }
    aya_build::emit_bpf_target_arch_cfg()
}
