//! The kernel symbols of a device ELF, as the runtime takes them when it loads a binary
//! (`rtRegisterAllKernel`, `rtBinaryLoad`; hicann/runtime `src/runtime/core/src/kernel/elf.cc`
//! `CheckKernelAttr`, `program.cc` `ElfProgram::BuildNewKernel`): global, non-hidden function
//! symbols with a name, one kernel each, whose tiling key (also called its function entry, as
//! `rtsFuncGetByEntry` looks it up) is the number its name ends in.
//!
//! The blob is user input, read with the `object` crate's bounds-checked ELF reader. Only
//! 64-bit little-endian ELFs are read; anything else, or anything malformed, yields no symbols
//! (never a panic): such blobs are still accepted by the loaders, and their kernels are named
//! by the caller.

use object::LittleEndian;
use object::elf::{FileHeader64, SHT_SYMTAB, STB_GLOBAL, STT_FUNC, STV_HIDDEN};
use object::read::elf::{FileHeader, Sym};

/// Where `object` reads headers in place: at an address aligned for its 8-byte fields.
const ALIGN: usize = 8;

/// The kernel function names of `elf`, in symbol-table order.
pub(crate) fn kernel_symbols(elf: &[u8]) -> Vec<String> {
    let misalign = elf.as_ptr() as usize % ALIGN;
    if misalign == 0 {
        return symbols(elf).unwrap_or_default();
    }
    // A blob the caller placed at an odd address is read from an aligned copy.
    let mut buf = vec![0u8; elf.len() + ALIGN];
    let skip = (ALIGN - buf.as_ptr() as usize % ALIGN) % ALIGN;
    let copy = &mut buf[skip..skip + elf.len()];
    copy.copy_from_slice(elf);
    symbols(copy).unwrap_or_default()
}

fn symbols(d: &[u8]) -> Option<Vec<String>> {
    let header = FileHeader64::<LittleEndian>::parse(d).ok()?;
    let endian = header.endian().ok()?;
    let sections = header.sections(endian, d).ok()?;
    let table = sections.symbols(endian, d, SHT_SYMTAB).ok()?;
    let mut names = Vec::new();
    for sym in table.iter() {
        if sym.st_name(endian) == 0
            || sym.st_type() != STT_FUNC
            || sym.st_bind() != STB_GLOBAL
            || sym.st_visibility() == STV_HIDDEN
        {
            continue;
        }
        let name = table.symbol_name(endian, sym).ok()?;
        names.push(String::from_utf8_lossy(name).into_owned());
    }
    Some(names)
}

