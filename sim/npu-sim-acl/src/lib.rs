//! `libascendcl.so`: the simulated AscendCL. Like CANN's, each `aclrt*` call checks what ACL
//! itself owns (init state, size rounding, enum translation) and forwards to the `rt*` layer
//! through libruntime.so's exports, so API calls nest (aclrtMemcpy -> rtMemcpy, aclrtLaunchKernel
//! -> rtLaunchKernelByFuncHandleV3). Errors from the runtime are returned unchanged.
#![allow(clippy::missing_safety_doc, non_snake_case)]

pub mod kernel_ext;
mod mdl;
pub mod op;
mod rt;

use std::ffi::{c_char, c_void};
use std::sync::atomic::{AtomicBool, Ordering};

use npu_sim_common::abi::{self, RtArgsEx, RtDevBinary};
use npu_sim_common::trace::{api, out_ptr};

use rt::Rt;

const LIB: &str = "libascendcl.so";
/// moduleId ACL passes for application allocations (APP).
const APP_MODULE_ID: u16 = 33;

type Stream = *mut c_void;

fn rt() -> &'static Rt {
    Rt::get()
}

static INITIALIZED: AtomicBool = AtomicBool::new(false);

// SAFETY: the C caller's contract: `configPath` is null or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclInit(configPath: *const c_char) -> i32 {
    api(
        LIB,
        "aclInit",
        || {
            if INITIALIZED.swap(true, Ordering::SeqCst) {
                abi::ACL_ERROR_REPEAT_INITIALIZE
            } else {
                abi::ACL_SUCCESS
            }
        },
        // SAFETY: `configPath` is null or a NUL-terminated path, per the prototype.
        |a| unsafe {
            a.cstr("configPath", configPath);
        },
    )
}

#[unsafe(no_mangle)]
pub extern "C" fn aclFinalize() -> i32 {
    api(
        LIB,
        "aclFinalize",
        || {
            let r = if INITIALIZED.swap(false, Ordering::SeqCst) {
                abi::ACL_SUCCESS
            } else {
                abi::ACL_ERROR_REPEAT_FINALIZE
            };
            npu_sim_common::core::flush_truth();
            r
        },
        |_| {},
    )
}

#[unsafe(no_mangle)]
pub extern "C" fn aclrtSetDevice(deviceId: i32) -> i32 {
    api(
        LIB,
        "aclrtSetDevice",
        // SAFETY: forwards the caller's arguments to rtSetDevice, which has this function's contract.
        || unsafe { (rt().rtSetDevice)(deviceId) },
        |a| {
            a.i64("deviceId", deviceId.into());
        },
    )
}

#[unsafe(no_mangle)]
pub extern "C" fn aclrtResetDevice(deviceId: i32) -> i32 {
    api(
        LIB,
        "aclrtResetDevice",
        // SAFETY: forwards the caller's arguments to rtDeviceReset, which has this function's contract.
        || unsafe { (rt().rtDeviceReset)(deviceId) },
        |a| {
            a.i64("deviceId", deviceId.into());
        },
    )
}

// SAFETY: the C caller's contract: `deviceId` is null or valid for what the prototype says it
// points to.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetDevice(deviceId: *mut i32) -> i32 {
    api(
        LIB,
        "aclrtGetDevice",
        // SAFETY: forwards the caller's arguments to rtGetDevice, which has this function's contract.
        || unsafe { (rt().rtGetDevice)(deviceId) },
        |a| {
            a.u64("deviceId", deviceId as u64);
        },
    )
}

#[unsafe(no_mangle)]
pub extern "C" fn aclrtSynchronizeDevice() -> i32 {
    api(
        LIB,
        "aclrtSynchronizeDevice",
        // SAFETY: forwards the caller's arguments to rtDeviceSynchronize, which has this function's contract.
        || unsafe { (rt().rtDeviceSynchronize)() },
        |_| {},
    )
}

// SAFETY: the C caller's contract: `stream` is null or valid for what the prototype says it points
// to.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCreateStream(stream: *mut Stream) -> i32 {
    api(
        LIB,
        "aclrtCreateStream",
        // SAFETY: forwards the caller's arguments to rtStreamCreate, which has this function's contract.
        || unsafe { (rt().rtStreamCreate)(stream, 0) },
        |a| {
            a.u64("stream", stream as u64)
                // SAFETY: `stream` is null or the caller's out-parameter, readable once the call returned.
                .u64("out_stream", unsafe { out_ptr(stream) });
        },
    )
}

