//! `libruntime.so`: the simulated CANN runtime (`rt*` API). Every device task is built as an
//! SQE and handed to the driver with `halSqTaskSend` on the calling thread; a report thread per
//! device collects CQEs with `halCqReportRecv` and wakes waiters.
#![allow(clippy::missing_safety_doc, non_snake_case)]

mod context;
mod elf;
mod event;
mod hal;
mod handles;
mod kernel;
mod memory;
pub mod rts;
mod stream;

use std::ffi::{CStr, c_char, c_void};

use npu_sim_common::abi::{self, RtArgsEx, RtDevBinary, SQE_FLAG_SYNC, Sqe, sqe_off, sqe_type};
use npu_sim_common::json::Obj;
use npu_sim_common::trace::{api, out_ptr};

use kernel::Func;
use memory::Place;

const LIB: &str = "libruntime.so";

type Stm = *mut c_void;

fn rc(r: Result<(), i32>) -> i32 {
    r.err().unwrap_or(abi::ACL_SUCCESS)
}

/// A C string argument as `&str` (invalid UTF-8 is replaced), or a parameter error for NULL.
// SAFETY: unsafe because callers must pass null or a NUL-terminated string that outlives `'a`;
// NULL is checked here.
unsafe fn c_str<'a>(p: *const c_char) -> Result<std::borrow::Cow<'a, str>, i32> {
    if p.is_null() {
        return Err(abi::ACL_ERROR_RT_PARAM_INVALID);
    }
    // SAFETY: non-null, NUL-terminated by the caller's contract.
    Ok(unsafe { CStr::from_ptr(p) }.to_string_lossy())
}

/// Writes `v` to an out-parameter, or fails for NULL.
// SAFETY: unsafe because callers must pass null or a pointer writable as a `T`; NULL is
// checked here.
unsafe fn put<T>(out: *mut T, v: T) -> Result<(), i32> {
    if out.is_null() {
        return Err(abi::ACL_ERROR_RT_PARAM_INVALID);
    }
    // SAFETY: non-null out-parameter supplied by the caller.
    unsafe { out.write(v) };
    Ok(())
}

fn kernel_name(f: Result<&'static Func, i32>, o: &mut Obj) {
    if let Ok(f) = f {
        // SAFETY: Func names are valid C strings.
        unsafe { o.cstr("kernel_name", f.name.ptr) };
    }
}

// ---------------------------------------------------------------- devices

#[unsafe(no_mangle)]
pub extern "C" fn rtSetDevice(devId: i32) -> i32 {
    api(
        LIB,
        "rtSetDevice",
        || rc(context::set_device(devId)),
        |a| {
            a.i64("devId", devId.into());
        },
    )
}

#[unsafe(no_mangle)]
pub extern "C" fn rtDeviceReset(devId: i32) -> i32 {
    api(
        LIB,
        "rtDeviceReset",
        || {
            let r = rc(context::reset_device(devId).map(|streams| {
                for s in &streams {
                    handles::forget_stream(s);
                }
            }));
            npu_sim_common::core::flush_truth();
            r
        },
        |a| {
            a.i64("devId", devId.into());
        },
    )
}

// SAFETY: the C caller's contract: `devId` is null or valid for what the prototype says it points
// to.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtGetDevice(devId: *mut i32) -> i32 {
    api(
        LIB,
        "rtGetDevice",
        // SAFETY: `devId` is the caller's out-parameter; `put` rejects NULL before writing.
        || rc(context::current_device().and_then(|d| unsafe { put(devId, d as i32) })),
        |a| {
            a.u64("devId", devId as u64);
        },
    )
}

// SAFETY: the C caller's contract: `cnt` is null or valid for what the prototype says it points
// to.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtGetDeviceCount(cnt: *mut i32) -> i32 {
    api(
        LIB,
        "rtGetDeviceCount",
        // SAFETY: `cnt` is the caller's out-parameter; `put` rejects NULL before writing.
        || rc(unsafe { put(cnt, context::device_count() as i32) }),
        |a| {
            a.u64("cnt", cnt as u64);
        },
    )
}

#[unsafe(no_mangle)]
pub extern "C" fn rtDeviceSynchronize() -> i32 {
    api(
        LIB,
        "rtDeviceSynchronize",
        || match context::streams_of_current() {
            Ok(streams) => streams
                .iter()
                .map(|s| s.synchronize())
                .fold(0, |acc, e| if acc != 0 { acc } else { e }),
            Err(e) => e,
        },
        |_| {},
    )
}

