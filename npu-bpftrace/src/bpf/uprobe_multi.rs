//! uprobe_multi links (Linux >= 6.6) through bpf(2), which aya 0.14 does not offer.
//!
//! A uprobe_multi link attaches one program to many offsets of one file, each with its own
//! attach cookie: one link per program and library file instead of one perf event per
//! function and program. The kernel only links programs loaded with the expected attach type
//! `BPF_TRACE_UPROBE_MULTI`, and aya loads uprobes without one, so the generic ENTER/EXIT
//! pair is loaded a second time here: the embedded object is parsed with `aya-obj`, its map
//! references are relocated against the maps aya created (both flavours share every map),
//! its calls are linked, and the instructions go to `BPF_PROG_LOAD` as `BPF_PROG_TYPE_KPROBE`
//! with that expected attach type, along with the object's BTF (`BPF_BTF_LOAD`) and the
//! programs' function and line info: the kernel wants function info for a program that
//! passes one of its functions to a helper (the `bpf_loop` callbacks). Links come from
//! `BPF_LINK_CREATE`.
//!
//! The attribute layouts and constants are those of the kernel's
//! `include/uapi/linux/bpf.h` (`union bpf_attr`: the `BPF_PROG_LOAD` and `BPF_BTF_LOAD`
//! structs and `link_create.uprobe_multi`), written down here for just the fields used.
use std::{
    collections::HashSet,
    ffi::{CString, c_long},
    fmt, io, mem,
    os::{
        fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd},
        unix::ffi::OsStrExt,
    },
    path::Path,
};

use aya_obj::{Function, Object, btf::BtfFeatures, generated::bpf_insn};

/// `enum bpf_cmd`.
const BPF_PROG_LOAD: c_long = 5;
const BPF_BTF_LOAD: c_long = 18;
const BPF_LINK_CREATE: c_long = 28;
/// `enum bpf_prog_type`: uprobes are kprobe-type programs.
const BPF_PROG_TYPE_KPROBE: u32 = 2;
/// `enum bpf_attach_type`.
const BPF_TRACE_UPROBE_MULTI: u32 = 48;
/// `link_create.uprobe_multi.flags`: the link's probes fire at function return.
const BPF_F_UPROBE_MULTI_RETURN: u32 = 1;
/// `BPF_OBJ_NAME_LEN`, the NUL included.
const OBJ_NAME_LEN: usize = 16;
/// The kernel's own `ENOTSUPP`, which some bpf(2) paths return to user space as is.
const ENOTSUPP: i32 = 524;
/// Verifier log kept when a load fails (the kernel keeps its tail when it is longer).
const LOG_BYTES: usize = 1 << 20;

/// The prefix of `union bpf_attr` that `BPF_PROG_LOAD` reads, up to `attach_btf_id`; the
/// kernel zero-fills what a shorter attribute leaves out.
#[repr(C)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; OBJ_NAME_LEN],
    prog_ifindex: u32,
    expected_attach_type: u32,
    prog_btf_fd: u32,
    func_info_rec_size: u32,
    func_info: u64,
    func_info_cnt: u32,
    line_info_rec_size: u32,
    line_info: u64,
    line_info_cnt: u32,
    /// Unused (0); spelled out so that no padding byte reaches the kernel.
    attach_btf_id: u32,
}

/// `union bpf_attr` for `BPF_BTF_LOAD`.
#[repr(C)]
struct BtfLoadAttr {
    btf: u64,
    btf_log_buf: u64,
    btf_size: u32,
    btf_log_size: u32,
    btf_log_level: u32,
    btf_log_true_size: u32,
}

/// `union bpf_attr` for `BPF_LINK_CREATE` with its `uprobe_multi` member.
#[repr(C)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_fd: u32,
    attach_type: u32,
    flags: u32,
    path: u64,
    offsets: u64,
    ref_ctr_offsets: u64,
    cookies: u64,
    cnt: u32,
    multi_flags: u32,
    pid: u32,
    /// Explicit, so that no byte handed to the kernel is uninitialized.
    _pad: u32,
}

