//! `libacl_op_compiler.so`: the single-operator ("aclop") path torch_npu takes for operators
//! without an aclnn implementation (it dlopens this library for `aclopCompileAndExecuteV2`,
//! `aclSetCompileopt` and `aclGetCompileopt*`: Ascend/pytorch
//! `torch_npu/csrc/framework/interface/AclOpCompileInterface.cpp`). Prototypes from
//! `acl/acl_op_compiler.h`.
//!
//! `aclopCompileAndExecuteV2(opType, ...)` compiles an operator the first time it sees its op
//! type, engine and input/output descriptions, then runs it on the stream. The simulator's
//! "compilation" builds the op type's kernel binary (the same ELF as nnopbase's) and registers
//! it once per op type and engine with `rtRegisterAllKernel`; every call launches the kernel of
//! the tiling key chosen for the first output with `rtKernelLaunchWithHandleV2`. GE's own
//! single-op launch code is not published: these two runtime calls are the simulator's choice.
#![allow(clippy::missing_safety_doc, non_snake_case)]

use std::collections::{HashMap, HashSet};
use std::ffi::{CStr, c_char, c_void};
use std::sync::{LazyLock, Mutex};

use npu_sim_common::abi::{self, RtArgsEx, RtDevBinary};
use npu_sim_common::trace::api;
use npu_sim_opdev::kernel::{self, engine};
use npu_sim_opdev::truth::{KernelRecord, OpRecord, PhaseRef};

const LIB: &str = "libacl_op_compiler.so";

/// `aclopEngineType`.
const ACL_ENGINE_VECTOR: i32 = 2;

npu_sim_common::import_table! {
    struct Acl from "libascendcl.so" {
        fn npu_sim_acl_tensor_desc(desc: *const c_void, dtype: *mut i32, format: *mut i32, numel: *mut u64) -> i32;
        fn npu_sim_acl_data_buffer(buf: *const c_void, addr: *mut u64) -> i32;
        fn npu_sim_acl_is_attr(attr: *const c_void) -> bool;
    }
}

npu_sim_common::import_table! {
    struct Rt from "libruntime.so" {
        fn rtRegisterAllKernel(bin: *const RtDevBinary, hdl: *mut *mut c_void) -> i32;
        fn rtKernelLaunchWithHandleV2(hdl: *mut c_void, tilingKey: u64, blockDim: u32, argsInfo: *mut RtArgsEx, smDesc: *mut c_void, stm: *mut c_void, cfgInfo: *const c_void) -> i32;
        fn npu_sim_rt_last_task(stm: *mut c_void, devId: *mut u32, streamId: *mut u32, taskId: *mut u32) -> i32;
    }
}

struct Desc {
    dtype: i32,
    numel: u64,
}

/// The descriptions and buffer addresses of `n` tensors.
// SAFETY: unsafe because callers must pass NULL arrays or arrays of `n` entries.
unsafe fn tensors(
    n: i32,
    descs: *const *const c_void,
    bufs: *const *const c_void,
) -> Result<Vec<(Desc, u64)>, i32> {
    let n = usize::try_from(n).map_err(|_| abi::ACL_ERROR_INVALID_PARAM)?;
    if n == 0 {
        return Ok(Vec::new());
    }
    if descs.is_null() || bufs.is_null() {
        return Err(abi::ACL_ERROR_INVALID_PARAM);
    }
    // SAFETY: the caller's contract: `n` entries in each array.
    let (descs, bufs) = unsafe {
        (
            std::slice::from_raw_parts(descs, n),
            std::slice::from_raw_parts(bufs, n),
        )
    };
    let acl = Acl::get();
    descs
        .iter()
        .zip(bufs)
        .map(|(d, b)| {
            let (mut dtype, mut format, mut numel, mut addr) = (0, 0, 0, 0);
            // SAFETY: valid out-pointers; libascendcl checks the handles.
            let ok = unsafe {
                (acl.npu_sim_acl_tensor_desc)(*d, &mut dtype, &mut format, &mut numel) == 0
                    && (acl.npu_sim_acl_data_buffer)(*b, &mut addr) == 0
            };
            if ok {
                Ok((Desc { dtype, numel }, addr))
            } else {
                Err(abi::ACL_ERROR_INVALID_PARAM)
            }
        })
        .collect()
}

