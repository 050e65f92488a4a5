//! The code generator behind every op library: reads an operator table (see
//! `sim/npu-sim-opapi/ops.tsv`) and writes the Rust source of the two exported phases of each
//! operator, with the parameter list of its header. Build scripts include this file with
//! `#[path]`, so it only uses `std`.
use std::fmt::Write;

/// One operator of a table.
#[derive(Debug, Clone)]
pub struct Row {
    /// `Add` (exported as `aclnnAdd` and `aclnnAddGetWorkspaceSize`).
    pub name: String,
    pub group: String,
    /// Op type of its main kernel.
    pub kernel_op: String,
    /// `vector`, `cube` or `aicpu`.
    pub engine: String,
    /// Header it was transcribed from.
    pub source: String,
    /// (C type, name) of each first-phase parameter before workspaceSize and executor.
    pub params: Vec<(String, String)>,
}

/// Parses a table: `#` comments, then tab-separated rows.
pub fn parse(tsv: &str) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for (i, line) in tsv.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() != 6 {
            return Err(format!("line {}: {} columns, expected 6", i + 1, f.len()));
        }
        let mut params = Vec::new();
        for p in f[5].split(';').filter(|p| !p.trim().is_empty()) {
            let p = p.trim();
            let (ty, name) = p
                .rsplit_once(' ')
                .ok_or_else(|| format!("line {}: parameter {p:?} has no name", i + 1))?;
            params.push((ty.trim().to_string(), name.to_string()));
        }
        rows.push(Row {
            name: f[0].to_string(),
            group: f[1].to_string(),
            kernel_op: f[2].to_string(),
            engine: f[3].to_string(),
            source: f[4].to_string(),
            params,
        });
    }
    Ok(rows)
}

/// How a C parameter type is passed and recorded: (Rust type, nnopbase kind, truth value kind,
/// expression turning the parameter `{}` into its u64 bits).
fn map_type(
    ty: &str,
    name: &str,
) -> Option<(&'static str, &'static str, &'static str, &'static str)> {
    // Outputs: `out...`, `...Out...`, `output`, in-place `...Ref`, and the gradients a backward
    // operator computes (`gradInput`, `gradWeight`; `gradOutput` is an input).
    let is_out = name.starts_with("out")
        || name.contains("Out")
        || name.ends_with("Ref")
        || name == "output"
        || ["gradInput", "gradWeight", "gradBias", "grad_input"].contains(&name);
    let ptr = "{} as u64";
    Some(match ty {
        "const aclTensor*" if is_out => ("*const c_void", "TENSOR_OUT", "PTR", ptr),
        "const aclTensor*" => ("*const c_void", "TENSOR_IN", "PTR", ptr),
        "aclTensor*" => ("*mut c_void", "TENSOR_OUT", "PTR", ptr),
        "const aclTensorList*" if is_out => ("*const c_void", "TENSOR_LIST_OUT", "PTR", ptr),
        "const aclTensorList*" => ("*const c_void", "TENSOR_LIST_IN", "PTR", ptr),
        "aclTensorList*" => ("*mut c_void", "TENSOR_LIST_OUT", "PTR", ptr),
        "const aclScalar*" => ("*const c_void", "SCALAR", "PTR", ptr),
        "aclScalar*" => ("*mut c_void", "SCALAR", "PTR", ptr),
        "const aclIntArray*" => ("*const c_void", "INT_ARRAY", "PTR", ptr),
        "aclIntArray*" => ("*mut c_void", "INT_ARRAY", "PTR", ptr),
        "const aclBoolArray*" => ("*const c_void", "BOOL_ARRAY", "PTR", ptr),
        "const aclFloatArray*" => ("*const c_void", "FLOAT_ARRAY", "PTR", ptr),
        "const aclScalarList*" => ("*const c_void", "SCALAR_LIST", "PTR", ptr),
        "int64_t" | "const int64_t" => ("i64", "VALUE", "I64", ptr),
        "int32_t" | "const int32_t" | "int" | "const int" => {
            ("i32", "VALUE", "I64", "i64::from({}) as u64")
        }
        "int8_t" | "const int8_t" => ("i8", "VALUE", "I64", "i64::from({}) as u64"),
        "aclDataType" | "const aclDataType" => ("i32", "VALUE", "I64", "i64::from({}) as u64"),
        "uint64_t" | "const uint64_t" => ("u64", "VALUE", "U64", "{}"),
        "bool" | "const bool" => ("bool", "VALUE", "BOOL", "u64::from({})"),
        "double" | "const double" => ("f64", "VALUE", "F64", "{}.to_bits()"),
        "float" | "const float" => ("f32", "VALUE", "F64", "f64::from({}).to_bits()"),
        "const char*" | "char*" => ("*const c_char", "VALUE", "STR", ptr),
        _ => return None,
    })
}

