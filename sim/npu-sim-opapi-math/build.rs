//! Generates both phases of the ops-math operators of `../npu-sim-opapi/ops.tsv`.
#[allow(unreachable_pub)]
#[path = "../npu-sim-opdev/src/codegen.rs"]
mod codegen;

fn main() {
    println!("cargo:rerun-if-changed=../npu-sim-opapi/ops.tsv");
    println!("cargo:rerun-if-changed=../npu-sim-opdev/src/codegen.rs");
    let tsv = std::fs::read_to_string("../npu-sim-opapi/ops.tsv").expect("reading ops.tsv");
    let rows: Vec<_> = codegen::parse(&tsv)
        .unwrap_or_else(|e| panic!("ops.tsv: {e}"))
        .into_iter()
        .filter(|r| r.group == "ops-math")
        .collect();
    let src =
        codegen::generate(&rows, "libopapi_math.so").unwrap_or_else(|e| panic!("ops.tsv: {e}"));
    let out = std::path::Path::new(&std::env::var("OUT_DIR").expect("OUT_DIR")).join("ops_gen.rs");
    std::fs::write(&out, src).expect("writing the generated operators");
}
