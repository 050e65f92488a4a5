//! What the two phases of an aclnn operator do in nnopbase (called by the op libraries through
//! `npu_sim_nnop_prepare` / `npu_sim_nnop_run`):
//!
//! - **first phase**: check the arguments, plan the kernels (a `Cast` first when the input tensors
//!   have different data types, the operator's own kernel, a `ViewCopy` last when the output is
//!   not contiguous), size the workspace, create the executor, and register a PTA cache entry
//!   when torch_npu set a cache key on this thread;
//! - **second phase**: launch the planned kernels on the stream as nnopbase does
//!   (`OpKernelBin::BinLoad`, `InitFunctionHandle`, `RtsArg::LaunchKernel` in hicann/opbase
//!   `src/nnopbase/composite_op/aclnn_engine/`): per kernel `aclrtGetDevice`, the op's binary
//!   loaded once per device with `aclrtBinaryLoadFromData` (magic option by engine), the function
//!   fetched once per tiling key with `aclrtBinaryGetFunctionByEntry`, then
//!   `aclrtLaunchKernelWithHostArgs`; a cache hit replays the recorded function handles with
//!   `aclrtLaunchKernelWithHostArgs` alone (`LaunchArgCache::RunFromCache`); AI CPU kernels go
//!   through `rtAicpuKernelLaunchExWithArgs(KERNEL_TYPE_AICPU, opType, ...)` (`aicpu_task.cpp`).
//!   Then the `op` truth line.
use std::collections::HashMap;
use std::ffi::{CStr, CString, c_char, c_void};
use std::sync::{Arc, LazyLock, Mutex};

use npu_sim_opdev::glue::{NnopArg, NnopOp, kind};
use npu_sim_opdev::kernel::{self, engine};
use npu_sim_opdev::status::{
    ACLNN_ERR_INNER_NULLPTR, ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR,
    ACLNN_ERR_RUNTIME_ERROR, ACLNN_SUCCESS,
};
use npu_sim_opdev::truth::{KernelRecord, OpRecord, PhaseRef};

use crate::executor::{self, CachedLaunch, Exec, ExecState, Plan, Planned};
use crate::objects::{self, Object, Tensor};

/// `aclrtBinaryLoadOption` / `aclrtBinaryLoadOptions` (acl_rt.h).
#[repr(C)]
pub(crate) struct LoadOption {
    ty: u32,
    value: [u32; 4],
}
#[repr(C)]
pub(crate) struct LoadOptions {
    options: *const LoadOption,
    num_opt: usize,
}
const ACL_RT_BINARY_LOAD_OPT_MAGIC: u32 = 2;

/// `aclrtLaunchKernelAttr` / `aclrtLaunchKernelCfg` (acl_rt.h).
#[repr(C)]
pub(crate) struct LaunchAttr {
    id: u32,
    value: [u32; 4],
}
#[repr(C)]
pub(crate) struct LaunchCfg {
    attrs: *mut LaunchAttr,
    num_attrs: usize,
}
const ACL_RT_LAUNCH_KERNEL_ATTR_SCHEM_MODE: u32 = 1;
const ACL_RT_LAUNCH_KERNEL_ATTR_DYN_UBUF_SIZE: u32 = 2;

/// `rtAicpuArgsEx_t` (rt_external_kernel.h).
#[repr(C)]
pub(crate) struct AicpuArgsEx {
    args: *mut c_void,
    host_input_info_ptr: *mut c_void,
    kernel_offset_info_ptr: *mut c_void,
    args_size: u32,
    host_input_info_num: u16,
    kernel_offset_info_num: u16,
    so_name_addr_offset: u16,
    kernel_name_addr_offset: u16,
    is_no_need_h2d_copy: bool,
    reserved: [u8; 3],
}
/// `KERNEL_TYPE_AICPU` (rtKernelType_t).
const KERNEL_TYPE_AICPU: u32 = 2;