// The offsets of include/uapi/linux/bpf.h.
const _: () = {
    assert!(mem::offset_of!(ProgLoadAttr, insns) == 8);
    assert!(mem::offset_of!(ProgLoadAttr, log_buf) == 32);
    assert!(mem::offset_of!(ProgLoadAttr, prog_name) == 48);
    assert!(mem::offset_of!(ProgLoadAttr, expected_attach_type) == 68);
    assert!(mem::offset_of!(ProgLoadAttr, func_info) == 80);
    assert!(mem::offset_of!(ProgLoadAttr, line_info) == 96);
    assert!(mem::size_of::<ProgLoadAttr>() == 112);
    assert!(mem::size_of::<BtfLoadAttr>() == 32);
    assert!(mem::offset_of!(LinkCreateAttr, attach_type) == 8);
    assert!(mem::offset_of!(LinkCreateAttr, path) == 16);
    assert!(mem::offset_of!(LinkCreateAttr, cookies) == 40);
    assert!(mem::offset_of!(LinkCreateAttr, cnt) == 48);
    assert!(mem::offset_of!(LinkCreateAttr, pid) == 56);
    assert!(mem::size_of::<LinkCreateAttr>() == 64);
};

/// A failed step, with the errno when the kernel gave one.
#[derive(Debug)]
pub(crate) struct Error {
    what: String,
    cause: ErrorCause,
}

#[derive(Debug)]
enum ErrorCause {
    Kernel(io::Error),
    Object(String),
}

impl Error {
    fn kernel(what: String, err: io::Error) -> Self {
        Self {
            what,
            cause: ErrorCause::Kernel(err),
        }
    }

    fn object(what: &str, detail: impl fmt::Display) -> Self {
        Self {
            what: what.to_owned(),
            cause: ErrorCause::Object(detail.to_string()),
        }
    }

    fn errno(&self) -> Option<i32> {
        match &self.cause {
            ErrorCause::Kernel(err) => err.raw_os_error(),
            ErrorCause::Object(_) => None,
        }
    }

    /// Whether the kernel refused in the way of a kernel without uprobe_multi (before 6.6,
    /// or built without it): `EINVAL`, `ENOSYS` or `EOPNOTSUPP`.
    pub(crate) fn is_unsupported(&self) -> bool {
        matches!(
            self.errno(),
            Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP | ENOTSUPP)
        )
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.cause {
            ErrorCause::Kernel(err) => write!(f, "{}: {err}", self.what),
            ErrorCause::Object(detail) => write!(f, "{}: {detail}", self.what),
        }
    }
}

impl std::error::Error for Error {}

/// The generic ENTER/EXIT pair loaded as uprobe_multi programs.
pub(crate) struct MultiPair {
    enter: OwnedFd,
    exit: OwnedFd,
}