/// The registered binary of (op type, engine), compiled and registered on first use; and
/// whether this call's (op type, engine, descriptions) was compiled now.
fn compile(op_type: &str, eng: u8, signature: String) -> Result<(u64, bool), i32> {
    static BINS: LazyLock<Mutex<HashMap<(String, u8), u64>>> = LazyLock::new(Mutex::default);
    static COMPILED: LazyLock<Mutex<HashSet<String>>> = LazyLock::new(Mutex::default);
    let fresh = COMPILED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(signature);
    let mut bins = BINS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(h) = bins.get(&(op_type.to_string(), eng)) {
        return Ok((*h, fresh));
    }
    let data: &'static [u8] = Box::leak(kernel::kernel_binary(op_type).into_boxed_slice());
    let bin = RtDevBinary {
        magic: kernel::binary_magic(eng),
        version: 0,
        data: data.as_ptr().cast(),
        length: data.len() as u64,
    };
    let mut h: *mut c_void = std::ptr::null_mut();
    // SAFETY: `bin` describes a live binary; `h` is an out-parameter.
    let rc = unsafe { (Rt::get().rtRegisterAllKernel)(&bin, &mut h) };
    if rc != 0 {
        return Err(rc);
    }
    bins.insert((op_type.to_string(), eng), h as u64);
    Ok((h as u64, fresh))
}

#[allow(clippy::too_many_arguments)]
// SAFETY: the C caller's contract: `opType` and `opPath` are NULL or NUL-terminated, each array
// is NULL or holds its count of handles; handles are looked up, never trusted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclopCompileAndExecuteV2(
    opType: *const c_char,
    numInputs: i32,
    inputDesc: *const *const c_void,
    inputs: *const *const c_void,
    numOutputs: i32,
    outputDesc: *const *const c_void,
    outputs: *const *const c_void,
    attr: *mut c_void,
    engineType: i32,
    compileFlag: i32,
    opPath: *const c_char,
    stream: *mut c_void,
) -> i32 {
    api(
        LIB,
        "aclopCompileAndExecuteV2",
        || {
            if opType.is_null() {
                return abi::ACL_ERROR_INVALID_PARAM;
            }
            // SAFETY: non-null and NUL-terminated by the caller's contract.
            let op_type = unsafe { CStr::from_ptr(opType) }
                .to_string_lossy()
                .into_owned();
            // SAFETY: the caller's contract for both array pairs.
            let (ins, outs) = match unsafe {
                (
                    tensors(numInputs, inputDesc, inputs),
                    tensors(numOutputs, outputDesc, outputs),
                )
            } {
                (Ok(i), Ok(o)) => (i, o),
                (Err(e), _) | (_, Err(e)) => return e,
            };
            // SAFETY: the handle is only looked up.
            if !attr.is_null() && !unsafe { (Acl::get().npu_sim_acl_is_attr)(attr) } {
                return abi::ACL_ERROR_INVALID_PARAM;
            }
            let eng = if engineType == ACL_ENGINE_VECTOR {
                engine::VECTOR
            } else {
                engine::AICORE
            };
            let signature = ins
                .iter()
                .chain(&outs)
                .fold(format!("{op_type}/{eng}"), |s, (d, _)| {
                    format!("{s}/{}x{}", d.dtype, d.numel)
                });
            let (hdl, compiled) = match compile(&op_type, eng, signature) {
                Ok(c) => c,
                Err(e) => return e,
            };
            let main = outs.first().or(ins.first());
            let numel = main.map_or(1, |(d, _)| d.numel);
            let key = kernel::tiling_key(main.map_or(0, |(d, _)| d.dtype), numel);
            let block_dim = numel.div_ceil(4096).clamp(1, 48) as u32;
            let mut args: Vec<u64> = ins.iter().chain(&outs).map(|(_, a)| *a).collect();
            args.extend_from_slice(&[key, block_dim.into()]);
            let mut info = RtArgsEx {
                args: args.as_mut_ptr().cast(),
                host_input_info_ptr: std::ptr::null_mut(),
                args_size: (args.len() * 8) as u32,
                tiling_addr_offset: 0,
                tiling_data_offset: 0,
                host_input_info_num: 0,
                has_tiling: 1,
                is_no_need_h2d_copy: 0,
                reserved: [0; 4],
            };
            let phase = PhaseRef::current();
            // SAFETY: `hdl` is a registered binary, `info` and `args` live across the call.
            let rc = unsafe {
                (Rt::get().rtKernelLaunchWithHandleV2)(
                    hdl as *mut c_void,
                    key,
                    block_dim,
                    &mut info,
                    std::ptr::null_mut(),
                    stream,
                    std::ptr::null(),
                )
            };
            if phase.is_some() {
                let mut kernels = Vec::new();
                if rc == 0 {
                    let (mut dev, mut sid, mut task) = (0u32, 0u32, 0u32);
                    // SAFETY: valid out-pointers; the runtime checks the stream.
                    unsafe {
                        (Rt::get().npu_sim_rt_last_task)(stream, &mut dev, &mut sid, &mut task)
                    };
                    kernels.push(KernelRecord {
                        name: kernel::kernel_symbol(&op_type, key),
                        op_type: op_type.clone(),
                        tiling_key: key,
                        block_dim,
                        engine: eng,
                        launch_fn: "rtKernelLaunchWithHandleV2",
                        func_handle: hdl,
                        device: dev,
                        stream: sid,
                        task,
                    });
                }
                OpRecord {
                    kind: "aclop",
                    lib: LIB,
                    api: "aclopCompileAndExecuteV2",
                    op: &op_type,
                    executor: 0,
                    executor_id: 0,
                    cache_hit: !compiled,
                    repeatable: false,
                    origin_executor_id: 0,
                    workspace: 0,
                    workspace_size: 0,
                    stream: stream as u64,
                    ret: rc,
                    phase1: None,
                    phase2: phase.as_ref(),
                    kernels: &kernels,
                }
                .write();
            }
            rc
        },
        |a| {
            // SAFETY: NULL or a NUL-terminated string, per the prototype.
            unsafe { a.cstr("opType", opType) };
            a.i64("numInputs", numInputs.into())
                .u64("inputDesc", inputDesc as u64)
                .u64("inputs", inputs as u64);
            a.i64("numOutputs", numOutputs.into())
                .u64("outputDesc", outputDesc as u64)
                .u64("outputs", outputs as u64);
            a.u64("attr", attr as u64)
                .i64("engineType", engineType.into())
                .i64("compileFlag", compileFlag.into());
            // SAFETY: NULL or a NUL-terminated string, per the prototype.
            unsafe { a.cstr("opPath", opPath) };
            a.u64("stream", stream as u64);
        },
    )
}