// SAFETY: the C caller's contract: `stream` is an opaque handle, never trusted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtDestroyStream(stream: Stream) -> i32 {
    api(
        LIB,
        "aclrtDestroyStream",
        // SAFETY: forwards the caller's arguments to rtStreamDestroy, which has this function's contract.
        || unsafe { (rt().rtStreamDestroy)(stream) },
        |a| {
            a.u64("stream", stream as u64);
        },
    )
}

// SAFETY: the C caller's contract: `stream` is an opaque handle, never trusted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtSynchronizeStream(stream: Stream) -> i32 {
    api(
        LIB,
        "aclrtSynchronizeStream",
        // SAFETY: forwards the caller's arguments to rtStreamSynchronize, which has this function's contract.
        || unsafe { (rt().rtStreamSynchronize)(stream) },
        |a| {
            a.u64("stream", stream as u64);
        },
    )
}

// SAFETY: the C caller's contract: `event` is null or valid for what the prototype says it points
// to; `stream` is an opaque handle, never trusted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtStreamWaitEvent(stream: Stream, event: *mut c_void) -> i32 {
    api(
        LIB,
        "aclrtStreamWaitEvent",
        // SAFETY: forwards the caller's arguments to rtStreamWaitEvent, which has this function's contract.
        || unsafe { (rt().rtStreamWaitEvent)(stream, event) },
        |a| {
            a.u64("stream", stream as u64).u64("event", event as u64);
        },
    )
}

// SAFETY: the C caller's contract: `event` is null or valid for what the prototype says it points
// to.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCreateEvent(event: *mut *mut c_void) -> i32 {
    api(
        LIB,
        "aclrtCreateEvent",
        // SAFETY: forwards the caller's arguments to rtEventCreate, which has this function's contract.
        || unsafe { (rt().rtEventCreate)(event) },
        |a| {
            a.u64("event", event as u64)
                // SAFETY: `event` is null or the caller's out-parameter, readable once the call returned.
                .u64("out_event", unsafe { out_ptr(event) });
        },
    )
}

// SAFETY: the C caller's contract: `event` is null or valid for what the prototype says it points
// to.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtDestroyEvent(event: *mut c_void) -> i32 {
    api(
        LIB,
        "aclrtDestroyEvent",
        // SAFETY: forwards the caller's arguments to rtEventDestroy, which has this function's contract.
        || unsafe { (rt().rtEventDestroy)(event) },
        |a| {
            a.u64("event", event as u64);
        },
    )
}

// SAFETY: the C caller's contract: `event` is null or valid for what the prototype says it points
// to; `stream` is an opaque handle, never trusted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtRecordEvent(event: *mut c_void, stream: Stream) -> i32 {
    api(
        LIB,
        "aclrtRecordEvent",
        // SAFETY: forwards the caller's arguments to rtEventRecord, which has this function's contract.
        || unsafe { (rt().rtEventRecord)(event, stream) },
        |a| {
            a.u64("event", event as u64).u64("stream", stream as u64);
        },
    )
}

// SAFETY: the C caller's contract: `event` is null or valid for what the prototype says it points
// to.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtSynchronizeEvent(event: *mut c_void) -> i32 {
    api(
        LIB,
        "aclrtSynchronizeEvent",
        // SAFETY: forwards the caller's arguments to rtEventSynchronize, which has this function's contract.
        || unsafe { (rt().rtEventSynchronize)(event) },
        |a| {
            a.u64("event", event as u64);
        },
    )
}

/// aclrtMemMallocPolicy -> rtMemType_t (memory type | page policy), as CANN's acl layer does.
fn mem_type(policy: u32) -> Option<u32> {
    let page = match policy & 0xff {
        0 => 0x400,
        1 | 6 => 0x800,
        2 => 0x1000,
        3 => 0x2000,
        4 | 7 => 0x4000,
        5 => 0x8000,
        _ => return None,
    };
    let ty = match policy & 0xff00 {
        0 => 0x0,
        0x0100 => 0x4,
        0x1000 => 0x2,
        _ => return None,
    };
    Some(ty | page)
}