npu_sim_common::import_table! {
    pub(crate) struct Acl from "libascendcl.so" {
        fn aclrtGetDevice(deviceId: *mut i32) -> i32;
        fn aclrtBinaryLoadFromData(data: *const c_void, length: usize, options: *const LoadOptions, binHandle: *mut *mut c_void) -> i32;
        fn aclrtBinaryGetFunctionByEntry(binHandle: *mut c_void, funcEntry: u64, funcHandle: *mut *mut c_void) -> i32;
        fn aclrtLaunchKernelWithHostArgs(funcHandle: *mut c_void, numBlocks: u32, stream: *mut c_void, cfg: *mut LaunchCfg, hostArgs: *mut c_void, argsSize: usize, placeHolderArray: *mut c_void, placeHolderNum: usize) -> i32;
    }
}

npu_sim_common::import_table! {
    pub(crate) struct Rt from "libruntime.so" {
        fn rtAicpuKernelLaunchExWithArgs(kernelType: u32, opName: *const c_char, numBlocks: u32, argsInfo: *const AicpuArgsEx, smDesc: *mut c_void, stm: *mut c_void, flags: u32) -> i32;
        fn npu_sim_rt_last_task(stm: *mut c_void, devId: *mut u32, streamId: *mut u32, taskId: *mut u32) -> i32;
    }
}

/// What the first phase needs of a tensor argument.
struct TensorInfo {
    handle: usize,
    dtype: i32,
    numel: u64,
    contiguous: bool,
    data: u64,
}

impl TensorInfo {
    fn of(handle: usize, t: &Tensor) -> TensorInfo {
        TensorInfo {
            handle,
            dtype: t.dtype,
            numel: t.numel(),
            contiguous: t.contiguous(),
            data: t.data,
        }
    }
}

