//! Models (graphs) as the runtime runs them (RT `src/runtime/feature/model/model.cc`): tasks
//! launched on a stream bound to a model are not sent to the device but captured into the
//! stream's SQE buffer ("software SQ"), each with its task id; `rtModelLoadComplete` hands the
//! buffers to the driver in bulk with `halStreamTaskFill` (`Model::SendSqe`); `rtModelExecute`
//! sends one model-execute task (a COND SQE, `CONDS_SUB_TYPE_MODEL_EXEC`, RT
//! `model_execute_task_v100.cc`) on the caller's stream, and the device runs the filled tasks.
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};

use npu_sim_common::abi::{self, HalResourceIdInputInfo, HalResourceIdOutputInfo, Sqe};

use crate::hal::Hal;
use crate::stream::Stream;

pub(crate) struct Model {
    pub dev: u32,
    /// The driver's model id (`halResourceIdAlloc(DRV_MODEL_ID)`, RT `NpuDriver::ModelIdAlloc`).
    pub id: u32,
    state: Mutex<ModelState>,
}

#[derive(Default)]
struct ModelState {
    streams: Vec<Arc<Stream>>,
    loaded: bool,
}

/// Live models by handle (handles are looked up, never dereferenced).
static MODELS: LazyLock<Mutex<HashMap<usize, Arc<Model>>>> = LazyLock::new(Mutex::default);

fn models() -> MutexGuard<'static, HashMap<usize, Arc<Model>>> {
    MODELS.lock().unwrap_or_else(|e| e.into_inner())
}

impl Model {
    fn lock(&self) -> MutexGuard<'_, ModelState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// rtModelCreate: a model on `dev` with a driver model id; returns its handle.
pub(crate) fn create(dev: u32) -> Result<*mut c_void, i32> {
    let mut input = HalResourceIdInputInfo {
        type_: abi::DRV_MODEL_ID,
        ..HalResourceIdInputInfo::default()
    };
    let mut out = HalResourceIdOutputInfo::default();
    // SAFETY: valid in/out structs.
    let rc = unsafe { (Hal::get().halResourceIdAlloc)(dev, &mut input, &mut out) };
    if rc != abi::DRV_ERROR_NONE {
        return Err(abi::ACL_ERROR_RT_RESOURCE_ALLOC_FAIL);
    }
    let m = Arc::new(Model {
        dev,
        id: out.resource_id,
        state: Mutex::new(ModelState::default()),
    });
    let h = Arc::as_ptr(&m) as usize;
    models().insert(h, m);
    Ok(h as *mut c_void)
}

pub(crate) fn get(h: *mut c_void) -> Result<Arc<Model>, i32> {
    models()
        .get(&(h as usize))
        .cloned()
        .ok_or(abi::ACL_ERROR_RT_PARAM_INVALID)
}

/// rtModelBindStream: tasks launched on `s` from now on are captured for the model.
pub(crate) fn bind(m: &Model, s: Arc<Stream>) -> Result<(), i32> {
    let mut st = m.lock();
    if st.loaded || !s.bind_model(m.id) {
        return Err(abi::ACL_ERROR_RT_PARAM_INVALID);
    }
    st.streams.push(s);
    Ok(())
}

/// rtModelUnbindStream.
pub(crate) fn unbind(m: &Model, s: &Arc<Stream>) -> Result<(), i32> {
    let mut st = m.lock();
    let before = st.streams.len();
    st.streams.retain(|b| !Arc::ptr_eq(b, s));
    if st.streams.len() == before {
        return Err(abi::ACL_ERROR_RT_PARAM_INVALID);
    }
    s.unbind_model();
    Ok(())
}

/// rtModelLoadComplete: every bound stream's captured SQEs go to the driver in one
/// `halStreamTaskFill(devId, streamId, streamMem, taskInfo, taskCnt)` each.
pub(crate) fn load_complete(m: &Model) -> Result<(), i32> {
    let mut st = m.lock();
    for s in &st.streams {
        let mut sqes: Vec<Sqe> = s.captured();
        if sqes.is_empty() {
            continue;
        }
        // SAFETY: `sqes` holds `len` 64-byte SQEs for the duration of the call; the stream
        // memory argument is the SQ base, which the simulated driver does not need.
        let rc = unsafe {
            (Hal::get().halStreamTaskFill)(
                m.dev,
                u32::from(s.id),
                std::ptr::null_mut(),
                sqes.as_mut_ptr().cast(),
                sqes.len() as u32,
            )
        };
        if rc != abi::DRV_ERROR_NONE {
            return Err(abi::ACL_ERROR_RT_INTERNAL_ERROR);
        }
    }
    st.loaded = true;
    Ok(())
}

/// The model's first stream (the one the device runs) once loaded.
pub(crate) fn exec_stream(m: &Model) -> Result<Arc<Stream>, i32> {
    let st = m.lock();
    if !st.loaded {
        return Err(abi::ACL_ERROR_RT_PARAM_INVALID);
    }
    st.streams
        .first()
        .cloned()
        .ok_or(abi::ACL_ERROR_RT_PARAM_INVALID)
}

/// rtModelDestroy: unbinds its streams and frees its model id.
pub(crate) fn destroy(h: *mut c_void) -> Result<(), i32> {
    let m = models()
        .remove(&(h as usize))
        .ok_or(abi::ACL_ERROR_RT_PARAM_INVALID)?;
    for s in std::mem::take(&mut m.lock().streams) {
        s.unbind_model();
    }
    let mut input = HalResourceIdInputInfo {
        type_: abi::DRV_MODEL_ID,
        resource_id: m.id,
        ..HalResourceIdInputInfo::default()
    };
    // SAFETY: valid struct.
    unsafe { (Hal::get().halResourceIdFree)(m.dev, &mut input) };
    Ok(())
}
