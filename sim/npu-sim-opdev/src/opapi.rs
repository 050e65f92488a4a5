//! The two phases every exported `aclnn` operator of an op library runs: each generated
//! `aclnnXxxGetWorkspaceSize` and `aclnnXxx` calls [`phase1`] / [`phase2`] with its static
//! [`OpSpec`], inside the API wrapper (so both phases are `api` lines of the ground truth, with
//! the parameters under their header names), and nnopbase does the work.
use std::ffi::{CStr, c_void};

use npu_sim_common::json::Obj;
use npu_sim_common::trace::{api, out_ptr};

use crate::glue::{Nnop, NnopArg, NnopOp, kind};

/// How a parameter's value is written to the ground truth.
pub mod value {
    /// Pointers and handles: an integer.
    pub const PTR: u8 = 0;
    /// Signed integers and enums.
    pub const I64: u8 = 1;
    pub const U64: u8 = 2;
    pub const BOOL: u8 = 3;
    /// `float` and `double` (passed as the bits of an f64).
    pub const F64: u8 = 4;
    /// `const char *`.
    pub const STR: u8 = 5;
}

/// A parameter of a first phase, before `workspaceSize` and `executor`.
pub struct Param {
    /// Its name in the header.
    pub name: &'static str,
    /// [`kind`]: what nnopbase does with it.
    pub kind: u8,
    /// [`value`]: how the truth shows it.
    pub value: u8,
    /// Whether it may be NULL (the header names it `...Optional`).
    pub optional: bool,
}

/// One exported operator.
pub struct OpSpec {
    /// The library exporting it (`libopapi.so`).
    pub lib: &'static str,
    pub lib_c: &'static CStr,
    /// `aclnnAdd`.
    pub api: &'static str,
    pub api_c: &'static CStr,
    /// `aclnnAddGetWorkspaceSize`.
    pub api_ws: &'static str,
    /// The op type of its main kernel (`Add`).
    pub op_type: &'static CStr,
    /// [`crate::kernel::engine`].
    pub engine: u8,
    pub params: &'static [Param],
}

/// Most parameters any operator has.
pub const MAX_PARAMS: usize = 32;

impl OpSpec {
    fn nnop(&self) -> NnopOp {
        NnopOp {
            api: self.api_c.as_ptr(),
            lib: self.lib_c.as_ptr(),
            op_type: self.op_type.as_ptr(),
            engine: self.engine,
        }
    }
}

fn write_value(o: &mut Obj, p: &Param, v: u64) {
    match p.value {
        value::I64 => {
            o.i64(p.name, v as i64);
        }
        value::U64 => {
            o.u64(p.name, v);
        }
        value::BOOL => {
            o.bool(p.name, v != 0);
        }
        value::F64 => {
            let f = f64::from_bits(v);
            if f.is_finite() {
                o.f64(p.name, f);
            } else {
                o.null(p.name);
            }
        }
        value::STR => {
            // SAFETY: the caller's contract for a `const char *` parameter: NULL or a
            // NUL-terminated string.
            unsafe { o.cstr(p.name, v as *const std::ffi::c_char) };
        }
        _ => {
            o.u64(p.name, v);
        }
    }
}

/// `aclnnXxxGetWorkspaceSize(<params>, uint64_t *workspaceSize, aclOpExecutor **executor)`:
/// `vals` holds the parameters (pointers and value bits) in header order.
///
/// # Safety
/// The caller's contract for the operator's prototype: object parameters are NULL or handles
/// (checked by nnopbase), strings are NULL or NUL-terminated, `workspaceSize` and `executor` are
/// NULL or writable.
pub unsafe fn phase1(
    spec: &'static OpSpec,
    vals: &[u64],
    workspace_size: *mut u64,
    executor: *mut *mut c_void,
) -> i32 {
    api(
        spec.lib,
        spec.api_ws,
        || {
            let mut args = [const {
                NnopArg {
                    kind: kind::VALUE,
                    optional: 0,
                    value: 0,
                }
            }; MAX_PARAMS];
            let n = spec.params.len().min(vals.len()).min(MAX_PARAMS);
            for ((a, p), v) in args.iter_mut().zip(spec.params).zip(vals).take(n) {
                *a = NnopArg {
                    kind: p.kind,
                    optional: u8::from(p.optional),
                    value: *v,
                };
            }
            let op = spec.nnop();
            // SAFETY: `op` and `args[..n]` are valid for the call; the out-parameters are the
            // caller's, which nnopbase checks for NULL.
            unsafe {
                (Nnop::get().npu_sim_nnop_prepare)(&op, args.as_ptr(), n, workspace_size, executor)
            }
        },
        |a| {
            for (p, v) in spec.params.iter().zip(vals) {
                write_value(a, p, *v);
            }
            a.u64("workspaceSize", workspace_size as u64)
                .u64("executor", executor as u64);
            if !workspace_size.is_null() {
                // SAFETY: a non-null `workspaceSize` is the caller's writable (so readable)
                // out-parameter.
                a.u64("out_workspace_size", unsafe { *workspace_size });
            }
            // SAFETY: `executor` is null or the caller's out-parameter, readable after the call.
            a.u64("out_executor", unsafe { out_ptr(executor) });
        },
    )
}

/// `aclnnXxx(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, aclrtStream stream)`.
///
/// # Safety
/// The caller's contract: `executor` and `stream` are handles (checked by nnopbase and the
/// runtime), `workspace` is NULL or device memory of `workspaceSize` bytes.
pub unsafe fn phase2(
    spec: &'static OpSpec,
    workspace: *mut c_void,
    workspace_size: u64,
    executor: *mut c_void,
    stream: *mut c_void,
) -> i32 {
    api(
        spec.lib,
        spec.api,
        || {
            let op = spec.nnop();
            // SAFETY: `op` is valid for the call; nnopbase checks the handles.
            unsafe {
                (Nnop::get().npu_sim_nnop_run)(&op, workspace, workspace_size, executor, stream)
            }
        },
        |a| {
            a.u64("workspace", workspace as u64)
                .u64("workspaceSize", workspace_size)
                .u64("executor", executor as u64)
                .u64("stream", stream as u64);
        },
    )
}