// SAFETY: unsafe because callers must pass NULL or a NUL-terminated string.
unsafe fn text(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: non-null and NUL-terminated by the caller's contract.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// Checks the arguments; returns (inputs, outputs) tensors.
fn collect(args: &[NnopArg]) -> Result<(Vec<TensorInfo>, Vec<TensorInfo>), i32> {
    let r = objects::registry();
    let (mut ins, mut outs) = (Vec::new(), Vec::new());
    for a in args {
        if a.kind == kind::VALUE {
            continue;
        }
        if a.value == 0 {
            if a.optional != 0 {
                continue;
            }
            return Err(ACLNN_ERR_PARAM_NULLPTR);
        }
        let obj = r
            .get(&(a.value as usize))
            .map(|b| &**b)
            .ok_or(ACLNN_ERR_PARAM_INVALID)?;
        let to = if matches!(a.kind, kind::TENSOR_OUT | kind::TENSOR_LIST_OUT) {
            &mut outs
        } else {
            &mut ins
        };
        match (a.kind, obj) {
            (kind::TENSOR_IN | kind::TENSOR_OUT, Object::Tensor(t)) => {
                to.push(TensorInfo::of(a.value as usize, t));
            }
            (kind::TENSOR_LIST_IN | kind::TENSOR_LIST_OUT, Object::TensorList(list)) => {
                for h in list {
                    if let Some(Object::Tensor(t)) = r.get(h).map(|b| &**b) {
                        to.push(TensorInfo::of(*h, t));
                    }
                }
            }
            (kind::SCALAR, Object::Scalar { .. })
            | (kind::INT_ARRAY, Object::IntArray(_))
            | (kind::BOOL_ARRAY, Object::BoolArray(_))
            | (kind::FLOAT_ARRAY, Object::FloatArray(_))
            | (kind::SCALAR_LIST, Object::ScalarList(_)) => {}
            _ => return Err(ACLNN_ERR_PARAM_INVALID),
        }
    }
    Ok((ins, outs))
}

fn block_dim(engine: u8, numel: u64) -> u32 {
    let (per_block, cores) = match engine {
        engine::AICPU => return 1,
        engine::CUBE => (64 * 1024, 24),
        _ => (4096, 48),
    };
    numel.div_ceil(per_block).clamp(1, cores) as u32
}

/// Op types whose kernels need a workspace besides the cube ones.
const WORKSPACE_OPS: [&str; 14] = [
    "Reduce", "Norm", "Softmax", "Sort", "TopK", "Cum", "Mean", "Var", "Std", "Sum", "Arg",
    "Unique", "Nonzero", "Max",
];

fn workspace_size(op_type: &str, engine: u8, numel: u64) -> u64 {
    if engine == engine::CUBE {
        16 << 20
    } else if WORKSPACE_OPS.iter().any(|w| op_type.contains(w)) {
        32 * 1024 + numel.min(1 << 20) * 4 / 64
    } else {
        0
    }
}

fn plan(op_type: &str, eng: u8, ins: &[TensorInfo], outs: &[TensorInfo]) -> Vec<Planned> {
    let numel = outs.iter().chain(ins).map(|t| t.numel).max().unwrap_or(1);
    let dtype = outs.first().or(ins.first()).map_or(0, |t| t.dtype);
    let main = Planned {
        op_type: op_type.to_string(),
        engine: eng,
        tiling_key: if eng == engine::AICPU {
            0
        } else {
            kernel::tiling_key(dtype, numel)
        },
        block_dim: block_dim(eng, numel),
    };
    if eng == engine::AICPU {
        return vec![main];
    }
    let mut v = Vec::with_capacity(3);
    // Type promotion: inputs of different data types get a Cast first.
    if let Some(first) = ins.first().filter(|_| op_type != "Cast")
        && let Some(other) = ins.iter().find(|t| t.dtype != first.dtype)
    {
        let low = if dtype_rank(other.dtype) < dtype_rank(first.dtype) {
            other
        } else {
            first
        };
        v.push(Planned {
            op_type: "Cast".into(),
            engine: engine::VECTOR,
            tiling_key: kernel::tiling_key(low.dtype, low.numel),
            block_dim: block_dim(engine::VECTOR, low.numel),
        });
    }
    v.push(main);
    if outs.first().is_some_and(|o| !o.contiguous) {
        v.push(Planned {
            op_type: "ViewCopy".into(),
            engine: engine::VECTOR,
            tiling_key: kernel::tiling_key(dtype, numel),
            block_dim: block_dim(engine::VECTOR, numel),
        });
    }
    v
}

/// Which of two data types a promotion converts (the lower rank is cast).
fn dtype_rank(dt: i32) -> i32 {
    use npu_sim_opdev::dtype::*;
    match dt {
        ACL_BOOL => 0,
        ACL_UINT8 | ACL_INT8 => 1,
        ACL_INT16 | ACL_UINT16 => 2,
        ACL_INT32 | ACL_UINT32 => 3,
        ACL_INT64 | ACL_UINT64 => 4,
        ACL_FLOAT16 | ACL_BF16 => 5,
        ACL_FLOAT => 6,
        ACL_DOUBLE => 7,
        _ => 8,
    }
}

/// First phase of an operator (see the module documentation). Not a CANN API.
// SAFETY: the C caller's contract (the op libraries): `op` is valid, `args` holds `nargs`
// entries, the out-parameters are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn npu_sim_nnop_prepare(
    op: *const NnopOp,
    args: *const NnopArg,
    nargs: usize,
    workspaceSize: *mut u64,
    executor: *mut *mut c_void,
) -> i32 {
    // nnopbase's CheckPhase1Params.
    if workspaceSize.is_null() || executor.is_null() {
        return ACLNN_ERR_PARAM_NULLPTR;
    }
    // SAFETY: a valid NnopOp from the op library.
    let Some(op) = (unsafe { op.as_ref() }) else {
        return ACLNN_ERR_INNER_NULLPTR;
    };
    let args = if nargs == 0 || args.is_null() {
        &[][..]
    } else {
        // SAFETY: `nargs` entries at `args`, per the contract.
        unsafe { std::slice::from_raw_parts(args, nargs) }
    };
    let (ins, outs) = match collect(args) {
        Ok(t) => t,
        Err(code) => return code,
    };
    // SAFETY: the NnopOp's strings are NUL-terminated statics of the op library.
    let (api, op_type) = unsafe { (text(op.api), text(op.op_type)) };
    let kernels = plan(&op_type, op.engine, &ins, &outs);
    let numel = outs.iter().chain(&ins).map(|t| t.numel).max().unwrap_or(1);
    let plan = Arc::new(Plan {
        id: executor::next_id(),
        api,
        workspace_size: workspace_size(&op_type, op.engine, numel),
        kernels,
        phase1: PhaseRef::current(),
    });
    let cache = if op.engine == engine::AICPU {
        // AI CPU tasks abandon the cache (nnopbase AddToKernelLauncherListAiCpu).
        None
    } else {
        executor::cache_entry_for(&plan)
    };
    let inputs = ins.len();
    let tensors = ins
        .iter()
        .chain(&outs)
        .map(|t| (t.handle, t.data))
        .collect();
    let ws = plan.workspace_size;
    let h = executor::add(Exec::Plain(Mutex::new(ExecState {
        plan,
        tensors,
        inputs,
        repeatable: false,
        cache,
    })));
    // SAFETY: both out-parameters are non-null (checked above) and the caller's.
    unsafe {
        workspaceSize.write(ws);
        executor.write(h);
    }
    ACLNN_SUCCESS
}