fn engine_const(e: &str) -> Result<&'static str, String> {
    Ok(match e {
        "vector" => "VECTOR",
        "cube" => "CUBE",
        "aicpu" => "AICPU",
        _ => return Err(format!("unknown engine {e:?}")),
    })
}

/// The Rust source exporting both phases of every row, for library `lib` (`libopapi.so`). It
/// expects `c_char`, `c_void`, `kind`, `engine`, `OpSpec`, `Param`, `phase1`, `phase2` and `value`
/// (of `std::ffi` and `npu_sim_opdev`) in scope.
pub fn generate(rows: &[Row], lib: &str) -> Result<String, String> {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "// Generated by npu-sim-opdev's codegen from the operator table: {} operators.",
        rows.len()
    );
    let _ = writeln!(s, "const LIB: &str = {lib:?};");
    let _ = writeln!(s, "const LIB_C: &::std::ffi::CStr = c{lib:?};");
    for (i, r) in rows.iter().enumerate() {
        let mut params = String::new();
        let mut sig = String::new();
        let mut vals = String::new();
        for (j, (ty, name)) in r.params.iter().enumerate() {
            let (rty, kind, value, conv) = map_type(ty, name)
                .ok_or_else(|| format!("{}: unsupported parameter type {ty:?}", r.name))?;
            let _ = write!(
                params,
                "Param {{ name: {name:?}, kind: kind::{kind}, value: value::{value}, optional: {} }}, ",
                name.ends_with("Optional")
            );
            let _ = write!(sig, "a{j}: {rty}, ");
            let _ = write!(vals, "{}, ", conv.replace("{}", &format!("a{j}")));
        }
        let api = format!("aclnn{}", r.name);
        let _ = writeln!(s, "\n// {} ({}): {}", api, r.group, r.source);
        let _ = writeln!(s, "static P{i}: [Param; {}] = [{params}];", r.params.len());
        let _ = writeln!(
            s,
            "static S{i}: OpSpec = OpSpec {{ lib: LIB, lib_c: LIB_C, api: {api:?}, api_c: c{api:?}, \
             api_ws: \"{api}GetWorkspaceSize\", op_type: c{:?}, engine: engine::{}, params: &P{i} }};",
            r.kernel_op,
            engine_const(&r.engine)?
        );
        let _ = writeln!(
            s,
            "#[unsafe(no_mangle)]\npub unsafe extern \"C\" fn {api}GetWorkspaceSize({sig}workspace_size: *mut u64, executor: *mut *mut c_void) -> i32 {{\n    \
             // SAFETY: the caller's contract for this prototype is phase1's.\n    \
             unsafe {{ phase1(&S{i}, &[{vals}], workspace_size, executor) }}\n}}"
        );
        let _ = writeln!(
            s,
            "#[unsafe(no_mangle)]\npub unsafe extern \"C\" fn {api}(workspace: *mut c_void, workspace_size: u64, executor: *mut c_void, stream: *mut c_void) -> i32 {{\n    \
             // SAFETY: the caller's contract for this prototype is phase2's.\n    \
             unsafe {{ phase2(&S{i}, workspace, workspace_size, executor, stream) }}\n}}"
        );
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generates_both_phases() {
        let rows = parse(
            "# comment\nAdd\tops-math\tAdd\tvector\th\tconst aclTensor* self;const aclTensor* other;\
             const aclScalar* alpha;aclTensor* out\nSoftmax\tops-nn\tSoftmaxV2\tvector\th\t\
             const aclTensor* self;int64_t dim;const aclTensor* out\n",
        )
        .expect("parses");
        assert_eq!(rows.len(), 2);
        let src = generate(&rows, "libopapi.so").expect("generates");
        assert!(src.contains("pub unsafe extern \"C\" fn aclnnAddGetWorkspaceSize(a0: *const c_void, a1: *const c_void, a2: *const c_void, a3: *mut c_void, workspace_size"));
        assert!(src.contains("pub unsafe extern \"C\" fn aclnnSoftmax(workspace"));
        assert!(src.contains("name: \"out\", kind: kind::TENSOR_OUT"));
        assert!(src.contains("name: \"dim\", kind: kind::VALUE, value: value::I64"));
        assert!(parse("Bad\tx\n").is_err());
        let bad = parse("X\tg\tX\tvector\th\tstd::string s\n").expect("parses");
        assert!(generate(&bad, "l").is_err());
    }
}
