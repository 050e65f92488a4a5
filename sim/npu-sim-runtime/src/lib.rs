//! `libruntime.so`: the simulated CANN runtime (`rt*` API). Every device task is built as an
//! SQE and handed to the driver with `halSqTaskSend` on the calling thread; synchronizing calls
//! reclaim finished tasks on their own thread from the SQ head (`halSqCqQuery`) and the stream's
//! logic CQ (`halCqReportRecv`). Synchronous copies and memsets are driver calls (`drvMemcpy`,
//! `drvMemsetD8`), as on 910B.
#![allow(clippy::missing_safety_doc, non_snake_case)]

mod context;
mod elf;
mod event;
mod hal;
mod handles;
mod kernel;
mod memory;
mod model;
pub mod rts;
mod stream;

use std::ffi::{CStr, c_char, c_void};

use npu_sim_common::abi::{self, RtArgsEx, RtDevBinary, Sqe, annot, kind, pl};
use npu_sim_common::env::chip;
use npu_sim_common::json::Obj;
use npu_sim_common::trace::{api, out_ptr};

use hal::Hal;
use kernel::Func;
use memory::Place;
use stream::Submit;

const LIB: &str = "libruntime.so";

/// Bytes one memset copy covers (RT context.hpp `MEM_BLOCK_SIZE`, 64 MiB).
const MEM_BLOCK_SIZE: u64 = 64 << 20;

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
                let mut sqe = Sqe::new(chip().event_wait_type(), kind::EVENT, 0);
                sqe.set_u32(pl::EVENT_ID, e.id)
                    .set_u64(pl::EVENT_GEN, generation);
                s.submit(&mut sqe, Submit::default()).map(drop)
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
                let mut sqe = Sqe::new(chip().event_record_type(), kind::EVENT, 0);
                sqe.set_u32(pl::EVENT_ID, e.id)
                    .set_u64(pl::EVENT_GEN, generation);
                // Events are created with RT_EVENT_DEFAULT, which includes RT_EVENT_TIME_LINE:
                // the record writes a CQE carrying its device time (RT event_task_v100.cc).
                let submit = Submit {
                    event: Some((e.clone(), generation)),
                    concern: true,
                    ..Submit::default()
                };
                match s.submit(&mut sqe, submit) {
                    Ok((seq, _)) => {
                        e.sent(generation, s, seq);
                        Ok(())
                    }
                    Err(code) => {
                        e.cancel_record(generation);
                        Err(code)
                    }
                }
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

/// Queues an SDMA copy on `stm`.
fn submit_copy(
    dst: *mut c_void,
    dest_max: u64,
    src: *const c_void,
    cnt: u64,
    kind: u32,
    stm: Stm,
) -> Result<(), i32> {
    let kind = memory::check_copy(dst, dest_max, src, cnt, kind)?;
    let s = handles::stream(stm)?;
    if cnt == 0 {
        return Ok(());
    }
    let mut sqe = copy_sqe(kind::MEMCPY, src as u64, dst as u64, cnt, kind);
    s.submit(&mut sqe, Submit::default()).map(drop)
}

/// An SDMA (type 11, on both chips) copy doing `what`.
fn copy_sqe(what: u8, src: u64, dst: u64, bytes: u64, copy_kind: u32) -> Sqe {
    let mut sqe = Sqe::new(abi::v100::SDMA, what, 0);
    sqe.set_u64(pl::COPY_SRC, src).set_u64(pl::COPY_DST, dst);
    sqe.set_u64(pl::COPY_BYTES, bytes)
        .set_u32(pl::COPY_KIND, copy_kind)
        .set_u32(pl::SDMA_OP, abi::SDMA_OP_COPY);
    sqe
}

/// A driver error as the runtime reports it.
fn drv_rc(rc: i32) -> i32 {
    match rc {
        abi::DRV_ERROR_NONE => abi::ACL_SUCCESS,
        abi::DRV_ERROR_INVALID_VALUE => abi::ACL_ERROR_RT_PARAM_INVALID,
        _ => abi::ACL_ERROR_RT_INTERNAL_ERROR,
    }
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
        || {
            // RT ApiImpl::MemCopySync -> NpuDriver::MemCopySync: the driver copies; no task.
            rc((|| {
                memory::check_copy(dst, destMax, src, cnt, kind)?;
                context::current_device()?;
                if cnt == 0 {
                    return Ok(());
                }
                let usize_of =
                    |v: u64| usize::try_from(v).map_err(|_| abi::ACL_ERROR_RT_PARAM_INVALID);
                // SAFETY: plain driver call with integer arguments.
                let r = unsafe {
                    (Hal::get().drvMemcpy)(
                        dst as u64,
                        usize_of(destMax)?,
                        src as u64,
                        usize_of(cnt)?,
                    )
                };
                match drv_rc(r) {
                    0 => Ok(()),
                    e => Err(e),
                }
            })())
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
        || rc(submit_copy(dst, destMax, src, cnt, kind, stm)),
        |a| {
            copy_args(a, dst, destMax, src, cnt, kind);
            a.u64("stm", stm as u64);
        },
    )
}