// SAFETY: the C caller's contract: `devPtr` is null or valid for what the prototype says it points
// to.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMalloc(devPtr: *mut *mut c_void, size: usize, policy: u32) -> i32 {
    api(
        LIB,
        "aclrtMalloc",
        || {
            let Some(ty) = mem_type(policy).filter(|_| size > 0) else {
                return abi::ACL_ERROR_INVALID_PARAM;
            };
            // CANN pads every allocation: round up to 32 bytes, plus 32.
            let padded = (size as u64).div_ceil(32) * 32 + 32;
            // SAFETY: forwards the caller's arguments to rtMalloc, which has this function's contract.
            unsafe { (rt().rtMalloc)(devPtr, padded, ty, APP_MODULE_ID) }
        },
        |a| {
            a.u64("devPtr", devPtr as u64)
                .u64("size", size as u64)
                .u64("policy", policy.into());
            // SAFETY: `devPtr` is null or the caller's out-parameter, readable once the call returned.
            a.u64("out_ptr", unsafe { out_ptr(devPtr) });
        },
    )
}

// SAFETY: the C caller's contract: `devPtr` is null or valid for what the prototype says it points
// to.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtFree(devPtr: *mut c_void) -> i32 {
    api(
        LIB,
        "aclrtFree",
        // SAFETY: forwards the caller's arguments to rtFree, which has this function's contract.
        || unsafe { (rt().rtFree)(devPtr) },
        |a| {
            a.u64("devPtr", devPtr as u64);
        },
    )
}

// SAFETY: the C caller's contract: `hostPtr` is null or valid for what the prototype says it
// points to.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMallocHost(hostPtr: *mut *mut c_void, size: usize) -> i32 {
    api(
        LIB,
        "aclrtMallocHost",
        // SAFETY: forwards the caller's arguments to rtMallocHost, which has this function's contract.
        || unsafe { (rt().rtMallocHost)(hostPtr, size as u64, APP_MODULE_ID) },
        |a| {
            a.u64("hostPtr", hostPtr as u64).u64("size", size as u64);
            // SAFETY: `hostPtr` is null or the caller's out-parameter, readable once the call returned.
            a.u64("out_ptr", unsafe { out_ptr(hostPtr) });
        },
    )
}

// SAFETY: the C caller's contract: `hostPtr` is null or valid for what the prototype says it
// points to.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtFreeHost(hostPtr: *mut c_void) -> i32 {
    api(
        LIB,
        "aclrtFreeHost",
        // SAFETY: forwards the caller's arguments to rtFreeHost, which has this function's contract.
        || unsafe { (rt().rtFreeHost)(hostPtr) },
        |a| {
            a.u64("hostPtr", hostPtr as u64);
        },
    )
}

/// aclrtMemcpyKind -> rtMemcpyKind_t (CANN's MemcpyKindTranslate).
fn copy_kind(kind: u32) -> Option<u32> {
    Some(match kind {
        0..=3 => kind,
        4 => abi::RT_MEMCPY_DEFAULT,
        5 => abi::RT_MEMCPY_HOST_TO_DEVICE_EX,
        6 | 7 => abi::RT_MEMCPY_DEVICE_TO_DEVICE,
        _ => return None,
    })
}

// SAFETY: the C caller's contract: `dst`, `src` are null or valid for what the prototype says they
// point to.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemcpy(
    dst: *mut c_void,
    destMax: usize,
    src: *const c_void,
    count: usize,
    kind: u32,
) -> i32 {
    api(
        LIB,
        "aclrtMemcpy",
        || match copy_kind(kind) {
            // SAFETY: forwards the caller's arguments to rtMemcpy, which has this function's contract.
            Some(k) => unsafe { (rt().rtMemcpy)(dst, destMax as u64, src, count as u64, k) },
            None => abi::ACL_ERROR_INVALID_PARAM,
        },
        |a| {
            a.u64("dst", dst as u64)
                .u64("destMax", destMax as u64)
                .u64("src", src as u64);
            a.u64("count", count as u64).u64("kind", kind.into());
        },
    )
}