// ---------------------------------------------------------------- streams and events

// SAFETY: the C caller's contract: `stm` is null or valid for what the prototype says it points
// to.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtStreamCreate(stm: *mut Stm, priority: i32) -> i32 {
    let id = std::cell::Cell::new(None);
    api(
        LIB,
        "rtStreamCreate",
        || {
            rc((|| {
                if stm.is_null() {
                    return Err(abi::ACL_ERROR_RT_PARAM_INVALID);
                }
                let s = context::create_stream()?;
                id.set(Some(s.id));
                // SAFETY: `stm` is the caller's out-parameter; `put` rejects NULL before writing.
                unsafe { put(stm, handles::add_stream(s)) }
            })())
        },
        |a| {
            a.u64("stm", stm as u64).i64("priority", priority.into());
            // SAFETY: `stm` is null or the caller's out-parameter, readable once the call returned.
            a.u64("out_stream", unsafe { out_ptr(stm) });
            if let Some(id) = id.get() {
                a.u64("stream_id", id.into());
            }
        },
    )
}

// SAFETY: the C caller's contract: `stm` is an opaque handle, never trusted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtStreamDestroy(stm: Stm) -> i32 {
    api(
        LIB,
        "rtStreamDestroy",
        || {
            if stm.is_null() {
                return abi::ACL_ERROR_RT_PARAM_INVALID;
            }
            match handles::remove_stream(stm) {
                Some(s) => {
                    context::destroy_stream(&s);
                    abi::ACL_SUCCESS
                }
                None => abi::ACL_ERROR_RT_PARAM_INVALID,
            }
        },
        |a| {
            a.u64("stm", stm as u64);
        },
    )
}

// SAFETY: the C caller's contract: `stm` is an opaque handle, never trusted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtStreamSynchronize(stm: Stm) -> i32 {
    api(
        LIB,
        "rtStreamSynchronize",
        || match handles::stream(stm) {
            Ok(s) => s.synchronize(),
            Err(e) => e,
        },
        |a| {
            a.u64("stm", stm as u64);
        },
    )
}

// SAFETY: the C caller's contract: `evt` is null or valid for what the prototype says it points
// to; `stm` is an opaque handle, never trusted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtStreamWaitEvent(stm: Stm, evt: *mut c_void) -> i32 {
    api(
        LIB,
        "rtStreamWaitEvent",
        || {
            rc((|| {
                let s = handles::stream(stm)?;
                let e = handles::event(evt)?;
                let generation = e.recorded();
                if generation == 0 {
                    return Ok(());
                }
                let mut sqe = Sqe::new(sqe_type::EVENT_WAIT, 0);
                sqe.set_u32(sqe_off::EVENT_ID, e.id)
                    .set_u64(sqe_off::EVENT_GEN, generation);
                s.submit(&mut sqe, None).map(drop)
            })())
        },
        |a| {
            a.u64("stm", stm as u64).u64("evt", evt as u64);
        },
    )
}

// SAFETY: the C caller's contract: `evt` is null or valid for what the prototype says it points
// to.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtEventCreate(evt: *mut *mut c_void) -> i32 {
    api(
        LIB,
        "rtEventCreate",
        // SAFETY: `evt` is the caller's out-parameter; `put` rejects NULL before writing.
        || rc(unsafe { put(evt, handles::add_event(context::new_event())) }),
        |a| {
            a.u64("evt", evt as u64)
                // SAFETY: `evt` is null or the caller's out-parameter, readable once the call returned.
                .u64("out_event", unsafe { out_ptr(evt) });
        },
    )
}

// SAFETY: the C caller's contract: `evt` is null or valid for what the prototype says it points
// to.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtEventDestroy(evt: *mut c_void) -> i32 {
    api(
        LIB,
        "rtEventDestroy",
        || handles::remove_event(evt).map_or(abi::ACL_ERROR_RT_PARAM_INVALID, |_| abi::ACL_SUCCESS),
        |a| {
            a.u64("evt", evt as u64);
        },
    )
}