fn submit_set(p: *mut c_void, dest_max: u64, val: u32, cnt: u64, stm: Stm) -> Result<(), i32> {
    memory::check_set(p, dest_max, cnt)?;
    let s = handles::stream(stm)?;
    if cnt == 0 {
        return Ok(());
    }
    let value = val & 0xff;
    if chip() == abi::Chip::Ascend950 {
        // 950 has a memset task: an SDMA SQE with the memset opcode (RT memory_task_v200_base.cc
        // `ConstructDavidSqeForMemsetAsyncTask`).
        let mut sqe = Sqe::new(abi::v200::SDMA, kind::MEMSET, 0);
        sqe.set_u64(pl::COPY_DST, p as u64)
            .set_u64(pl::COPY_BYTES, cnt)
            .set_u32(pl::SDMA_OP, abi::SDMA_OP_FILL)
            .set_u32(pl::FILL_VALUE, value)
            .set_u32(annot::AUX, value);
        return s.submit(&mut sqe, Submit::default()).map(drop);
    }
    // 910B has none (MEMSET_TASK_NOT_SUPPORT, DevMemSetAsyncByMemset unsupported in
    // memcpy_stars.cc): RT `DevMemSetAsyncByMemcpy` fills a host buffer of up to 64 MiB, copies
    // it H2D, then copies that first block D2D over the rest.
    let first = cnt.min(MEM_BLOCK_SIZE);
    let buf =
        vec![value as u8; usize::try_from(first).map_err(|_| abi::ACL_ERROR_RT_PARAM_INVALID)?]
            .into_boxed_slice();
    let mut sqe = copy_sqe(
        kind::MEMSET,
        buf.as_ptr() as u64,
        p as u64,
        first,
        abi::RT_MEMCPY_HOST_TO_DEVICE,
    );
    sqe.set_u32(annot::AUX, value);
    let keep = Submit {
        keep: Some(buf),
        ..Submit::default()
    };
    s.submit(&mut sqe, keep)?;
    let mut done = first;
    while done < cnt {
        let n = (cnt - done).min(MEM_BLOCK_SIZE);
        let mut sqe = copy_sqe(
            kind::MEMSET,
            p as u64,
            p as u64 + done,
            n,
            abi::RT_MEMCPY_DEVICE_TO_DEVICE,
        );
        sqe.set_u32(annot::AUX, value);
        s.submit(&mut sqe, Submit::default())?;
        done += n;
    }
    Ok(())
}