/// The device binary of each op type, built once (nnopbase reads them from the opp package).
fn binary_of(op_type: &str) -> &'static [u8] {
    static BINS: LazyLock<Mutex<HashMap<String, &'static [u8]>>> = LazyLock::new(Mutex::default);
    let mut b = BINS.lock().unwrap_or_else(|e| e.into_inner());
    b.entry(op_type.to_string())
        .or_insert_with(|| Box::leak(kernel::kernel_binary(op_type).into_boxed_slice()))
}

/// The binary handle of `op_type` on device `dev`, loaded on first use.
fn bin_handle(op_type: &str, eng: u8, dev: i32) -> Result<u64, i32> {
    static HANDLES: LazyLock<Mutex<HashMap<(String, i32), u64>>> = LazyLock::new(Mutex::default);
    // Held across the load, as nnopbase serialises binary loading.
    let mut h = HANDLES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(b) = h.get(&(op_type.to_string(), dev)) {
        return Ok(*b);
    }
    let data = binary_of(op_type);
    let opt = LoadOption {
        ty: ACL_RT_BINARY_LOAD_OPT_MAGIC,
        value: [kernel::binary_magic(eng), 0, 0, 0],
    };
    let opts = LoadOptions {
        options: &opt,
        num_opt: 1,
    };
    let mut bin: *mut c_void = std::ptr::null_mut();
    // SAFETY: `data` is a live binary, `opts` a valid option set, `bin` an out-parameter.
    let rc = unsafe {
        (Acl::get().aclrtBinaryLoadFromData)(data.as_ptr().cast(), data.len(), &opts, &mut bin)
    };
    if rc != 0 {
        return Err(ACLNN_ERR_RUNTIME_ERROR);
    }
    h.insert((op_type.to_string(), dev), bin as u64);
    Ok(bin as u64)
}

/// The function handle of tiling key `key` in binary `bin`, fetched on first use.
fn func_handle(bin: u64, key: u64) -> Result<u64, i32> {
    static FUNCS: LazyLock<Mutex<HashMap<(u64, u64), u64>>> = LazyLock::new(Mutex::default);
    let mut f = FUNCS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(h) = f.get(&(bin, key)) {
        return Ok(*h);
    }
    let mut h: *mut c_void = std::ptr::null_mut();
    // SAFETY: `bin` is a handle aclrtBinaryLoadFromData returned; `h` an out-parameter.
    let rc = unsafe { (Acl::get().aclrtBinaryGetFunctionByEntry)(bin as *mut c_void, key, &mut h) };
    if rc != 0 {
        return Err(ACLNN_ERR_RUNTIME_ERROR);
    }
    f.insert((bin, key), h as u64);
    Ok(h as u64)
}

/// The kernel's host arguments: the tensor addresses, then its tiling data.
fn host_args(k: &Planned, addrs: &[u64]) -> Vec<u64> {
    let mut v = Vec::with_capacity(addrs.len() + 4);
    v.extend_from_slice(addrs);
    v.extend_from_slice(&[k.tiling_key, k.block_dim.into(), addrs.len() as u64, 0]);
    v
}