/// The number a kernel name ends in, after its last `_` (`MatMulV2_1002`: 1002), if any.
pub(crate) fn entry_of(name: &str) -> Option<u64> {
    let (_, digits) = name.rsplit_once('_')?;
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The tiling key a kernel name carries: the digits after its last `_` (RT program.cc
/// `ElfProgram::ParseTilingKey`), else 0.
pub(crate) fn tiling_key(name: &str) -> u64 {
    entry_of(name).unwrap_or(0)
}

/// A little-endian ELF64 relocatable object whose symbol table lists `syms` (name, st_info,
/// st_other), laid out as the simulator's callers build them.
#[cfg(test)]
pub(crate) fn test_object(syms: &[(&str, u8, u8)]) -> Vec<u8> {
    let mut strtab = vec![0u8];
    let mut symtab = vec![0u8; 24];
    for (name, info, other) in syms {
        symtab.extend_from_slice(&(strtab.len() as u32).to_le_bytes());
        symtab.extend_from_slice(&[*info, *other, 1, 0]);
        symtab.extend_from_slice(&[0; 16]);
        strtab.extend_from_slice(name.as_bytes());
        strtab.push(0);
    }
    let shstrtab = b"\0.strtab\0.symtab\0";
    let mut out = vec![0u8; 64];
    let strtab_off = out.len();
    out.extend_from_slice(&strtab);
    let shstrtab_off = out.len();
    out.extend_from_slice(shstrtab);
    out.resize(out.len().next_multiple_of(8), 0);
    let symtab_off = out.len();
    out.extend_from_slice(&symtab);
    let shoff = out.len();
    out.extend_from_slice(&[0; 64]);
    // (name, type, offset, size, link, entsize)
    for (name, ty, off, size, link, ent) in [
        (1u32, 3u32, strtab_off, strtab.len(), 0u32, 0u64),
        (17, 3, shstrtab_off, shstrtab.len(), 0, 0),
        (9, 2, symtab_off, symtab.len(), 1, 24),
    ] {
        let mut sh = [0u8; 64];
        sh[..4].copy_from_slice(&name.to_le_bytes());
        sh[4..8].copy_from_slice(&ty.to_le_bytes());
        sh[0x18..0x20].copy_from_slice(&(off as u64).to_le_bytes());
        sh[0x20..0x28].copy_from_slice(&(size as u64).to_le_bytes());
        sh[0x28..0x2c].copy_from_slice(&link.to_le_bytes());
        sh[0x38..0x40].copy_from_slice(&ent.to_le_bytes());
        out.extend_from_slice(&sh);
    }
    out[..8].copy_from_slice(b"\x7fELF\x02\x01\x01\0");
    out[0x10] = 1; // ET_REL
    out[0x14] = 1; // e_version
    out[0x28..0x30].copy_from_slice(&(shoff as u64).to_le_bytes());
    out[0x34] = 64; // e_ehsize
    out[0x3a] = 64; // e_shentsize
    out[0x3c] = 4; // e_shnum
    out[0x3e] = 2; // e_shstrndx
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_symbols_are_global_visible_functions() {
        let b = test_object(&[
            ("MatMulV2_1001", 0x12, 0),
            ("local_fn", 0x02, 0),
            ("data_obj", 0x11, 0),
            ("hidden_fn", 0x12, 2),
            ("AddCustom", 0x12, 0),
        ]);
        assert_eq!(kernel_symbols(&b), ["MatMulV2_1001", "AddCustom"]);
        // At an address that is not 8-aligned, the same symbols.
        let mut shifted = vec![0u8; b.len() + 1];
        shifted[1..].copy_from_slice(&b);
        assert_eq!(
            kernel_symbols(&shifted[1..]),
            ["MatMulV2_1001", "AddCustom"]
        );
    }

    #[test]
    fn tiling_keys_come_from_trailing_digits() {
        assert_eq!(tiling_key("MatMulV2_1002"), 1002);
        assert_eq!(tiling_key("add_custom"), 0);
        assert_eq!(tiling_key("plain"), 0);
        assert_eq!(tiling_key("x_"), 0);
    }

    #[test]
    fn entries() {
        assert_eq!(entry_of("Add_0a1b_12"), Some(12));
        assert_eq!(entry_of("noop"), None);
        assert_eq!(entry_of("x_"), None);
        assert_eq!(entry_of("x_1a"), None);
    }

    #[test]
    fn malformed_blobs_have_no_symbols() {
        assert!(kernel_symbols(b"").is_empty());
        assert!(kernel_symbols(b"\x7fELF\x02\x01\x01\x00").is_empty());
        assert!(kernel_symbols(b"\x7fELF\x02\x01\x01\0stb").is_empty());
        // Section headers far past the end of the blob.
        let mut h = vec![0u8; 64];
        h[..7].copy_from_slice(b"\x7fELF\x02\x01\x01");
        h[0x28..0x30].copy_from_slice(&u64::MAX.to_le_bytes());
        h[0x3a] = 0x40;
        h[0x3c] = 5;
        assert!(kernel_symbols(&h).is_empty());
        // Section headers just past the end.
        h[0x28..0x30].copy_from_slice(&0xffu64.to_le_bytes());
        h[0x3c] = 3;
        assert!(kernel_symbols(&h).is_empty());
        // A well-formed blob cut short anywhere, or with any byte of its headers clobbered.
        let b = test_object(&[("Add_1", 0x12, 0)]);
        assert_eq!(kernel_symbols(&b), ["Add_1"]);
        for len in 0..b.len() {
            kernel_symbols(&b[..len]);
        }
        for i in 0..b.len() {
            let mut c = b.clone();
            c[i] = 0xff;
            kernel_symbols(&c);
        }
        // 32-bit and big-endian ELFs are not read.
        let mut c = b.clone();
        c[4] = 1;
        assert!(kernel_symbols(&c).is_empty());
        let mut c = b.clone();
        c[5] = 2;
        assert!(kernel_symbols(&c).is_empty());
    }
}
