//! Device and pinned host memory. Device memory is host memory (the device model copies with
//! the CPU), tracked so that frees, copy directions and capacity are checked as on a real NPU.
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::{Mutex, MutexGuard, OnceLock};

use npu_sim_common::abi;

/// Alignment of every allocation (device allocations are at least 512-byte aligned).
const ALIGN: usize = 512;

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    Device,
    Host,
}

struct Alloc {
    size: usize,
    place: Place,
}

struct Heap {
    allocs: BTreeMap<usize, Alloc>,
    device_bytes: u64,
}

fn heap() -> MutexGuard<'static, Heap> {
    static H: Mutex<Heap> = Mutex::new(Heap {
        allocs: BTreeMap::new(),
        device_bytes: 0,
    });
    H.lock().unwrap_or_else(|e| e.into_inner())
}

/// Device memory per device (`NPU_SIM_HBM_BYTES`, default 64 GiB).
fn capacity() -> u64 {
    static C: OnceLock<u64> = OnceLock::new();
    *C.get_or_init(|| npu_sim_common::env::parse("NPU_SIM_HBM_BYTES", 64u64 << 30))
}

pub(crate) fn alloc(size: u64, place: Place) -> Result<*mut c_void, i32> {
    if size == 0 {
        return Err(abi::ACL_ERROR_RT_PARAM_INVALID);
    }
    let size = usize::try_from(size).map_err(|_| abi::ACL_ERROR_RT_MEMORY_ALLOCATION)?;
    let mut h = heap();
    if place == Place::Device && h.device_bytes + size as u64 > capacity() {
        return Err(abi::ACL_ERROR_RT_MEMORY_ALLOCATION);
    }
    let mut p: *mut c_void = std::ptr::null_mut();
    // SAFETY: valid out-pointer, power-of-two alignment.
    if unsafe { libc::posix_memalign(&mut p, ALIGN, size) } != 0 {
        return Err(abi::ACL_ERROR_RT_MEMORY_ALLOCATION);
    }
    if place == Place::Device {
        h.device_bytes += size as u64;
    }
    h.allocs.insert(p as usize, Alloc { size, place });
    Ok(p)
}

pub(crate) fn free(p: *mut c_void, place: Place) -> Result<(), i32> {
    let mut h = heap();
    match h.allocs.get(&(p as usize)) {
        Some(a) if a.place == place => {}
        _ => return Err(abi::ACL_ERROR_RT_PARAM_INVALID),
    }
    let a = h.allocs.remove(&(p as usize)).expect("checked above");
    if place == Place::Device {
        h.device_bytes -= a.size as u64;
    }
    // SAFETY: `p` came from posix_memalign and is freed once (it was in the map).
    unsafe { libc::free(p) };
    Ok(())
}

/// Where `[p, p+len)` lies: inside one device allocation, or anywhere else (host).
pub(crate) fn place_of(p: *const c_void, len: u64) -> Place {
    let h = heap();
    let addr = p as usize;
    match h.allocs.range(..=addr).next_back() {
        Some((&base, a))
            if a.place == Place::Device && (addr - base) as u64 + len <= a.size as u64 =>
        {
            Place::Device
        }
        _ => Place::Host,
    }
}

/// Checks a copy's pointers against its direction; resolves RT_MEMCPY_DEFAULT.
pub(crate) fn check_copy(
    dst: *mut c_void,
    dest_max: u64,
    src: *const c_void,
    cnt: u64,
    kind: u32,
) -> Result<u32, i32> {
    if dst.is_null() || src.is_null() || cnt > dest_max {
        return Err(abi::ACL_ERROR_RT_PARAM_INVALID);
    }
    let (d, s) = (place_of(dst, cnt), place_of(src, cnt));
    let expect = match kind {
        abi::RT_MEMCPY_HOST_TO_HOST => (Place::Host, Place::Host),
        abi::RT_MEMCPY_HOST_TO_DEVICE | abi::RT_MEMCPY_HOST_TO_DEVICE_EX => {
            (Place::Device, Place::Host)
        }
        abi::RT_MEMCPY_DEVICE_TO_HOST | abi::RT_MEMCPY_DEVICE_TO_HOST_EX => {
            (Place::Host, Place::Device)
        }
        abi::RT_MEMCPY_DEVICE_TO_DEVICE => (Place::Device, Place::Device),
        abi::RT_MEMCPY_DEFAULT => {
            return Ok(match (d, s) {
                (Place::Host, Place::Host) => abi::RT_MEMCPY_HOST_TO_HOST,
                (Place::Device, Place::Host) => abi::RT_MEMCPY_HOST_TO_DEVICE,
                (Place::Host, Place::Device) => abi::RT_MEMCPY_DEVICE_TO_HOST,
                (Place::Device, Place::Device) => abi::RT_MEMCPY_DEVICE_TO_DEVICE,
            });
        }
        _ => return Err(abi::ACL_ERROR_RT_PARAM_INVALID),
    };
    if (d, s) != expect {
        return Err(abi::ACL_ERROR_RT_PARAM_INVALID);
    }
    Ok(kind)
}

/// Checks a memset's range lies in device memory.
pub(crate) fn check_set(p: *mut c_void, dest_max: u64, cnt: u64) -> Result<(), i32> {
    if p.is_null() || cnt > dest_max || place_of(p, cnt) != Place::Device {
        return Err(abi::ACL_ERROR_RT_PARAM_INVALID);
    }
    Ok(())
}