// SAFETY: the C caller's contract: `devPtr` is null or valid for what the prototype says it points
// to.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtMemset(devPtr: *mut c_void, destMax: u64, val: u32, cnt: u64) -> i32 {
    api(
        LIB,
        "rtMemset",
        || {
            // RT ApiImpl::MemSetSync -> drvMemsetD8: the driver sets; no task.
            rc((|| {
                memory::check_set(devPtr, destMax, cnt)?;
                context::current_device()?;
                if cnt == 0 {
                    return Ok(());
                }
                let usize_of =
                    |v: u64| usize::try_from(v).map_err(|_| abi::ACL_ERROR_RT_PARAM_INVALID);
                // SAFETY: plain driver call with integer arguments.
                let r = unsafe {
                    (Hal::get().drvMemsetD8)(
                        devPtr as u64,
                        usize_of(destMax)?,
                        val as u8,
                        usize_of(cnt)?,
                    )
                };
                match drv_rc(r) {
                    0 => Ok(()),
                    e => Err(e),
                }
            })())
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
        || rc(submit_set(ptr, destMax, val, cnt, stm)),
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
                let h = kernel::load_binary(b.magic, b.data, b.length, false)?;
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
                let h = kernel::load_binary(b.magic, b.data, b.length, false)?;
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

/// `rtError_t rtRegisterAllKernel(const rtDevBinary_t *bin, void **hdl)` (RT
/// `pkg_inc/runtime/rt_external_kernel.h`): registers every kernel symbol of an ELF blob (RT
/// `ElfProgram::BuildNewKernel`), each with the tiling key its name's trailing `_<digits>`
/// carries (0 without); launch one with rtKernelLaunchWithHandleV2(hdl, tilingKey, ...)
/// (libacl_op_compiler does), or get its handle with rtsFuncGetByEntry(hdl, tilingKey). A blob
/// without kernel symbols: ACL_ERROR_RT_PARAM_INVALID.
// SAFETY: the C caller's contract: `bin`, `hdl` are null or valid for what the prototype says
// they point to.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtRegisterAllKernel(
    bin: *const RtDevBinary,
    hdl: *mut *mut c_void,
) -> i32 {
    api(
        LIB,
        "rtRegisterAllKernel",
        || {
            rc((|| {
                // SAFETY: NULL or a valid rtDevBinary_t.
                let b = unsafe { bin.as_ref() }.ok_or(abi::ACL_ERROR_RT_PARAM_INVALID)?;
                if hdl.is_null() {
                    return Err(abi::ACL_ERROR_RT_PARAM_INVALID);
                }
                let h = kernel::load_binary(b.magic, b.data, b.length, true)?;
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
            let h = unsafe { out_ptr(hdl) };
            a.u64("out_handle", h);
            if h != 0 {
                a.u64(
                    "kernel_count",
                    kernel::kernel_count(h as *mut c_void) as u64,
                );
            }
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
    let registered = std::cell::Cell::new(None::<&'static Func>);
    api(
        LIB,
        "rtFunctionRegister",
        || {
            rc((|| {
                // SAFETY: `stubName` is null (rejected by `c_str`) or a NUL-terminated string.
                let stub_name = unsafe { c_str(stubName) }?;
                // The kernel's name is kernelInfoExt, the device function name (RT
                // Runtime::KernelRegister), a C string when not NULL.
                // SAFETY: NULL or a NUL-terminated string, per the runtime's contract.
                let ext = unsafe { c_str(kernelInfoExt.cast()) }.ok();
                let f = kernel::register_stub(binHandle, stubFunc, ext.as_deref(), &stub_name)?;
                registered.set(Some(f));
                Ok(())
            })())
        },
        |a| {
            a.u64("binHandle", binHandle as u64)
                .u64("stubFunc", stubFunc as u64);
            // SAFETY: `stubName` is null or a NUL-terminated string, per the prototype.
            unsafe { a.cstr("stubName", stubName) };
            a.u64("kernelInfoExt", kernelInfoExt as u64)
                .u64("funcMode", funcMode.into());
            if let Some(f) = registered.get() {
                // SAFETY: Func names are valid C strings.
                unsafe { a.cstr("kernel_name", f.name.ptr) };
            }
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
    let mut sqe = Sqe::new(chip().kernel_type(f.engine), kind::KERNEL, block_dim);
    sqe.set_u64(pl::KERNEL_PC, f.pc)
        .set_u64(pl::KERNEL_ARGS, args as u64);
    sqe.set_u32(pl::KERNEL_ARGS_SIZE, args_size)
        .set_u32(pl::KERNEL_ENGINE, f.engine)
        .set_u64(annot::NAME, f.name.ptr as u64);
    s.submit(&mut sqe, Submit::default()).map(drop)
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
            let last = stream::LAST_TASK.with(|l| l.get());
            // SAFETY: `taskId` and `streamId` are the caller's out-parameters; `put` rejects NULL.
            rc(unsafe { put(taskId, last.prof_id).and_then(|_| put(streamId, last.stream)) })
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

// ---------------------------------------------------------------- models (graphs)

/// `rtError_t rtModelCreate(rtModel_t *mdl, uint32_t flag)` (RT pkg_inc/runtime/runtime/
/// rt_model.h): a model with a driver model id.
// SAFETY: the C caller's contract: `mdl` is null or a writable rtModel_t.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtModelCreate(mdl: *mut *mut c_void, flag: u32) -> i32 {
    api(
        LIB,
        "rtModelCreate",
        || {
            rc((|| {
                if mdl.is_null() {
                    return Err(abi::ACL_ERROR_RT_PARAM_INVALID);
                }
                let h = model::create(context::current_device()?)?;
                // SAFETY: `mdl` is the caller's out-parameter; `put` rejects NULL before writing.
                unsafe { put(mdl, h) }
            })())
        },
        |a| {
            a.u64("mdl", mdl as u64).u64("flag", flag.into());
            // SAFETY: `mdl` is null or the caller's out-parameter, readable once the call returned.
            a.u64("out_model", unsafe { out_ptr(mdl) });
        },
    )
}

/// `rtError_t rtModelGetId(rtModel_t mdl, uint32_t *modelId)`.
// SAFETY: the C caller's contract: `mdl` is an opaque handle; `modelId` null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtModelGetId(mdl: *mut c_void, modelId: *mut u32) -> i32 {
    api(
        LIB,
        "rtModelGetId",
        // SAFETY: `modelId` is the caller's out-parameter; `put` rejects NULL before writing.
        || rc(model::get(mdl).and_then(|m| unsafe { put(modelId, m.id) })),
        |a| {
            a.u64("mdl", mdl as u64).u64("modelId", modelId as u64);
            if !modelId.is_null() {
                // SAFETY: non-null out-parameter.
                a.u64("out_model_id", unsafe { *modelId }.into());
            }
        },
    )
}

/// `rtError_t rtModelBindStream(rtModel_t mdl, rtStream_t stm, uint32_t flag)`: tasks launched
/// on `stm` are captured for the model until it is loaded.
// SAFETY: the C caller's contract: `mdl` and `stm` are opaque handles, never trusted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtModelBindStream(mdl: *mut c_void, stm: Stm, flag: u32) -> i32 {
    api(
        LIB,
        "rtModelBindStream",
        || rc(model::get(mdl).and_then(|m| model::bind(&m, handles::stream(stm)?))),
        |a| {
            a.u64("mdl", mdl as u64)
                .u64("stm", stm as u64)
                .u64("flag", flag.into());
        },
    )
}

/// `rtError_t rtModelUnbindStream(rtModel_t mdl, rtStream_t stm)`.
// SAFETY: the C caller's contract: `mdl` and `stm` are opaque handles, never trusted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtModelUnbindStream(mdl: *mut c_void, stm: Stm) -> i32 {
    api(
        LIB,
        "rtModelUnbindStream",
        || rc(model::get(mdl).and_then(|m| model::unbind(&m, &handles::stream(stm)?))),
        |a| {
            a.u64("mdl", mdl as u64).u64("stm", stm as u64);
        },
    )
}

/// `rtError_t rtModelLoadComplete(rtModel_t mdl)`: the captured tasks go to the driver in bulk
/// (`halStreamTaskFill`, RT `Model::SendSqe`).
// SAFETY: the C caller's contract: `mdl` is an opaque handle, never trusted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtModelLoadComplete(mdl: *mut c_void) -> i32 {
    api(
        LIB,
        "rtModelLoadComplete",
        || rc(model::get(mdl).and_then(|m| model::load_complete(&m))),
        |a| {
            a.u64("mdl", mdl as u64);
        },
    )
}

/// `rtError_t rtModelExecute(rtModel_t mdl, rtStream_t stm, uint32_t flag)`: one
/// model-execute task on `stm` (COND SQE, `CONDS_SUB_TYPE_MODEL_EXEC`, the model id at 12); the
/// device runs the model's filled tasks inside it.
// SAFETY: the C caller's contract: `mdl` and `stm` are opaque handles, never trusted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtModelExecute(mdl: *mut c_void, stm: Stm, flag: u32) -> i32 {
    api(
        LIB,
        "rtModelExecute",
        || {
            rc((|| {
                let m = model::get(mdl)?;
                let exec_on = model::exec_stream(&m)?;
                let s = handles::stream(stm)?;
                let ty = match chip() {
                    abi::Chip::Ascend910B => abi::v100::COND,
                    abi::Chip::Ascend950 => abi::v200::COND,
                };
                let mut sqe = Sqe::new(ty, kind::MODEL, 0);
                sqe.0[pl::COND_SUB_TYPE] = abi::CONDS_SUB_TYPE_MODEL_EXEC;
                sqe.set_u16(pl::MODEL_ID, m.id as u16)
                    .set_u32(pl::MODEL_STREAM, u32::from(exec_on.id))
                    .set_u32(annot::AUX, m.id);
                s.submit(&mut sqe, Submit::default()).map(drop)
            })())
        },
        |a| {
            a.u64("mdl", mdl as u64)
                .u64("stm", stm as u64)
                .u64("flag", flag.into());
            if let Ok(m) = model::get(mdl) {
                a.u64("model_id", m.id.into());
            }
        },
    )
}

/// `rtError_t rtModelDestroy(rtModel_t mdl)`.
// SAFETY: the C caller's contract: `mdl` is an opaque handle, never trusted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtModelDestroy(mdl: *mut c_void) -> i32 {
    api(
        LIB,
        "rtModelDestroy",
        || rc(model::destroy(mdl)),
        |a| {
            a.u64("mdl", mdl as u64);
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
    rc(handles::stream(stm).and_then(|st| st.submit(&mut s, Submit::default()).map(drop)))
}