// SAFETY: the C caller's contract: `dst`, `src` are null or valid for what the prototype says they
// point to; `stream` is an opaque handle, never trusted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemcpyAsync(
    dst: *mut c_void,
    destMax: usize,
    src: *const c_void,
    count: usize,
    kind: u32,
    stream: Stream,
) -> i32 {
    api(
        LIB,
        "aclrtMemcpyAsync",
        || match copy_kind(kind) {
            // SAFETY: forwards the caller's arguments to rtMemcpyAsync, which has this function's contract.
            Some(k) => unsafe {
                (rt().rtMemcpyAsync)(dst, destMax as u64, src, count as u64, k, stream)
            },
            None => abi::ACL_ERROR_INVALID_PARAM,
        },
        |a| {
            a.u64("dst", dst as u64)
                .u64("destMax", destMax as u64)
                .u64("src", src as u64);
            a.u64("count", count as u64)
                .u64("kind", kind.into())
                .u64("stream", stream as u64);
        },
    )
}

// SAFETY: the C caller's contract: `devPtr` is null or valid for what the prototype says it points
// to.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemset(
    devPtr: *mut c_void,
    maxCount: usize,
    value: i32,
    count: usize,
) -> i32 {
    api(
        LIB,
        "aclrtMemset",
        // SAFETY: forwards the caller's arguments to rtMemset, which has this function's contract.
        || unsafe { (rt().rtMemset)(devPtr, maxCount as u64, value as u32, count as u64) },
        |a| {
            a.u64("devPtr", devPtr as u64)
                .u64("maxCount", maxCount as u64)
                .i64("value", value.into());
            a.u64("count", count as u64);
        },
    )
}

// SAFETY: the C caller's contract: `devPtr` is null or valid for what the prototype says it points
// to; `stream` is an opaque handle, never trusted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemsetAsync(
    devPtr: *mut c_void,
    maxCount: usize,
    value: i32,
    count: usize,
    stream: Stream,
) -> i32 {
    api(
        LIB,
        "aclrtMemsetAsync",
        // SAFETY: forwards the caller's arguments to rtMemsetAsync, which has this function's contract.
        || unsafe {
            (rt().rtMemsetAsync)(devPtr, maxCount as u64, value as u32, count as u64, stream)
        },
        |a| {
            a.u64("devPtr", devPtr as u64)
                .u64("maxCount", maxCount as u64)
                .i64("value", value.into());
            a.u64("count", count as u64).u64("stream", stream as u64);
        },
    )
}

/// `aclrtBinaryLoadOption`: a type and a 16-byte value union.
#[repr(C)]
struct LoadOption {
    ty: u32,
    value: [u32; 4],
}

/// `aclrtBinaryLoadOptions`.
#[repr(C)]
struct LoadOptions {
    options: *const LoadOption,
    num_opt: usize,
}

/// ACL_RT_BINARY_LOAD_OPT_MAGIC: the option's value is the binary's rtDevBinary magic.
const LOAD_OPT_MAGIC: u32 = 2;

/// The binary's magic: from a MAGIC option, else ELF or plain by the blob's first bytes.
// SAFETY: unsafe because callers must pass `length` readable bytes at `data` and a null or
// valid `options` whose array has `num_opt` entries.
unsafe fn binary_magic(data: *const c_void, length: usize, options: *const LoadOptions) -> u32 {
    // SAFETY: NULL or a valid options struct with `num_opt` entries.
    if let Some(o) = unsafe { options.as_ref() }.filter(|o| !o.options.is_null()) {
        // SAFETY: a non-null `options` array holds `num_opt` entries, per the prototype.
        let opts = unsafe { std::slice::from_raw_parts(o.options, o.num_opt) };
        if let Some(m) = opts.iter().find(|x| x.ty == LOAD_OPT_MAGIC) {
            return m.value[0];
        }
    }
    // SAFETY: the caller passes `length` readable bytes at `data`.
    let is_elf = !data.is_null()
        && length >= 4
        && unsafe { std::slice::from_raw_parts(data.cast::<u8>(), 4) } == b"\x7fELF";
    if is_elf {
        abi::RT_DEV_BINARY_MAGIC_ELF
    } else {
        abi::RT_DEV_BINARY_MAGIC_PLAIN
    }
}