fn launch_with_host_args(func: u64, k: &Planned, stream: *mut c_void, addrs: &[u64]) -> i32 {
    let mut args = host_args(k, addrs);
    let mut attrs = [
        LaunchAttr {
            id: ACL_RT_LAUNCH_KERNEL_ATTR_SCHEM_MODE,
            value: [0; 4],
        },
        LaunchAttr {
            id: ACL_RT_LAUNCH_KERNEL_ATTR_DYN_UBUF_SIZE,
            value: [0; 4],
        },
    ];
    let mut cfg = LaunchCfg {
        attrs: attrs.as_mut_ptr(),
        num_attrs: attrs.len(),
    };
    // SAFETY: `func` is a handle the runtime returned; `cfg` and `args` live across the call.
    unsafe {
        (Acl::get().aclrtLaunchKernelWithHostArgs)(
            func as *mut c_void,
            k.block_dim,
            stream,
            &mut cfg,
            args.as_mut_ptr().cast(),
            args.len() * 8,
            std::ptr::null_mut(),
            0,
        )
    }
}

fn op_type_c(op_type: &str) -> &'static CStr {
    static NAMES: LazyLock<Mutex<HashMap<String, &'static CStr>>> = LazyLock::new(Mutex::default);
    let mut n = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    n.entry(op_type.to_string()).or_insert_with(|| {
        Box::leak(
            CString::new(op_type.replace('\0', ""))
                .unwrap_or_default()
                .into_boxed_c_str(),
        )
    })
}

fn launch_aicpu(k: &Planned, stream: *mut c_void, addrs: &[u64]) -> i32 {
    let mut args = host_args(k, addrs);
    let info = AicpuArgsEx {
        args: args.as_mut_ptr().cast(),
        host_input_info_ptr: std::ptr::null_mut(),
        kernel_offset_info_ptr: std::ptr::null_mut(),
        args_size: (args.len() * 8) as u32,
        host_input_info_num: 0,
        kernel_offset_info_num: 0,
        so_name_addr_offset: 0,
        kernel_name_addr_offset: 0,
        is_no_need_h2d_copy: false,
        reserved: [0; 3],
    };
    // SAFETY: the op type is a NUL-terminated static, `info` and `args` live across the call.
    unsafe {
        (Rt::get().rtAicpuKernelLaunchExWithArgs)(
            KERNEL_TYPE_AICPU,
            op_type_c(&k.op_type).as_ptr(),
            k.block_dim,
            &info,
            std::ptr::null_mut(),
            stream,
            0,
        )
    }
}

/// The record of a kernel just launched on `stream` by this thread.
fn record(k: &Planned, func: u64, stream: *mut c_void, launch_fn: &'static str) -> KernelRecord {
    let (mut dev, mut sid, mut task) = (0u32, 0u32, 0u32);
    // SAFETY: valid out-pointers; the runtime checks the stream handle.
    unsafe { (Rt::get().npu_sim_rt_last_task)(stream, &mut dev, &mut sid, &mut task) };
    KernelRecord {
        name: if k.engine == engine::AICPU {
            k.op_type.clone()
        } else {
            kernel::kernel_symbol(&k.op_type, k.tiling_key)
        },
        op_type: k.op_type.clone(),
        tiling_key: k.tiling_key,
        block_dim: k.block_dim,
        engine: k.engine,
        launch_fn,
        func_handle: func,
        device: dev,
        stream: sid,
        task,
    }
}

/// Launches `k` the first-run way; returns its function handle (0 for AI CPU).
fn launch_planned(k: &Planned, stream: *mut c_void, addrs: &[u64]) -> Result<u64, i32> {
    if k.engine == engine::AICPU {
        return match launch_aicpu(k, stream, addrs) {
            0 => Ok(0),
            _ => Err(ACLNN_ERR_RUNTIME_ERROR),
        };
    }
    let mut dev = 0i32;
    // SAFETY: valid out-pointer.
    if unsafe { (Acl::get().aclrtGetDevice)(&mut dev) } != 0 {
        return Err(ACLNN_ERR_RUNTIME_ERROR);
    }
    let bin = bin_handle(&k.op_type, k.engine, dev)?;
    let func = func_handle(bin, k.tiling_key)?;
    match launch_with_host_args(func, k, stream, addrs) {
        0 => Ok(func),
        _ => Err(ACLNN_ERR_RUNTIME_ERROR),
    }
}

