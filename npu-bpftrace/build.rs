//! Compiles `tracer-ebpf` for the BPF target (with BTF) and leaves the object in OUT_DIR,
//! where `include_bytes_aligned!` embeds it: one binary is all a user copies to a host.
fn main() -> anyhow::Result<()> {
    let toolchain = bpf_toolchain::detect()?;
    println!("cargo:rerun-if-env-changed={}", bpf_toolchain::OVERRIDE_VAR);
    if bpf_toolchain::find_bpf_linker().is_none() {
        anyhow::bail!("bpf-linker not found: run `cargo xtask setup`");
    }
    let name = toolchain.rustup_name();
    let package = aya_build::Package {
        name: "tracer-ebpf",
        root_dir: concat!(env!("CARGO_MANIFEST_DIR"), "/../tracer-ebpf"),
        ..Default::default()
    };
    aya_build::build_ebpf([package], aya_build::Toolchain::Custom(&name))
}