// SAFETY: the C caller's contract: `evt` is null or valid for what the prototype says it points
// to; `stm` is an opaque handle, never trusted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtEventRecord(evt: *mut c_void, stm: Stm) -> i32 {
    api(
        LIB,
        "rtEventRecord",
        || {
            rc((|| {
                let e = handles::event(evt)?;
                let s = handles::stream(stm)?;
                let generation = e.next_record();
                let mut sqe = Sqe::new(sqe_type::EVENT_RECORD, 0);
                sqe.set_u32(sqe_off::EVENT_ID, e.id)
                    .set_u64(sqe_off::EVENT_GEN, generation);
                s.submit(&mut sqe, Some((e.clone(), generation)))
                    .map(drop)
                    .inspect_err(|_| e.cancel_record(generation))
            })())
        },
        |a| {
            a.u64("evt", evt as u64).u64("stm", stm as u64);
        },
    )
}

// SAFETY: the C caller's contract: `evt` is null or valid for what the prototype says it points
// to.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtEventSynchronize(evt: *mut c_void) -> i32 {
    api(
        LIB,
        "rtEventSynchronize",
        || rc(handles::event(evt).map(|e| e.synchronize())),
        |a| {
            a.u64("evt", evt as u64);
        },
    )
}

// ---------------------------------------------------------------- memory

// SAFETY: the C caller's contract: `devPtr` is null or valid for what the prototype says it points
// to.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtMalloc(
    devPtr: *mut *mut c_void,
    size: u64,
    type_: u32,
    moduleId: u16,
) -> i32 {
    api(
        LIB,
        "rtMalloc",
        || {
            rc((|| {
                if devPtr.is_null() {
                    return Err(abi::ACL_ERROR_RT_PARAM_INVALID);
                }
                context::current_device()?;
                // Low bits: memory type (DEFAULT, HBM, DDR, ...); the rest is the page policy.
                if (type_ & 0x3ff) > 0x100 {
                    return Err(abi::ACL_ERROR_RT_INVALID_MEMORY_TYPE);
                }
                let p = memory::alloc(size, Place::Device)?;
                // SAFETY: `devPtr` is the caller's out-parameter; `put` rejects NULL before writing.
                unsafe { put(devPtr, p) }
            })())
        },
        |a| {
            a.u64("devPtr", devPtr as u64)
                .u64("size", size)
                .u64("type", type_.into())
                .u64("moduleId", moduleId.into());
            // SAFETY: `devPtr` is null or the caller's out-parameter, readable once the call returned.
            a.u64("out_ptr", unsafe { out_ptr(devPtr) });
        },
    )
}

// SAFETY: the C caller's contract: `devPtr` is null or valid for what the prototype says it points
// to.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtFree(devPtr: *mut c_void) -> i32 {
    api(
        LIB,
        "rtFree",
        || rc(memory::free(devPtr, Place::Device)),
        |a| {
            a.u64("devPtr", devPtr as u64);
        },
    )
}

// SAFETY: the C caller's contract: `hostPtr` is null or valid for what the prototype says it
// points to.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtMallocHost(hostPtr: *mut *mut c_void, size: u64, moduleId: u16) -> i32 {
    api(
        LIB,
        "rtMallocHost",
        || {
            rc((|| {
                if hostPtr.is_null() {
                    return Err(abi::ACL_ERROR_RT_PARAM_INVALID);
                }
                let p = memory::alloc(size, Place::Host)?;
                // SAFETY: `hostPtr` is the caller's out-parameter; `put` rejects NULL before writing.
                unsafe { put(hostPtr, p) }
            })())
        },
        |a| {
            a.u64("hostPtr", hostPtr as u64)
                .u64("size", size)
                .u64("moduleId", moduleId.into());
            // SAFETY: `hostPtr` is null or the caller's out-parameter, readable once the call returned.
            a.u64("out_ptr", unsafe { out_ptr(hostPtr) });
        },
    )
}

// SAFETY: the C caller's contract: `hostPtr` is null or valid for what the prototype says it
// points to.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtFreeHost(hostPtr: *mut c_void) -> i32 {
    api(
        LIB,
        "rtFreeHost",
        || rc(memory::free(hostPtr, Place::Host)),
        |a| {
            a.u64("hostPtr", hostPtr as u64);
        },
    )
}

