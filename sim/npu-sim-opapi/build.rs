//! Generates both phases of every operator of `ops.tsv` (see npu-sim-opdev's codegen).
#[allow(unreachable_pub)]
#[path = "../npu-sim-opdev/src/codegen.rs"]
mod codegen;

fn main() {
    println!("cargo:rerun-if-changed=ops.tsv");
    println!("cargo:rerun-if-changed=../npu-sim-opdev/src/codegen.rs");
    let tsv = std::fs::read_to_string("ops.tsv").expect("reading ops.tsv");
    let rows = codegen::parse(&tsv).unwrap_or_else(|e| panic!("ops.tsv: {e}"));
    let src = codegen::generate(&rows, "libopapi.so").unwrap_or_else(|e| panic!("ops.tsv: {e}"));
    let out = std::path::Path::new(&std::env::var("OUT_DIR").expect("OUT_DIR")).join("ops_gen.rs");
    std::fs::write(&out, src).expect("writing the generated operators");
}
