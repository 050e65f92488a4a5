//! Calls between the simulator's libraries.
//!
//! Cargo cannot link one cdylib against another, so each library resolves the functions it calls
//! in another one with `dlopen(soname)` + `dlsym`: the call then goes through the other library's
//! dynamic export, exactly where a uprobe on that symbol fires. The soname is found through
//! `LD_LIBRARY_PATH` (set by `set_env.sh`) or, failing that, next to the calling library in the
//! installed tree.
use std::ffi::{CStr, CString, c_void};

/// Where, relative to the directory of the calling library (or of a program in `bin/`), the
/// libraries of the tree live.
const TREE_DIRS: [&str; 5] = [
    ".",
    "../../../driver/lib64",
    "../../ascend-toolkit/latest/lib64",
    "../driver/lib64",
    "../ascend-toolkit/latest/lib64",
];

/// Opens `soname` (already loaded, on the search path, or in the installed tree). Aborts with a
/// message if it cannot be found: the installation is broken and nothing sensible can follow.
pub fn open(soname: &str) -> *mut c_void {
    let flags = libc::RTLD_NOW | libc::RTLD_GLOBAL;
    let name = CString::new(soname).expect("soname has no NUL");
    // SAFETY: plain dlopen of a NUL-terminated name.
    let h = unsafe { libc::dlopen(name.as_ptr(), flags) };
    if !h.is_null() {
        return h;
    }
    let first_err = last_error();
    if let Some(dir) = own_dir() {
        for rel in TREE_DIRS {
            let path = CString::new(format!("{dir}/{rel}/{soname}")).expect("path has no NUL");
            // SAFETY: as above.
            let h = unsafe { libc::dlopen(path.as_ptr(), flags) };
            if !h.is_null() {
                return h;
            }
        }
    }
    fatal(&format!(
        "cannot load {soname}: {first_err} (source set_env.sh of the simulator tree)"
    ))
}

/// Resolves `name` (NUL-terminated) in `lib`, aborting if it is missing.
///
/// # Safety
/// `lib` is a handle returned by [`open`].
// SAFETY: unsafe because `lib` must be a live dlopen handle and `name` NUL-terminated.
pub unsafe fn sym(lib: *mut c_void, name: &'static str, soname: &str) -> *mut c_void {
    // SAFETY: `name` is NUL-terminated by the callers (the `import_table!` macro).
    let p = unsafe { libc::dlsym(lib, name.as_ptr().cast()) };
    if p.is_null() {
        fatal(&format!("{soname} lacks {}", name.trim_end_matches('\0')))
    }
    p
}

fn last_error() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        return "unknown error".into();
    }
    // SAFETY: non-null C string from dlerror.
    unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
}

/// Directory of the shared object this code is linked into.
fn own_dir() -> Option<String> {
    // SAFETY: Dl_info is plain C data (pointers and integers) for which all-zero is valid.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the address; `info` is a valid out-parameter.
    let ok = unsafe { libc::dladdr(own_dir as *const c_void, &mut info) };
    if ok == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dli_fname is a NUL-terminated path owned by the loader.
    let path = unsafe { CStr::from_ptr(info.dli_fname) }
        .to_string_lossy()
        .into_owned();
    let path = std::fs::canonicalize(&path).ok()?;
    Some(path.parent()?.to_string_lossy().into_owned())
}

fn fatal(msg: &str) -> ! {
    eprintln!("npu-sim: {msg}");
    std::process::abort()
}

/// Declares a table of functions exported by another library, resolved once on first use:
/// `import_table! { pub struct Rt from "libruntime.so" { fn rtFree(p: *mut c_void) -> i32; } }`
/// then `(Rt::get().rtFree)(p)`.
#[macro_export]
macro_rules! import_table {
    ($vis:vis struct $name:ident from $soname:literal {
        $( fn $f:ident ( $($a:ident : $t:ty),* $(,)? ) $(-> $r:ty)? ; )*
    }) => {
        #[allow(non_snake_case)]
        $vis struct $name { $( pub $f: unsafe extern "C" fn($($t),*) $(-> $r)?, )* }
        impl $name {
            pub fn get() -> &'static $name {
                static T: ::std::sync::OnceLock<$name> = ::std::sync::OnceLock::new();
                T.get_or_init(|| {
                    let lib = $crate::dynlib::open($soname);
                    $name { $(
                        // SAFETY: the symbol is the C function with exactly this prototype.
                        $f: unsafe {
                            ::std::mem::transmute::<*mut ::std::ffi::c_void, unsafe extern "C" fn($($t),*) $(-> $r)?>(
                                $crate::dynlib::sym(lib, concat!(stringify!($f), "\0"), $soname))
                        },
                    )* }
                })
            }
        }
    };
}