fn options() -> std::sync::MutexGuard<'static, HashMap<i32, String>> {
    static O: LazyLock<Mutex<HashMap<i32, String>>> = LazyLock::new(Mutex::default);
    O.lock().unwrap_or_else(|e| e.into_inner())
}

// SAFETY: the C caller's contract: `value` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclSetCompileopt(opt: i32, value: *const c_char) -> i32 {
    api(
        LIB,
        "aclSetCompileopt",
        || {
            if value.is_null() {
                return abi::ACL_ERROR_INVALID_PARAM;
            }
            // SAFETY: non-null and NUL-terminated by the caller's contract.
            let v = unsafe { CStr::from_ptr(value) }
                .to_string_lossy()
                .into_owned();
            options().insert(opt, v);
            abi::ACL_SUCCESS
        },
        |a| {
            a.i64("opt", opt.into());
            // SAFETY: NULL or a NUL-terminated string, per the prototype.
            unsafe { a.cstr("value", value) };
        },
    )
}

/// The buffer size `aclGetCompileopt` needs for `opt`: its value's length plus the NUL.
#[unsafe(no_mangle)]
pub extern "C" fn aclGetCompileoptSize(opt: i32) -> u64 {
    api(
        LIB,
        "aclGetCompileoptSize",
        || options().get(&opt).map_or(1, |v| v.len() as u64 + 1),
        |a| {
            a.i64("opt", opt.into());
        },
    )
}

// SAFETY: the C caller's contract: `value` is NULL or has `length` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclGetCompileopt(opt: i32, value: *mut c_char, length: usize) -> i32 {
    api(
        LIB,
        "aclGetCompileopt",
        || {
            let v = options().get(&opt).cloned().unwrap_or_default();
            if value.is_null() || length < v.len() + 1 {
                return abi::ACL_ERROR_INVALID_PARAM;
            }
            // SAFETY: `length` >= len + 1 writable bytes at `value`.
            unsafe {
                std::ptr::copy_nonoverlapping(v.as_ptr(), value.cast::<u8>(), v.len());
                value.add(v.len()).write(0);
            }
            abi::ACL_SUCCESS
        },
        |a| {
            a.i64("opt", opt.into())
                .u64("value", value as u64)
                .u64("length", length as u64);
        },
    )
}