fn launch_fn(eng: u8) -> &'static str {
    if eng == engine::AICPU {
        "rtAicpuKernelLaunchExWithArgs"
    } else {
        "aclrtLaunchKernelWithHostArgs"
    }
}

/// Second phase of an operator (see the module documentation). Not a CANN API.
// SAFETY: the C caller's contract (the op libraries): `op` is valid; `executor` and `stream` are
// handles, checked here and by the runtime.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn npu_sim_nnop_run(
    op: *const NnopOp,
    workspace: *mut c_void,
    workspaceSize: u64,
    executor: *mut c_void,
    stream: *mut c_void,
) -> i32 {
    if executor.is_null() {
        return ACLNN_ERR_PARAM_NULLPTR;
    }
    let Some(exec) = executor::get(executor) else {
        return ACLNN_ERR_PARAM_INVALID;
    };
    if workspaceSize > 0 && workspace.is_null() {
        executor::remove(executor);
        return ACLNN_ERR_PARAM_NULLPTR;
    }
    let phase2 = PhaseRef::current();
    let truth = phase2.is_some();
    let mut kernels = Vec::new();
    let mut ret = ACLNN_SUCCESS;
    let (plan, exec_id, cache_hit, repeatable) = match &*exec {
        Exec::Plain(state) => {
            let (plan, addrs, cache, repeatable) = {
                let s = state.lock().unwrap_or_else(|e| e.into_inner());
                let addrs: Vec<u64> = s.tensors.iter().map(|t| t.1).collect();
                (s.plan.clone(), addrs, s.cache.clone(), s.repeatable)
            };
            let mut launches = Vec::with_capacity(plan.kernels.len());
            for k in &plan.kernels {
                match launch_planned(k, stream, &addrs) {
                    Ok(func) => {
                        if truth {
                            kernels.push(record(k, func, stream, launch_fn(k.engine)));
                        }
                        launches.push(CachedLaunch {
                            planned: k.clone(),
                            func_handle: func,
                        });
                    }
                    Err(code) => {
                        ret = code;
                        break;
                    }
                }
            }
            if let Some(entry) = cache.filter(|_| ret == ACLNN_SUCCESS) {
                let _ = entry.launches.set(launches);
            }
            if !repeatable {
                executor::remove(executor);
            }
            let id = plan.id;
            (plan, id, false, repeatable)
        }
        Exec::Wrap { id, entry, addrs } => {
            let launches = entry.launches.get().map_or(&[][..], |v| v.as_slice());
            for l in launches {
                if launch_with_host_args(l.func_handle, &l.planned, stream, addrs) != 0 {
                    ret = ACLNN_ERR_RUNTIME_ERROR;
                    break;
                }
                if truth {
                    kernels.push(record(
                        &l.planned,
                        l.func_handle,
                        stream,
                        launch_fn(l.planned.engine),
                    ));
                }
            }
            executor::remove(executor);
            (entry.plan.clone(), *id, true, false)
        }
    };
    if truth {
        // SAFETY: a valid NnopOp from the op library.
        let (api, lib) = match unsafe { op.as_ref() } {
            // SAFETY: its strings are NUL-terminated statics of the op library.
            Some(o) => unsafe { (text(o.api), text(o.lib)) },
            None => (String::new(), String::new()),
        };
        OpRecord {
            kind: "aclnn",
            lib: &lib,
            api: &api,
            op: plan.api.strip_prefix("aclnn").unwrap_or(&plan.api),
            executor: executor as u64,
            executor_id: exec_id,
            cache_hit,
            repeatable,
            origin_executor_id: plan.id,
            workspace: workspace as u64,
            workspace_size: workspaceSize,
            stream: stream as u64,
            ret,
            phase1: if cache_hit {
                None
            } else {
                plan.phase1.as_ref()
            },
            phase2: phase2.as_ref(),
            kernels: &kernels,
        }
        .write();
    }
    ret
}
