//! The function symbols of an ELF kernel binary, as the real runtime's `rtsBinaryLoadFromData` /
//! `rtRegisterAllKernel` register them (one kernel per symbol; hicann/runtime
//! `src/runtime/core/src/kernel/program.cc`). A symbol named `<kernel>_<digits>` is reachable by
//! its function entry (`rtsFuncGetByEntry`, `rtKernelLaunchWithHandleV2`'s tiling key). Anything
//! that is not a well-formed little-endian ELF64 object yields no symbols: such blobs are still
//! accepted, as before, and their kernels are named by the caller.

use std::ffi::c_void;

const SHT_SYMTAB: u32 = 2;
const STT_FUNC: u8 = 2;
const SYM_SIZE: usize = 24;
const SHDR_SIZE: usize = 64;

fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(off..off + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], off: usize) -> Option<usize> {
    usize::try_from(u64::from_le_bytes(b.get(off..off + 8)?.try_into().ok()?)).ok()
}

/// (type, offset, size, link) of section `i`.
fn section(b: &[u8], shoff: usize, i: usize) -> Option<(u32, usize, usize, u32)> {
    let s = shoff.checked_add(i.checked_mul(SHDR_SIZE)?)?;
    Some((
        u32_at(b, s + 4)?,
        u64_at(b, s + 24)?,
        u64_at(b, s + 32)?,
        u32_at(b, s + 40)?,
    ))
}

/// Names of the function symbols in `b`, in symbol-table order.
pub(crate) fn function_symbols(b: &[u8]) -> Vec<String> {
    parse(b).unwrap_or_default()
}

fn parse(b: &[u8]) -> Option<Vec<String>> {
    // ELF magic, 64-bit, little-endian.
    if b.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let shoff = u64_at(b, 0x28)?;
    if usize::from(u16_at(b, 0x3a)?) != SHDR_SIZE {
        return None;
    }
    let shnum = usize::from(u16_at(b, 0x3c)?);
    let mut out = Vec::new();
    for i in 0..shnum {
        let (ty, off, size, link) = section(b, shoff, i)?;
        if ty != SHT_SYMTAB {
            continue;
        }
        let (_, str_off, str_size, _) = section(b, shoff, usize::try_from(link).ok()?)?;
        let strtab = b.get(str_off..str_off.checked_add(str_size)?)?;
        let syms = b.get(off..off.checked_add(size)?)?;
        for sym in syms.chunks_exact(SYM_SIZE) {
            if sym[4] & 0xf != STT_FUNC {
                continue;
            }
            let name_off = usize::try_from(u32_at(sym, 0)?).ok()?;
            let rest = strtab.get(name_off..)?;
            let end = rest.iter().position(|c| *c == 0)?;
            if end > 0 {
                out.push(String::from_utf8_lossy(&rest[..end]).into_owned());
            }
        }
    }
    Some(out)
}

/// The function entry of a kernel symbol: its trailing `_<digits>`.
pub(crate) fn entry_of(name: &str) -> Option<u64> {
    let (_, digits) = name.rsplit_once('_')?;
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The (entry, name) pairs of the function symbols named `<kernel>_<entry>` in an ELF blob.
pub(crate) fn elf_entries(data: *const c_void, length: u64) -> Vec<(u64, String)> {
    let Ok(len) = usize::try_from(length) else {
        return Vec::new();
    };
    if data.is_null() || len < 4 {
        return Vec::new();
    }
    // SAFETY: the loaders' contract: `data` holds `length` readable bytes (the runtime copies
    // the whole binary to the device, so it reads them all as well).
    let bytes = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) };
    function_symbols(bytes)
        .into_iter()
        .filter_map(|n| entry_of(&n).map(|e| (e, n)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn junk_yields_nothing() {
        assert!(function_symbols(b"").is_empty());
        assert!(function_symbols(b"\x7fELF\x02\x01\x01\0stb").is_empty());
        let mut b = vec![0u8; 64];
        b[..6].copy_from_slice(b"\x7fELF\x02\x01");
        b[0x28] = 0xff;
        b[0x3a] = 64;
        b[0x3c] = 3;
        assert!(function_symbols(&b).is_empty());
    }

    #[test]
    fn entries() {
        assert_eq!(entry_of("Add_0a1b_12"), Some(12));
        assert_eq!(entry_of("noop"), None);
        assert_eq!(entry_of("x_"), None);
        assert_eq!(entry_of("x_1a"), None);
    }
}