// SAFETY: the C caller's contract: `data`, `options`, `binHandle` are null or valid for what the
// prototype says it points to.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtBinaryLoadFromData(
    data: *const c_void,
    length: usize,
    options: *const c_void,
    binHandle: *mut *mut c_void,
) -> i32 {
    api(
        LIB,
        "aclrtBinaryLoadFromData",
        || {
            if data.is_null() || length == 0 || binHandle.is_null() {
                return abi::ACL_ERROR_INVALID_PARAM;
            }
            // SAFETY: `data` holds `length` bytes and `options` is null or a valid option set,
            // which is what binary_magic requires.
            let magic = unsafe { binary_magic(data, length, options.cast()) };
            let bin = RtDevBinary {
                magic,
                version: 0,
                data,
                length: length as u64,
            };
            // SAFETY: forwards the caller's arguments to rtBinaryLoad, which has this function's contract.
            unsafe { (rt().rtBinaryLoad)(&bin, binHandle) }
        },
        |a| {
            a.u64("data", data as u64)
                .u64("length", length as u64)
                .u64("options", options as u64);
            a.u64("binHandle", binHandle as u64)
                // SAFETY: `binHandle` is null or the caller's out-parameter, readable once the call returned.
                .u64("out_handle", unsafe { out_ptr(binHandle) });
        },
    )
}

// SAFETY: the C caller's contract: `binHandle`, `funcHandle` are null or valid for what the
// prototype says it points to; `kernelName` is null or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtBinaryGetFunction(
    binHandle: *mut c_void,
    kernelName: *const c_char,
    funcHandle: *mut *mut c_void,
) -> i32 {
    api(
        LIB,
        "aclrtBinaryGetFunction",
        // SAFETY: forwards the caller's arguments to rtBinaryGetFunctionByName, which has this function's contract.
        || unsafe { (rt().rtBinaryGetFunctionByName)(binHandle, kernelName, funcHandle) },
        |a| {
            a.u64("binHandle", binHandle as u64);
            // SAFETY: `kernelName` is null or a NUL-terminated string, per the prototype.
            unsafe { a.cstr("kernelName", kernelName) };
            a.u64("funcHandle", funcHandle as u64)
                // SAFETY: `funcHandle` is null or the caller's out-parameter, readable once the call returned.
                .u64("out_handle", unsafe { out_ptr(funcHandle) });
        },
    )
}

// SAFETY: the C caller's contract: `funcHandle`, `argsData` are null or valid for what the
// prototype says it points to; `stream` is an opaque handle, never trusted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtLaunchKernel(
    funcHandle: *mut c_void,
    blockDim: u32,
    argsData: *const c_void,
    argsSize: usize,
    stream: Stream,
) -> i32 {
    api(
        LIB,
        "aclrtLaunchKernel",
        || {
            let Ok(size) = u32::try_from(argsSize) else {
                return abi::ACL_ERROR_INVALID_PARAM;
            };
            let args = RtArgsEx {
                args: argsData.cast_mut(),
                host_input_info_ptr: std::ptr::null_mut(),
                args_size: size,
                tiling_addr_offset: 0,
                tiling_data_offset: 0,
                host_input_info_num: 0,
                has_tiling: 0,
                is_no_need_h2d_copy: 0,
                reserved: [0; 4],
            };
            // SAFETY: forwards the caller's arguments to rtLaunchKernelByFuncHandleV3, which has this function's contract.
            unsafe {
                (rt().rtLaunchKernelByFuncHandleV3)(
                    funcHandle,
                    blockDim,
                    &args,
                    stream,
                    std::ptr::null(),
                )
            }
        },
        |a| {
            a.u64("funcHandle", funcHandle as u64)
                .u64("blockDim", blockDim.into());
            a.u64("argsData", argsData as u64)
                .u64("argsSize", argsSize as u64)
                .u64("stream", stream as u64);
        },
    )
}

// ---------------------------------------------------------------- models