/// Queues an SDMA copy; returns (stream, sequence) so a synchronous caller can wait for it.
fn submit_copy(
    dst: *mut c_void,
    dest_max: u64,
    src: *const c_void,
    cnt: u64,
    kind: u32,
    stm: Option<Stm>,
) -> Result<Option<(std::sync::Arc<stream::Stream>, u64)>, i32> {
    let kind = memory::check_copy(dst, dest_max, src, cnt, kind)?;
    let s = match stm {
        Some(h) => handles::stream(h)?,
        None => context::default_stream()?,
    };
    if cnt == 0 {
        return Ok(None);
    }
    let mut sqe = Sqe::new(sqe_type::SDMA, 0);
    sqe.set_u64(sqe_off::COPY_SRC, src as u64)
        .set_u64(sqe_off::COPY_DST, dst as u64);
    sqe.set_u64(sqe_off::COPY_BYTES, cnt)
        .set_u32(sqe_off::COPY_KIND, kind);
    sqe.set_u32(
        sqe_off::COPY_FLAGS,
        if stm.is_none() { SQE_FLAG_SYNC } else { 0 },
    );
    let seq = s.submit(&mut sqe, None)?;
    Ok(Some((s, seq)))
}

fn copy_args(
    a: &mut Obj,
    dst: *mut c_void,
    dest_max: u64,
    src: *const c_void,
    cnt: u64,
    kind: u32,
) {
    a.u64("dst", dst as u64)
        .u64("destMax", dest_max)
        .u64("src", src as u64)
        .u64("cnt", cnt)
        .u64("kind", kind.into());
}

// SAFETY: the C caller's contract: `dst`, `src` are null or valid for what the prototype says they
// point to.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtMemcpy(
    dst: *mut c_void,
    destMax: u64,
    src: *const c_void,
    cnt: u64,
    kind: u32,
) -> i32 {
    api(
        LIB,
        "rtMemcpy",
        || match submit_copy(dst, destMax, src, cnt, kind, None) {
            Ok(Some((s, seq))) => s.wait_task(seq),
            Ok(None) => abi::ACL_SUCCESS,
            Err(e) => e,
        },
        |a| copy_args(a, dst, destMax, src, cnt, kind),
    )
}

// SAFETY: the C caller's contract: `dst`, `src` are null or valid for what the prototype says they
// point to; `stm` is an opaque handle, never trusted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtMemcpyAsync(
    dst: *mut c_void,
    destMax: u64,
    src: *const c_void,
    cnt: u64,
    kind: u32,
    stm: Stm,
) -> i32 {
    api(
        LIB,
        "rtMemcpyAsync",
        || rc(submit_copy(dst, destMax, src, cnt, kind, Some(stm)).map(drop)),
        |a| {
            copy_args(a, dst, destMax, src, cnt, kind);
            a.u64("stm", stm as u64);
        },
    )
}

fn submit_set(
    p: *mut c_void,
    dest_max: u64,
    val: u32,
    cnt: u64,
    stm: Option<Stm>,
) -> Result<Option<(std::sync::Arc<stream::Stream>, u64)>, i32> {
    memory::check_set(p, dest_max, cnt)?;
    let s = match stm {
        Some(h) => handles::stream(h)?,
        None => context::default_stream()?,
    };
    if cnt == 0 {
        return Ok(None);
    }
    let mut sqe = Sqe::new(sqe_type::MEMSET, 0);
    sqe.set_u64(sqe_off::SET_PTR, p as u64)
        .set_u64(sqe_off::SET_BYTES, cnt)
        .set_u32(sqe_off::SET_VALUE, val);
    sqe.set_u32(
        sqe_off::SET_FLAGS,
        if stm.is_none() { SQE_FLAG_SYNC } else { 0 },
    );
    let seq = s.submit(&mut sqe, None)?;
    Ok(Some((s, seq)))
}

// SAFETY: the C caller's contract: `devPtr` is null or valid for what the prototype says it points
// to.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtMemset(devPtr: *mut c_void, destMax: u64, val: u32, cnt: u64) -> i32 {
    api(
        LIB,
        "rtMemset",
        || match submit_set(devPtr, destMax, val, cnt, None) {
            Ok(Some((s, seq))) => s.wait_task(seq),
            Ok(None) => abi::ACL_SUCCESS,
            Err(e) => e,
        },
        |a| {
            a.u64("devPtr", devPtr as u64)
                .u64("destMax", destMax)
                .u64("val", val.into())
                .u64("cnt", cnt);
        },
    )
}

