//! Naming addresses inside traced processes: a kernel stub passed to `rtKernelLaunch` that
//! was registered before tracing began is named by the ELF symbol it points at, and the
//! kernels of a device binary registered with `rtRegisterAllKernel` by the symbols of the
//! ELF it carries (read from the process's memory).
use std::{
    collections::HashMap,
    fs,
    path::PathBuf,
    sync::{Arc, Mutex},
};

use tracer_common::{BinaryPiece, CHANNEL_CHUNK};

use tracer_core::correlate::Symbolize;

use crate::symbols::{SymbolTable, kernel_symbols};

/// Device binaries larger than this are not read.
const MAX_DEV_BINARY: u64 = 256 << 20;

/// Device binaries the probes copied at registration, by the registering call's correlation
/// id: filled by the ring-buffer reader before it hands on the call's records.
#[derive(Debug, Default, Clone)]
pub struct CapturedBinaries(Arc<Mutex<HashMap<u64, Vec<u8>>>>);

impl CapturedBinaries {
    /// Stores a piece of the binary of call `correlation_id`.
    pub fn add(&self, piece: &BinaryPiece) {
        let len = (piece.len as usize).min(CHANNEL_CHUNK);
        let at = piece.offset as usize;
        let mut all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let binary = all.entry(piece.correlation_id).or_default();
        if binary.len() < at + len {
            binary.resize(at + len, 0);
        }
        binary[at..at + len].copy_from_slice(&piece.data[..len]);
    }

    fn take(&self, correlation_id: u64) -> Option<Vec<u8>> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&correlation_id)
    }
}

/// Caches symbol tables per file and answers per-process address lookups.
#[derive(Default)]
pub struct Symbolizer {
    tables: HashMap<PathBuf, Option<Arc<SymbolTable>>>,
    binaries: CapturedBinaries,
}

impl Symbolizer {
    /// A symbolizer that names device binaries from the copies in `binaries`.
    pub fn new(binaries: CapturedBinaries) -> Self {
        Self {
            tables: HashMap::new(),
            binaries,
        }
    }
}

impl Symbolize for Symbolizer {
    /// The function symbol at `addr` in process `pid`, if the address lies in a mapped
    /// file whose symbol table names it.
    fn function_at(&mut self, pid: u32, addr: u64) -> Option<String> {
        let maps = fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
        let (path, file_offset) = maps.lines().find_map(|line| locate(line, addr))?;
        let path = PathBuf::from(format!("/proc/{pid}/root{path}"));
        let table = self
            .tables
            .entry(path.clone())
            .or_insert_with(|| SymbolTable::read(&path).ok().map(Arc::new))
            .clone()?;
        table
            .function_at_file_offset(file_offset)
            .map(str::to_owned)
    }

    /// From the copy the probe made at the call (complete unless the binary was larger
    /// than the probe copies), else from the process's memory if it still holds it.
    fn binary_kernels(
        &mut self,
        pid: u32,
        correlation_id: u64,
        data: u64,
        len: u64,
    ) -> Vec<String> {
        if let Some(copy) = self.binaries.take(correlation_id)
            && copy.len() as u64 == len
        {
            return kernel_symbols(&copy);
        }
        if len > MAX_DEV_BINARY {
            return Vec::new();
        }
        read_memory(pid, data, len as usize)
            .map(|elf| kernel_symbols(&elf))
            .unwrap_or_default()
    }
}

/// `len` bytes at `addr` in process `pid`, if all of them could be read.
fn read_memory(pid: u32, addr: u64, len: usize) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; len];
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: len,
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: len,
    };
    // SAFETY: `local` describes `buf`, writable for `len` bytes; the kernel checks the remote
    // range and fails the call rather than touching memory it does not map.
    let n = unsafe { libc::process_vm_readv(pid as libc::pid_t, &local, 1, &remote, 1, 0) };
    (usize::try_from(n).ok() == Some(len)).then_some(buf)
}

/// If the maps `line` covers `addr`, its file path and the file offset of `addr`.
fn locate(line: &str, addr: u64) -> Option<(&str, u64)> {
    let mut fields = line.split_whitespace();
    let (start, end) = fields.next()?.split_once('-')?;
    let start = u64::from_str_radix(start, 16).ok()?;
    let end = u64::from_str_radix(end, 16).ok()?;
    if addr < start || addr >= end {
        return None;
    }
    let offset = u64::from_str_radix(fields.nth(1)?, 16).ok()?;
    let path = fields.nth(2)?;
    path.starts_with('/')
        .then_some((path, addr - start + offset))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locates_address_in_mapping() {
        let line = "555555554000-555555556000 r-xp 00001000 fd:01 42 /usr/bin/app";
        assert_eq!(
            locate(line, 0x5555_5555_4010),
            Some(("/usr/bin/app", 0x1010))
        );
        assert_eq!(locate(line, 0x5555_5555_6000), None);
    }

    /// A function of this very test binary is named from its runtime address.
    #[test]
    fn names_a_function_of_this_process() {
        #[inline(never)]
        #[unsafe(no_mangle)]
        extern "C" fn npu_bpftrace_symbolize_probe() {}
        let addr = npu_bpftrace_symbolize_probe as *const () as u64;
        let name = Symbolizer::default().function_at(std::process::id(), addr);
        assert_eq!(name.as_deref(), Some("npu_bpftrace_symbolize_probe"));
    }
}
