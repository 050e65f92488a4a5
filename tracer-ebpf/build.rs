//! Rebuild the BPF object when the linker changes (it is part of the toolchain).
fn main() {
    if let Ok(linker) = which::which("bpf-linker") {
        println!("cargo:rerun-if-changed={}", linker.display());
    }
}