// SAFETY: the C caller's contract: `ptr` is null or valid for what the prototype says it points
// to; `stm` is an opaque handle, never trusted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtMemsetAsync(
    ptr: *mut c_void,
    destMax: u64,
    val: u32,
    cnt: u64,
    stm: Stm,
) -> i32 {
    api(
        LIB,
        "rtMemsetAsync",
        || rc(submit_set(ptr, destMax, val, cnt, Some(stm)).map(drop)),
        |a| {
            a.u64("ptr", ptr as u64)
                .u64("destMax", destMax)
                .u64("val", val.into())
                .u64("cnt", cnt);
            a.u64("stm", stm as u64);
        },
    )
}

// ---------------------------------------------------------------- kernels

// SAFETY: the C caller's contract: `bin`, `hdl` are null or valid for what the prototype says they
// point to.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtDevBinaryRegister(
    bin: *const RtDevBinary,
    hdl: *mut *mut c_void,
) -> i32 {
    api(
        LIB,
        "rtDevBinaryRegister",
        || {
            rc((|| {
                // SAFETY: NULL or a valid rtDevBinary_t.
                let b = unsafe { bin.as_ref() }.ok_or(abi::ACL_ERROR_RT_PARAM_INVALID)?;
                if hdl.is_null() {
                    return Err(abi::ACL_ERROR_RT_PARAM_INVALID);
                }
                let h = kernel::load_binary(b.magic, b.data, b.length)?;
                // SAFETY: `hdl` is the caller's out-parameter; `put` rejects NULL before writing.
                unsafe { put(hdl, h) }
            })())
        },
        |a| {
            a.u64("bin", bin as u64).u64("hdl", hdl as u64);
            // SAFETY: as above.
            if let Some(b) = unsafe { bin.as_ref() } {
                a.u64("magic", b.magic.into()).u64("length", b.length);
            }
            // SAFETY: `hdl` is null or the caller's out-parameter, readable once the call returned.
            a.u64("out_handle", unsafe { out_ptr(hdl) });
        },
    )
}

// SAFETY: the C caller's contract: `bin`, `binHandle` are null or valid for what the prototype
// says it points to.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtBinaryLoad(bin: *const RtDevBinary, binHandle: *mut *mut c_void) -> i32 {
    api(
        LIB,
        "rtBinaryLoad",
        || {
            rc((|| {
                // SAFETY: NULL or a valid rtDevBinary_t.
                let b = unsafe { bin.as_ref() }.ok_or(abi::ACL_ERROR_RT_PARAM_INVALID)?;
                if binHandle.is_null() {
                    return Err(abi::ACL_ERROR_RT_PARAM_INVALID);
                }
                let h = kernel::load_binary(b.magic, b.data, b.length)?;
                // SAFETY: `binHandle` is the caller's out-parameter; `put` rejects NULL before writing.
                unsafe { put(binHandle, h) }
            })())
        },
        |a| {
            a.u64("bin", bin as u64).u64("binHandle", binHandle as u64);
            // SAFETY: as above.
            if let Some(b) = unsafe { bin.as_ref() } {
                a.u64("magic", b.magic.into()).u64("length", b.length);
            }
            // SAFETY: `binHandle` is null or the caller's out-parameter, readable once the call returned.
            a.u64("out_handle", unsafe { out_ptr(binHandle) });
        },
    )
}

// SAFETY: the C caller's contract: `binHandle`, `stubFunc`, `kernelInfoExt` are null or valid for
// what the prototype says it points to; `stubName` is null or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtFunctionRegister(
    binHandle: *mut c_void,
    stubFunc: *const c_void,
    stubName: *const c_char,
    kernelInfoExt: *const c_void,
    funcMode: u32,
) -> i32 {
    api(
        LIB,
        "rtFunctionRegister",
        || {
            // SAFETY: `stubName` is null (rejected by `c_str`) or a NUL-terminated string.
            rc(unsafe { c_str(stubName) }
                .and_then(|name| kernel::register_stub(binHandle, stubFunc, &name)))
        },
        |a| {
            a.u64("binHandle", binHandle as u64)
                .u64("stubFunc", stubFunc as u64);
            // SAFETY: `stubName` is null or a NUL-terminated string, per the prototype.
            unsafe { a.cstr("stubName", stubName) };
            a.u64("kernelInfoExt", kernelInfoExt as u64)
                .u64("funcMode", funcMode.into());
        },
    )
}