impl MultiPair {
    /// Loads programs `enter` and `exit` of the BPF object `object` as uprobe_multi
    /// programs, their map references pointing at `maps` (map name, fd of the map already
    /// created for it).
    pub(crate) fn load(
        object: &[u8],
        maps: &[(&str, BorrowedFd<'_>)],
        enter: &str,
        exit: &str,
    ) -> Result<Self, Error> {
        let relocated = relocate(object, maps, &[enter, exit])?;
        let [enter_fn, exit_fn] = relocated.functions.as_slice() else {
            return Err(Error::object(
                "relocating the BPF object",
                "programs missing",
            ));
        };
        let btf = relocated.btf.as_ref().map(AsFd::as_fd);
        Ok(Self {
            enter: load_program(enter, enter_fn, btf, &relocated.license)?,
            exit: load_program(exit, exit_fn, btf, &relocated.license)?,
        })
    }

    /// Asks the kernel whether it links uprobe_multi programs, without attaching anything:
    /// a link to the root directory fails with `EBADF` (not a regular file) on a kernel
    /// that has uprobe_multi links, and with `EINVAL` (unknown attach type) before 6.6.
    pub(crate) fn check_links(&self) -> Result<(), Error> {
        match link(&self.enter, Path::new("/"), &[0], &[0], 0) {
            // Nothing can be attached to a directory; a link would still be harmless.
            Ok(_) => Ok(()),
            Err(e) if e.errno() == Some(libc::EBADF) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Attaches the pair to `offsets` of the file at `path`, the probe at `offsets[i]`
    /// getting the attach cookie `cookies[i]`, in every process. The return link comes
    /// first: a call entered between the two then has no ENTER (its EXIT finds no frame and
    /// is ignored) rather than a frame that never pops. Returns the two links; dropping
    /// them detaches.
    pub(crate) fn attach(
        &self,
        path: &Path,
        offsets: &[u64],
        cookies: &[u64],
    ) -> Result<[OwnedFd; 2], Error> {
        let exit = link(
            &self.exit,
            path,
            offsets,
            cookies,
            BPF_F_UPROBE_MULTI_RETURN,
        )?;
        let enter = link(&self.enter, path, offsets, cookies, 0)?;
        Ok([exit, enter])
    }
}

/// The programs asked for, in order, ready to load, with the object's BTF.
struct Relocated {
    license: CString,
    btf: Option<OwnedFd>,
    functions: Vec<Function>,
}

/// Parses `object`, points its map references at `maps` and links each program's calls.
fn relocate(
    object: &[u8],
    maps: &[(&str, BorrowedFd<'_>)],
    names: &[&str],
) -> Result<Relocated, Error> {
    let mut obj = Object::parse(object).map_err(|e| Error::object("parsing the BPF object", e))?;
    if obj.has_btf_relocations() {
        // CO-RE relocations would need the kernel's BTF; the generic pair has none.
        return Err(Error::object(
            "relocating the BPF object",
            "it has CO-RE relocations, which this loader does not apply",
        ));
    }
    let btf = load_btf(&mut obj)?;
    let object_maps = mem::take(&mut obj.maps);
    let mut with_fds = Vec::with_capacity(object_maps.len());
    for (name, map) in &object_maps {
        let Some(&(_, fd)) = maps.iter().find(|(n, _)| n == name) else {
            return Err(Error::object(
                "relocating the BPF object",
                format!("map {name} was not created"),
            ));
        };
        with_fds.push((name.as_str(), fd.as_raw_fd(), map));
    }
    let text_sections: HashSet<usize> = obj.functions.keys().map(|&(section, _)| section).collect();
    obj.relocate_maps(with_fds.into_iter(), &text_sections)
        .map_err(|e| Error::object("relocating the BPF maps", e))?;
    obj.relocate_calls(&text_sections)
        .map_err(|e| Error::object("linking the BPF calls", e))?;
    let mut functions = Vec::with_capacity(names.len());
    for name in names {
        let function = obj
            .programs
            .get(*name)
            .and_then(|program| obj.functions.get(&program.function_key()))
            .ok_or_else(|| {
                Error::object("relocating the BPF object", format!("no program {name}"))
            })?;
        functions.push(function.clone());
    }
    Ok(Relocated {
        license: obj.license.clone(),
        btf,
        functions,
    })
}

/// Loads the object's BTF into the kernel (`None` when it has none), as aya does for its
/// own loads: fixed up for a kernel with every BTF feature, which any kernel with
/// uprobe_multi (6.6) has.
fn load_btf(obj: &mut Object) -> Result<Option<OwnedFd>, Error> {
    let what = "loading the BPF object's BTF";
    let features = BtfFeatures::new(true, true, true, true, true, true, true, true);
    let Some(btf) = obj
        .fixup_and_sanitize_btf(&features)
        .map_err(|e| Error::object(what, e))?
    else {
        return Ok(None);
    };
    let bytes = btf.to_bytes();
    let btf_size = u32::try_from(bytes.len()).map_err(|_| Error::object(what, "too large"))?;
    let mut attr = BtfLoadAttr {
        btf: bytes.as_ptr() as u64,
        btf_log_buf: 0,
        btf_size,
        btf_log_size: 0,
        btf_log_level: 0,
        btf_log_true_size: 0,
    };
    // SAFETY: `attr` is a live, fully initialized #[repr(C)] `union bpf_attr` prefix for
    // BPF_BTF_LOAD, its size passed alongside; `bytes` outlives the call.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_BTF_LOAD,
            std::ptr::from_mut(&mut attr),
            mem::size_of::<BtfLoadAttr>(),
        )
    };
    new_fd(ret)
        .map(Some)
        .map_err(|err| Error::kernel(what.to_owned(), err))
}

/// `BPF_PROG_LOAD` of a kprobe-type program with expected attach type
/// `BPF_TRACE_UPROBE_MULTI`, named `<name>_multi` (shortened to fit). On a verifier
/// rejection the load is repeated with a log, whose last lines go into the error.
fn load_program(
    name: &str,
    function: &Function,
    btf: Option<BorrowedFd<'_>>,
    license: &CString,
) -> Result<OwnedFd, Error> {
    let what = || format!("loading {name} as a uprobe_multi program");
    let insns: &[bpf_insn] = &function.instructions;
    let insn_cnt =
        u32::try_from(insns.len()).map_err(|_| Error::object(&what(), "too many instructions"))?;
    let mut prog_name = [0u8; OBJ_NAME_LEN];
    let full = format!("{name}_multi");
    let len = full.len().min(OBJ_NAME_LEN - 1);
    prog_name[..len].copy_from_slice(&full.as_bytes()[..len]);
    let mut attr = ProgLoadAttr {
        prog_type: BPF_PROG_TYPE_KPROBE,
        insn_cnt,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        log_level: 0,
        log_size: 0,
        log_buf: 0,
        kern_version: 0,
        prog_flags: 0,
        prog_name,
        prog_ifindex: 0,
        expected_attach_type: BPF_TRACE_UPROBE_MULTI,
        prog_btf_fd: 0,
        func_info_rec_size: 0,
        func_info: 0,
        func_info_cnt: 0,
        line_info_rec_size: 0,
        line_info: 0,
        line_info_cnt: 0,
        attach_btf_id: 0,
    };
    // Kept alive until the loads below are done.
    let func_info = function.func_info.func_info_bytes();
    let line_info = function.line_info.line_info_bytes();
    if let Some(btf) = btf {
        attr.prog_btf_fd = fd_u32(btf, &what)?;
        if function.func_info_rec_size > 0 {
            attr.func_info = func_info.as_ptr() as u64;
            attr.func_info_cnt = count(function.func_info.len(), &what)?;
            attr.func_info_rec_size = count(function.func_info_rec_size, &what)?;
        }
        if function.line_info_rec_size > 0 {
            attr.line_info = line_info.as_ptr() as u64;
            attr.line_info_cnt = count(function.line_info.len(), &what)?;
            attr.line_info_rec_size = count(function.line_info_rec_size, &what)?;
        }
    }
    let err = match prog_load(&mut attr) {
        Ok(fd) => return Ok(fd),
        Err(err) => err,
    };
    // EACCES is the verifier's "rejected": say why. Anything else (EINVAL on a kernel
    // without uprobe_multi, EPERM) needs no log.
    if err.raw_os_error() != Some(libc::EACCES) {
        return Err(Error::kernel(what(), err));
    }
    let mut log = vec![0u8; LOG_BYTES];
    attr.log_level = 1;
    attr.log_size = LOG_BYTES as u32;
    attr.log_buf = log.as_mut_ptr() as u64;
    let err = match prog_load(&mut attr) {
        Ok(fd) => return Ok(fd),
        Err(err) => err,
    };
    let text =
        String::from_utf8_lossy(&log[..log.iter().position(|&b| b == 0).unwrap_or(log.len())])
            .into_owned();
    let tail: Vec<&str> = text.lines().rev().take(3).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    Err(Error::kernel(
        format!("{} (verifier: {})", what(), tail.join(" / ")),
        err,
    ))
}

/// `fd` as bpf(2) attributes hold it.
fn fd_u32(fd: BorrowedFd<'_>, what: &dyn Fn() -> String) -> Result<u32, Error> {
    u32::try_from(fd.as_raw_fd()).map_err(|_| Error::object(&what(), "negative fd"))
}

/// A size or count as bpf(2) attributes hold it.
fn count(n: usize, what: &dyn Fn() -> String) -> Result<u32, Error> {
    u32::try_from(n).map_err(|_| Error::object(&what(), "too many entries"))
}

/// bpf(BPF_PROG_LOAD), retried a few times on `EAGAIN` as the kernel asks.
fn prog_load(attr: &mut ProgLoadAttr) -> io::Result<OwnedFd> {
    let mut tries = 0;
    loop {
        // SAFETY: `attr` is a live, fully initialized #[repr(C)] prefix of `union bpf_attr`
        // for BPF_PROG_LOAD, its size passed alongside; the instruction, license and log
        // buffers it points at are borrowed by the caller for the whole call.
        let ret = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                BPF_PROG_LOAD,
                std::ptr::from_mut(attr),
                mem::size_of::<ProgLoadAttr>(),
            )
        };
        match new_fd(ret) {
            Err(err) if err.raw_os_error() == Some(libc::EAGAIN) && tries < 5 => tries += 1,
            result => return result,
        }
    }
}

/// bpf(BPF_LINK_CREATE) of a uprobe_multi link for `prog` on every process.
fn link(
    prog: &OwnedFd,
    path: &Path,
    offsets: &[u64],
    cookies: &[u64],
    flags: u32,
) -> Result<OwnedFd, Error> {
    let kind = if flags & BPF_F_UPROBE_MULTI_RETURN != 0 {
        "uretprobe_multi"
    } else {
        "uprobe_multi"
    };
    let what = || {
        format!(
            "attaching a {kind} link to {} functions of {}",
            offsets.len(),
            path.display()
        )
    };
    if offsets.len() != cookies.len() || offsets.is_empty() {
        return Err(Error::object(
            &what(),
            "offsets and cookies differ or are empty",
        ));
    }
    let cnt = u32::try_from(offsets.len()).map_err(|_| Error::object(&what(), "too many"))?;
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| Error::object(&what(), "the path contains a NUL byte"))?;
    let prog_fd = u32::try_from(prog.as_raw_fd())
        .map_err(|_| Error::object(&what(), "negative program fd"))?;
    let mut attr = LinkCreateAttr {
        prog_fd,
        target_fd: 0,
        attach_type: BPF_TRACE_UPROBE_MULTI,
        flags: 0,
        path: c_path.as_ptr() as u64,
        offsets: offsets.as_ptr() as u64,
        ref_ctr_offsets: 0,
        cookies: cookies.as_ptr() as u64,
        cnt,
        multi_flags: flags,
        pid: 0,
        _pad: 0,
    };
    // SAFETY: `attr` is a live, fully initialized #[repr(C)] `union bpf_attr` prefix for
    // BPF_LINK_CREATE, its size passed alongside; the path, offsets and cookies it points
    // at (`cnt` elements each) outlive the call.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_LINK_CREATE,
            std::ptr::from_mut(&mut attr),
            mem::size_of::<LinkCreateAttr>(),
        )
    };
    new_fd(ret).map_err(|err| Error::kernel(what(), err))
}

