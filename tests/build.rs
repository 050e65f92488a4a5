//! Builds the C fixtures the end-to-end tests trace: a shared library and its caller.
use std::{env, path::PathBuf};

fn main() {
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    let cc = cc::Build::new().get_compiler();
    let run = |args: &[&str]| {
        let status = cc
            .to_command()
            .args(args)
            .status()
            .expect("running the C compiler");
        assert!(status.success(), "C compiler failed: {args:?}");
    };
    let lib = out.join("libnpusmoke.so");
    let caller = out.join("smoke_caller");
    run(&[
        "-shared",
        "-fPIC",
        "-O2",
        "-o",
        lib.to_str().expect("utf-8 path"),
        "fixtures/smoke.c",
    ]);
    run(&[
        "-O2",
        "-o",
        caller.to_str().expect("utf-8 path"),
        "fixtures/smoke_caller.c",
        &format!("-L{}", out.display()),
        "-lnpusmoke",
        &format!("-Wl,-rpath,{}", out.display()),
    ]);
    println!("cargo:rerun-if-changed=fixtures");
    println!("cargo:rustc-env=SMOKE_LIB={}", lib.display());
    println!("cargo:rustc-env=SMOKE_CALLER={}", caller.display());
}