// SAFETY: the C caller's contract: `binHandle`, `funcHandle` are null or valid for what the
// prototype says it points to; `kernelName` is null or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtBinaryGetFunctionByName(
    binHandle: *mut c_void,
    kernelName: *const c_char,
    funcHandle: *mut *mut c_void,
) -> i32 {
    api(
        LIB,
        "rtBinaryGetFunctionByName",
        || {
            rc((|| {
                // SAFETY: `kernelName` is null (rejected by `c_str`) or a NUL-terminated string.
                let name = unsafe { c_str(kernelName) }?;
                if funcHandle.is_null() {
                    return Err(abi::ACL_ERROR_RT_PARAM_INVALID);
                }
                let h = kernel::function_by_name(binHandle, &name)?;
                // SAFETY: `funcHandle` is the caller's out-parameter; `put` rejects NULL before writing.
                unsafe { put(funcHandle, h) }
            })())
        },
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

/// Submits kernel `f` on `stm`.
fn launch(
    f: &Func,
    block_dim: u32,
    args: *const c_void,
    args_size: u32,
    stm: Stm,
) -> Result<(), i32> {
    let block_dim = u16::try_from(block_dim)
        .ok()
        .filter(|b| *b > 0)
        .ok_or(abi::ACL_ERROR_RT_PARAM_INVALID)?;
    let s = handles::stream(stm)?;
    let mut sqe = Sqe::new(f.sqe_type, block_dim);
    sqe.set_u64(sqe_off::KERNEL_PC, f.pc)
        .set_u64(sqe_off::KERNEL_NAME, f.name.ptr as u64);
    sqe.set_u64(sqe_off::KERNEL_ARGS, args as u64)
        .set_u32(sqe_off::KERNEL_ARGS_SIZE, args_size);
    s.submit(&mut sqe, None).map(drop)
}

/// (args, argsSize) of an `rtArgsEx_t`, or (NULL, 0).
// SAFETY: unsafe because callers must pass null or a readable rtArgsEx_t; NULL is checked here.
unsafe fn args_ex(a: *const RtArgsEx) -> (*const c_void, u32) {
    // SAFETY: NULL or a valid rtArgsEx_t.
    unsafe { a.as_ref() }.map_or((std::ptr::null(), 0), |a| (a.args, a.args_size))
}

// SAFETY: the C caller's contract: `stubFunc`, `args`, `smDesc` are null or valid for what the
// prototype says it points to; `stm` is an opaque handle, never trusted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtKernelLaunch(
    stubFunc: *const c_void,
    blockDim: u32,
    args: *mut c_void,
    argsSize: u32,
    smDesc: *mut c_void,
    stm: Stm,
) -> i32 {
    api(
        LIB,
        "rtKernelLaunch",
        || rc(kernel::by_stub(stubFunc).and_then(|f| launch(f, blockDim, args, argsSize, stm))),
        |a| {
            a.u64("stubFunc", stubFunc as u64)
                .u64("blockDim", blockDim.into())
                .u64("args", args as u64);
            a.u64("argsSize", argsSize.into())
                .u64("smDesc", smDesc as u64)
                .u64("stm", stm as u64);
            kernel_name(kernel::by_stub(stubFunc), a);
        },
    )
}

// SAFETY: the C caller's contract: `hdl`, `argsInfo`, `smDesc`, `cfgInfo` are null or valid for
// what the prototype says it points to; `stm` is an opaque handle, never trusted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtKernelLaunchWithHandleV2(
    hdl: *mut c_void,
    tilingKey: u64,
    blockDim: u32,
    argsInfo: *mut RtArgsEx,
    smDesc: *mut c_void,
    stm: Stm,
    cfgInfo: *const c_void,
) -> i32 {
    api(
        LIB,
        "rtKernelLaunchWithHandleV2",
        || {
            // SAFETY: `argsInfo` is null (rejected by `args_ex`) or points to an rtArgsEx_t.
            let (args, size) = unsafe { args_ex(argsInfo) };
            rc(kernel::by_tiling_key(hdl, tilingKey)
                .and_then(|f| launch(f, blockDim, args, size, stm)))
        },
        |a| {
            a.u64("hdl", hdl as u64)
                .u64("tilingKey", tilingKey)
                .u64("blockDim", blockDim.into());
            a.u64("argsInfo", argsInfo as u64)
                .u64("smDesc", smDesc as u64)
                .u64("stm", stm as u64);
            a.u64("cfgInfo", cfgInfo as u64);
            kernel_name(kernel::by_tiling_key(hdl, tilingKey), a);
        },
    )
}