/// The fd a bpf(2) command returned, or its errno.
fn new_fd(ret: c_long) -> io::Result<OwnedFd> {
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = RawFd::try_from(ret).map_err(|_| io::Error::other("bpf(2) returned no fd"))?;
    // SAFETY: on success these commands return a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use aya_obj::generated::{self, bpf_attach_type, bpf_cmd, bpf_prog_type};

    use super::*;

    #[test]
    fn constants_match_the_uapi_bindings() {
        assert_eq!(BPF_PROG_LOAD, bpf_cmd::BPF_PROG_LOAD as c_long);
        assert_eq!(BPF_BTF_LOAD, bpf_cmd::BPF_BTF_LOAD as c_long);
        assert_eq!(BPF_LINK_CREATE, bpf_cmd::BPF_LINK_CREATE as c_long);
        assert_eq!(
            BPF_PROG_TYPE_KPROBE,
            bpf_prog_type::BPF_PROG_TYPE_KPROBE as u32
        );
        assert_eq!(
            BPF_TRACE_UPROBE_MULTI,
            bpf_attach_type::BPF_TRACE_UPROBE_MULTI as u32
        );
        assert_eq!(
            BPF_F_UPROBE_MULTI_RETURN,
            generated::BPF_F_UPROBE_MULTI_RETURN
        );
    }

    #[test]
    fn unsupported_means_the_kernel_said_so() {
        let einval = Error::kernel("x".into(), io::Error::from_raw_os_error(libc::EINVAL));
        assert!(einval.is_unsupported());
        let eperm = Error::kernel("x".into(), io::Error::from_raw_os_error(libc::EPERM));
        assert!(!eperm.is_unsupported());
        assert!(!Error::object("x", "y").is_unsupported());
        assert_eq!(
            eperm.to_string(),
            format!("x: {}", io::Error::from_raw_os_error(libc::EPERM))
        );
    }
}