/// `aclError aclmdlLoadFromMem(const void *model, size_t modelSize, uint32_t *modelId)` (acl
/// `include/external/acl/acl_mdl.h`): loads a model blob of the simulator's format (see
/// `mdl.rs`); its tasks are captured on a model stream and filled into the driver in bulk.
// SAFETY: the C caller's contract: `model` is null or holds `modelSize` bytes; `modelId` is null
// or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclmdlLoadFromMem(
    model: *const c_void,
    modelSize: usize,
    modelId: *mut u32,
) -> i32 {
    api(
        LIB,
        "aclmdlLoadFromMem",
        || {
            if model.is_null() || modelId.is_null() || modelSize == 0 {
                return abi::ACL_ERROR_INVALID_PARAM;
            }
            // SAFETY: `model` holds `modelSize` readable bytes, per the contract.
            let blob = unsafe { std::slice::from_raw_parts(model.cast::<u8>(), modelSize) };
            match mdl::load(blob) {
                Ok(id) => {
                    // SAFETY: checked non-null; the caller's out-parameter.
                    unsafe { *modelId = id };
                    abi::ACL_SUCCESS
                }
                Err(e) => e,
            }
        },
        |a| {
            a.u64("model", model as u64)
                .u64("modelSize", modelSize as u64)
                .u64("modelId", modelId as u64);
            if !modelId.is_null() {
                // SAFETY: non-null out-parameter.
                a.u64("out_model_id", unsafe { *modelId }.into());
            }
        },
    )
}

/// Runs model `modelId` on `stream` (NULL: the default stream) with `rtModelExecute`.
fn execute(modelId: u32, stream: Stream) -> i32 {
    let Some(m) = mdl::find(modelId) else {
        return abi::ACL_ERROR_INVALID_PARAM;
    };
    // SAFETY: the model handle libruntime gave us; `stream` is the caller's.
    unsafe { (rt().rtModelExecute)(m.model as *mut c_void, stream, 0) }
}

/// `aclError aclmdlExecute(uint32_t modelId, const aclmdlDataset *input, aclmdlDataset
/// *output)`: synchronous: the model-execute task on the default stream, then a synchronize.
/// The datasets are not used (the blob's addresses are fixed).
#[unsafe(no_mangle)]
pub extern "C" fn aclmdlExecute(modelId: u32, input: *const c_void, output: *mut c_void) -> i32 {
    api(
        LIB,
        "aclmdlExecute",
        || match execute(modelId, std::ptr::null_mut()) {
            // SAFETY: NULL is the default stream.
            0 => unsafe { (rt().rtStreamSynchronize)(std::ptr::null_mut()) },
            e => e,
        },
        |a| {
            a.u64("modelId", modelId.into())
                .u64("input", input as u64)
                .u64("output", output as u64);
        },
    )
}

/// `aclError aclmdlExecuteAsync(uint32_t modelId, const aclmdlDataset *input, aclmdlDataset
/// *output, aclrtStream stream)`: one model-execute task on `stream`.
#[unsafe(no_mangle)]
pub extern "C" fn aclmdlExecuteAsync(
    modelId: u32,
    input: *const c_void,
    output: *mut c_void,
    stream: Stream,
) -> i32 {
    api(
        LIB,
        "aclmdlExecuteAsync",
        || execute(modelId, stream),
        |a| {
            a.u64("modelId", modelId.into())
                .u64("input", input as u64)
                .u64("output", output as u64)
                .u64("stream", stream as u64);
        },
    )
}

/// `aclError aclmdlUnload(uint32_t modelId)`: unbinds and destroys the model stream and model.
#[unsafe(no_mangle)]
pub extern "C" fn aclmdlUnload(modelId: u32) -> i32 {
    api(
        LIB,
        "aclmdlUnload",
        || {
            let Some(m) = mdl::remove(modelId) else {
                return abi::ACL_ERROR_INVALID_PARAM;
            };
            let (model, stream) = (m.model as *mut c_void, m.stream as *mut c_void);
            // SAFETY: handles libruntime gave us.
            unsafe {
                let r = rt();
                let a = (r.rtModelUnbindStream)(model, stream);
                let b = (r.rtStreamDestroy)(stream);
                let c = (r.rtModelDestroy)(model);
                [a, b, c]
                    .into_iter()
                    .find(|&e| e != 0)
                    .unwrap_or(abi::ACL_SUCCESS)
            }
        },
        |a| {
            a.u64("modelId", modelId.into());
        },
    )
}
