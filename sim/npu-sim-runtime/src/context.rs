//! Devices as the runtime sees them: reference counts from rtSetDevice/rtDeviceReset, the
//! thread's current device and each device's streams. No thread of the runtime's own waits for
//! completions: synchronizing threads reclaim (see `stream`).
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use npu_sim_common::abi::{
    self, HalResourceIdInputInfo, HalResourceIdOutputInfo, HalSqCqFreeInfo, HalSqCqInputInfo,
    HalSqCqOutputInfo,
};

use crate::event::Event;
use crate::hal::Hal;
use crate::stream::Stream;

#[derive(Default)]
struct DevState {
    refs: u32,
    streams: HashMap<u16, Arc<Stream>>,
    default: Option<Arc<Stream>>,
}

struct DevCtx {
    state: Mutex<DevState>,
}

fn devices() -> &'static [DevCtx] {
    static D: OnceLock<Vec<DevCtx>> = OnceLock::new();
    D.get_or_init(|| {
        (0..npu_sim_common::env::device_count())
            .map(|_| DevCtx {
                state: Mutex::new(DevState::default()),
            })
            .collect()
    })
}

fn dev_state(dev: u32) -> MutexGuard<'static, DevState> {
    devices()[dev as usize]
        .state
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

thread_local! {
    static CURRENT: Cell<Option<u32>> = const { Cell::new(None) };
}
/// Device set last by any thread: threads that never set one use it (-1: none).
static PROCESS_DEVICE: AtomicI64 = AtomicI64::new(-1);

pub(crate) fn device_count() -> u32 {
    devices().len() as u32
}

/// The calling thread's device, or ACL_ERROR_RT_CONTEXT_NULL if none was set.
pub(crate) fn current_device() -> Result<u32, i32> {
    if let Some(d) = CURRENT.with(Cell::get) {
        return Ok(d);
    }
    u32::try_from(PROCESS_DEVICE.load(Ordering::Relaxed))
        .map_err(|_| abi::ACL_ERROR_RT_CONTEXT_NULL)
}

fn check_device(dev: i32) -> Result<u32, i32> {
    u32::try_from(dev)
        .ok()
        .filter(|d| *d < device_count())
        .ok_or(abi::ACL_ERROR_RT_INVALID_DEVICEID)
}

pub(crate) fn set_device(dev: i32) -> Result<(), i32> {
    let dev = check_device(dev)?;
    let mut st = dev_state(dev);
    if st.refs == 0 {
        // Opening a device: check the driver sees it (and learn its clock, as CANN does).
        let mut khz = 0i64;
        // SAFETY: valid out-pointer.
        let rc = unsafe {
            (Hal::get().halGetDeviceInfo)(
                dev,
                abi::MODULE_TYPE_SYSTEM,
                abi::INFO_TYPE_DEV_OSC_FREQUE,
                &mut khz,
            )
        };
        if rc != abi::DRV_ERROR_NONE {
            return Err(abi::ACL_ERROR_RT_INVALID_DEVICEID);
        }
        let s = alloc_stream(dev)?;
        st.streams.insert(s.id, s.clone());
        st.default = Some(s);
    }
    st.refs += 1;
    CURRENT.with(|c| c.set(Some(dev)));
    PROCESS_DEVICE.store(i64::from(dev), Ordering::Relaxed);
    Ok(())
}

/// Drops one reference; the last one drains and destroys the device's streams. Returns the destroyed streams, whose application handles the caller must
/// invalidate (handles are not this module's business).
pub(crate) fn reset_device(dev: i32) -> Result<Vec<Arc<Stream>>, i32> {
    let dev = check_device(dev)?;
    let streams: Vec<Arc<Stream>> = {
        let mut st = dev_state(dev);
        if st.refs == 0 {
            return Ok(Vec::new());
        }
        st.refs -= 1;
        if st.refs > 0 {
            return Ok(Vec::new());
        }
        st.streams.values().cloned().collect()
    };
    for s in &streams {
        s.synchronize();
        free_stream(s);
    }
    let mut st = dev_state(dev);
    st.streams.clear();
    st.default = None;
    drop(st);
    CURRENT.with(|c| {
        if c.get() == Some(dev) {
            c.set(None);
        }
    });
    let _ =
        PROCESS_DEVICE.compare_exchange(i64::from(dev), -1, Ordering::Relaxed, Ordering::Relaxed);
    Ok(streams)
}

/// The default stream of the current device.
pub(crate) fn default_stream() -> Result<Arc<Stream>, i32> {
    let dev = current_device()?;
    dev_state(dev)
        .default
        .clone()
        .ok_or(abi::ACL_ERROR_RT_CONTEXT_NULL)
}

/// A new stream on the current device.
pub(crate) fn create_stream() -> Result<Arc<Stream>, i32> {
    let dev = current_device()?;
    if dev_state(dev).refs == 0 {
        return Err(abi::ACL_ERROR_RT_CONTEXT_NULL);
    }
    let s = alloc_stream(dev)?;
    dev_state(dev).streams.insert(s.id, s.clone());
    Ok(s)
}