// SAFETY: the C caller's contract: `funcHandle`, `argsInfo`, `cfgInfo` are null or valid for what
// the prototype says it points to; `stm` is an opaque handle, never trusted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtLaunchKernelByFuncHandleV3(
    funcHandle: *mut c_void,
    blockDim: u32,
    argsInfo: *const RtArgsEx,
    stm: Stm,
    cfgInfo: *const c_void,
) -> i32 {
    api(
        LIB,
        "rtLaunchKernelByFuncHandleV3",
        || {
            // SAFETY: `argsInfo` is null (rejected by `args_ex`) or points to an rtArgsEx_t.
            let (args, size) = unsafe { args_ex(argsInfo) };
            rc(kernel::by_handle(funcHandle).and_then(|f| launch(f, blockDim, args, size, stm)))
        },
        |a| {
            a.u64("funcHandle", funcHandle as u64)
                .u64("blockDim", blockDim.into());
            a.u64("argsInfo", argsInfo as u64)
                .u64("stm", stm as u64)
                .u64("cfgInfo", cfgInfo as u64);
            kernel_name(kernel::by_handle(funcHandle), a);
        },
    )
}

// SAFETY: the C caller's contract: `soName`, `kernelName`, `args`, `smDesc` are null or valid for
// what the prototype says it points to; `stm` is an opaque handle, never trusted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtCpuKernelLaunch(
    soName: *const c_void,
    kernelName: *const c_void,
    blockDim: u32,
    args: *const c_void,
    argsSize: u32,
    smDesc: *mut c_void,
    stm: Stm,
) -> i32 {
    api(
        LIB,
        "rtCpuKernelLaunch",
        || {
            rc((|| {
                // SAFETY: `soName` is null (rejected by `c_str`) or a NUL-terminated string.
                unsafe { c_str(soName.cast()) }?;
                // SAFETY: `kernelName` is null (rejected by `c_str`) or a NUL-terminated string.
                let name = unsafe { c_str(kernelName.cast()) }?;
                launch(kernel::aicpu(&name), blockDim, args, argsSize, stm)
            })())
        },
        |a| {
            // SAFETY: both names are null or NUL-terminated strings, per the prototype.
            unsafe {
                a.cstr("soName", soName.cast())
                    .cstr("kernelName", kernelName.cast())
            };
            a.u64("blockDim", blockDim.into())
                .u64("args", args as u64)
                .u64("argsSize", argsSize.into());
            a.u64("smDesc", smDesc as u64).u64("stm", stm as u64);
        },
    )
}

// SAFETY: the C caller's contract: `taskId`, `streamId` are null or valid for what the prototype
// says it points to.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtGetTaskIdAndStreamID(taskId: *mut u32, streamId: *mut u32) -> i32 {
    api(
        LIB,
        "rtGetTaskIdAndStreamID",
        || {
            let (t, s) = stream::LAST_TASK.with(|l| l.get());
            // SAFETY: `taskId` and `streamId` are the caller's out-parameters; `put` rejects NULL.
            rc(unsafe { put(taskId, t).and_then(|_| put(streamId, s)) })
        },
        |a| {
            a.u64("taskId", taskId as u64)
                .u64("streamId", streamId as u64);
            if !taskId.is_null() && !streamId.is_null() {
                // SAFETY: non-null out-parameters.
                unsafe {
                    a.u64("out_task_id", (*taskId).into())
                        .u64("out_stream_id", (*streamId).into())
                };
            }
        },
    )
}

// ---------------------------------------------------------------- internal (libhccl)

/// Submits a ready-made SQE (HCCL collectives) on `stm` (NULL: the default stream); the runtime
/// fills in the stream and task ids. Not a CANN API: never recorded as one.
// SAFETY: the C caller's contract: `sqe` is null or valid for what the prototype says it points
// to; `stm` is an opaque handle, never trusted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn npu_sim_rt_submit(stm: Stm, sqe: *const u8) -> i32 {
    if sqe.is_null() {
        return abi::ACL_ERROR_RT_PARAM_INVALID;
    }
    let mut s = Sqe::default();
    // SAFETY: the caller passes one 64-byte SQE.
    unsafe { std::ptr::copy_nonoverlapping(sqe, s.0.as_mut_ptr(), abi::SQE_SIZE) };
    rc(handles::stream(stm).and_then(|st| st.submit(&mut s, None).map(drop)))
}