pub(crate) fn destroy_stream(s: &Arc<Stream>) {
    s.synchronize();
    if dev_state(s.dev).streams.remove(&s.id).is_some() {
        free_stream(s);
    }
}

/// A stream with the driver's resources, in the real runtime's order: a device-wide stream id
/// (`NpuDriver::StreamIdAlloc`), its SQ and CQ (`NormalSqCqAllocate`) and its logic CQ
/// (`LogicCqAllocateV2`), all from the driver.
fn alloc_stream(dev: u32) -> Result<Arc<Stream>, i32> {
    let hal = Hal::get();
    let mut id_in = HalResourceIdInputInfo {
        type_: abi::DRV_STREAM_ID,
        ..HalResourceIdInputInfo::default()
    };
    let mut id_out = HalResourceIdOutputInfo::default();
    // SAFETY: valid in/out structs.
    let rc = unsafe { (hal.halResourceIdAlloc)(dev, &mut id_in, &mut id_out) };
    if rc != abi::DRV_ERROR_NONE {
        return Err(abi::ACL_ERROR_RT_NO_STREAM_RESOURCE);
    }
    let id = id_out.resource_id;
    let sqcq = |ty: i32| {
        let mut input = HalSqCqInputInfo {
            type_: ty,
            ts_id: 0,
            sqe_size: if ty == abi::DRV_NORMAL_TYPE { 64 } else { 0 },
            cqe_size: if ty == abi::DRV_NORMAL_TYPE { 12 } else { 32 },
            sqe_depth: if ty == abi::DRV_NORMAL_TYPE { 1024 } else { 0 },
            cqe_depth: 1024,
            grp_id: 0,
            flag: 0,
            cq_id: 0,
            sq_id: 0,
            info: [id, npu_sim_common::time::tid(), 0, 0, 0],
            ext_info_len: 0,
            ext_info: std::ptr::null_mut(),
            res: [0; 5],
        };
        let mut out = HalSqCqOutputInfo::default();
        // SAFETY: valid in/out structs.
        let rc = unsafe { (hal.halSqCqAllocate)(dev, &mut input, &mut out) };
        (rc == abi::DRV_ERROR_NONE).then_some(out)
    };
    let Some(normal) = sqcq(abi::DRV_NORMAL_TYPE) else {
        free_ids(dev, id, None, None);
        return Err(abi::ACL_ERROR_RT_NO_STREAM_RESOURCE);
    };
    let Some(logic) = sqcq(abi::DRV_LOGIC_TYPE) else {
        free_ids(dev, id, Some((normal.sq_id, normal.cq_id)), None);
        return Err(abi::ACL_ERROR_RT_NO_STREAM_RESOURCE);
    };
    let id16 = u16::try_from(id).map_err(|_| abi::ACL_ERROR_RT_NO_STREAM_RESOURCE)?;
    Ok(Stream::new(
        dev,
        id16,
        normal.sq_id,
        normal.cq_id,
        logic.cq_id,
    ))
}

/// Gives a destroyed stream's resources back to the driver (logic CQ, SQ/CQ, stream id).
fn free_stream(s: &Stream) {
    free_ids(
        s.dev,
        u32::from(s.id),
        Some((s.sq_id, s.hw_cq_id)),
        Some(s.cq_id),
    );
}

fn free_ids(dev: u32, stream: u32, sqcq: Option<(u32, u32)>, logic: Option<u32>) {
    let hal = Hal::get();
    if let Some(cq) = logic {
        let mut f = HalSqCqFreeInfo {
            type_: abi::DRV_LOGIC_TYPE,
            cq_id: cq,
            ..HalSqCqFreeInfo::default()
        };
        // SAFETY: valid struct.
        unsafe { (hal.halSqCqFree)(dev, &mut f) };
    }
    if let Some((sq, cq)) = sqcq {
        let mut f = HalSqCqFreeInfo {
            type_: abi::DRV_NORMAL_TYPE,
            sq_id: sq,
            cq_id: cq,
            ..HalSqCqFreeInfo::default()
        };
        // SAFETY: valid struct.
        unsafe { (hal.halSqCqFree)(dev, &mut f) };
    }
    let mut input = HalResourceIdInputInfo {
        type_: abi::DRV_STREAM_ID,
        resource_id: stream,
        ..HalResourceIdInputInfo::default()
    };
    // SAFETY: valid struct.
    unsafe { (hal.halResourceIdFree)(dev, &mut input) };
}

/// All streams of the current device (rtDeviceSynchronize).
pub(crate) fn streams_of_current() -> Result<Vec<Arc<Stream>>, i32> {
    let dev = current_device()?;
    Ok(dev_state(dev).streams.values().cloned().collect())
}

/// Process-wide event ids.
pub(crate) fn new_event() -> Arc<Event> {
    static NEXT: AtomicI64 = AtomicI64::new(1);
    Arc::new(Event::new(NEXT.fetch_add(1, Ordering::Relaxed) as u32))
}
