//! The output tree, made and written without following a symbolic link anywhere.
//!
//! The agent runs as root or with capabilities, and writes where `--out` says. A symbolic
//! link in that path, or one planted below it (`DIR/api/host=<h>` pointing at `/etc`), must
//! not redirect its writes. So the path is walked one component at a time from an open
//! directory (`openat` with `O_NOFOLLOW | O_DIRECTORY`), missing directories are made with
//! `mkdirat` (0700) and opened the same way, and every file is created relative to its
//! directory's descriptor with `O_CREAT | O_EXCL | O_NOFOLLOW`. Nothing resolves a path
//! twice, so nothing can be swapped between a check and its use.
use std::{
    ffi::{CString, OsStr},
    fs::File,
    io::{self, Write},
    os::{
        fd::{AsRawFd, FromRawFd, OwnedFd, RawFd},
        unix::ffi::OsStrExt,
    },
    path::{Component, Path, PathBuf},
};

use anyhow::{Context, Result, bail};

/// An open directory of the output tree.
#[derive(Debug)]
pub struct OutDir {
    path: PathBuf,
    fd: OwnedFd,
}

/// How a directory was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    Created,
    Existing,
}

impl OutDir {
    /// Opens the directory at `path`, making it and any missing parent (0700); refuses a
    /// symbolic link in any component. Says whether the last component existed.
    pub fn open_or_create(path: &Path) -> Result<(Self, Found)> {
        let mut parent = if path.is_absolute() {
            open_dir(libc::AT_FDCWD, OsStr::new("/"), false)
        } else {
            open_dir(libc::AT_FDCWD, OsStr::new("."), false)
        }
        .with_context(|| format!("opening the start of {}", path.display()))?;
        let names: Vec<&OsStr> = path
            .components()
            .filter_map(|c| match c {
                Component::Normal(name) => Some(name),
                Component::ParentDir => Some(OsStr::new("..")),
                Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
            })
            .collect();
        let mut found = Found::Existing;
        for (i, name) in names.iter().enumerate() {
            let last = i + 1 == names.len();
            let (fd, how) = step(parent.as_raw_fd(), name, last).map_err(|e| {
                let upto: PathBuf = names[..=i].iter().collect();
                let upto = if path.is_absolute() {
                    Path::new("/").join(upto)
                } else {
                    upto
                };
                describe(e, &upto, path)
            })?;
            parent = fd;
            found = how;
        }
        if names.is_empty() {
            // `.` or `/`: read access is needed for fsync and listings.
            parent = open_dir(parent.as_raw_fd(), OsStr::new("."), true)
                .with_context(|| format!("opening {}", path.display()))?;
        }
        Ok((
            Self {
                path: path.to_owned(),
                fd: parent,
            },
            found,
        ))
    }

    /// The subdirectory `name` (one component), made (0700) if missing.
    pub fn subdir(&self, name: &str) -> Result<Self> {
        let path = self.path.join(name);
        if name.contains('/') || name == ".." || name == "." || name.is_empty() {
            bail!("{name:?} is not a directory name");
        }
        let (fd, _) = step(self.fd.as_raw_fd(), OsStr::new(name), true).map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                anyhow::anyhow!(
                    "{} is a symbolic link: refusing to write through it",
                    path.display()
                )
            } else {
                describe(e, &path, &path)
            }
        })?;
        Ok(Self { path, fd })
    }

    /// The directory's path, for messages.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The owner of the directory.
    pub fn owner(&self) -> io::Result<u32> {
        Ok(fstat(self.fd.as_raw_fd())?.st_uid)
    }

    /// Whether the directory was removed (its last link is gone) while open.
    pub fn removed(&self) -> bool {
        fstat(self.fd.as_raw_fd()).is_ok_and(|st| st.st_nlink == 0)
    }

    /// Whether `name` exists in the directory (a symbolic link counts, unfollowed).
    pub fn contains(&self, name: &str) -> bool {
        let Ok(c) = CString::new(name) else {
            return false;
        };
        // SAFETY: a zeroed stat is a valid out-buffer; `c` is NUL-terminated.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid fd, path and buffer.
        unsafe {
            libc::fstatat(
                self.fd.as_raw_fd(),
                c.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            ) == 0
        }
    }

    /// Creates the new file `name` (0600), failing if anything, a link included, has that name.
    pub fn create_file(&self, name: &str) -> io::Result<File> {
        let c = cstring(name)?;
        // SAFETY: valid fd and NUL-terminated path.
        let fd = unsafe {
            libc::openat(
                self.fd.as_raw_fd(),
                c.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                0o600 as libc::c_uint,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: openat returned a new fd that nobody else owns.
        Ok(unsafe { File::from_raw_fd(fd) })
    }

    /// Opens the existing regular file `name` for writing, never through a link.
    fn open_file(&self, name: &str) -> io::Result<File> {
        let c = cstring(name)?;
        // SAFETY: valid fd and NUL-terminated path.
        let fd = unsafe {
            libc::openat(
                self.fd.as_raw_fd(),
                c.as_ptr(),
                libc::O_WRONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: openat returned a new fd that nobody else owns.
        Ok(unsafe { File::from_raw_fd(fd) })
    }

    /// Renames `from` to `to`, both in this directory.
    pub fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let (from, to) = (cstring(from)?, cstring(to)?);
        let dir = self.fd.as_raw_fd();
        // SAFETY: valid fds and NUL-terminated names.
        if unsafe { libc::renameat(dir, from.as_ptr(), dir, to.as_ptr()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Removes the file `name`.
    pub fn remove(&self, name: &str) -> io::Result<()> {
        let c = cstring(name)?;
        // SAFETY: valid fd and NUL-terminated name.
        if unsafe { libc::unlinkat(self.fd.as_raw_fd(), c.as_ptr(), 0) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Makes renames and creations in the directory durable.
    pub fn sync(&self) -> io::Result<()> {
        // SAFETY: valid fd.
        if unsafe { libc::fsync(self.fd.as_raw_fd()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// The names in the directory.
    pub fn names(&self) -> io::Result<Vec<String>> {
        // The descriptor's own directory (the /proc link names the open directory, not a
        // path that could have changed).
        let listing = std::fs::read_dir(format!("/proc/self/fd/{}", self.fd.as_raw_fd()))?;
        Ok(listing
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .collect())
    }

    /// Writes `name` atomically: the bytes go to `tmp` (created, or reused when it exists
    /// as a regular file, so space reserved there is used), which is fsynced and renamed
    /// over `name`; then the directory is fsynced.
    pub fn write_atomic(&self, name: &str, tmp: &str, bytes: &[u8]) -> io::Result<()> {
        let mut file = match self.open_file(tmp) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => self.create_file(tmp)?,
            Err(e) => return Err(e),
        };
        let written = file
            .write_all(bytes)
            .and_then(|()| file.set_len(bytes.len() as u64))
            .and_then(|()| file.sync_all())
            .and_then(|()| self.rename(tmp, name))
            .and_then(|()| self.sync());
        if written.is_err() {
            let _ = self.remove(tmp);
        }
        written
    }

    /// Creates `name` with `bytes` of space allocated, so a later
    /// [`write_atomic`](Self::write_atomic) through it succeeds on a full disk.
    pub fn reserve(&self, name: &str, bytes: u64) -> io::Result<()> {
        let _ = self.remove(name);
        let file = self.create_file(name)?;
        // SAFETY: valid fd; fallocate only allocates blocks of the file.
        if unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, bytes as libc::off_t) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// The same directory through a new descriptor.
    pub fn try_clone(&self) -> io::Result<Self> {
        Ok(Self {
            path: self.path.clone(),
            fd: self.fd.try_clone()?,
        })
    }
}

/// Opens the directory `name` under `parent`, making it (0700) when missing; returns it and
/// whether it was made. `last`: the component whose descriptor is kept (opened readable).
fn step(parent: RawFd, name: &OsStr, last: bool) -> io::Result<(OwnedFd, Found)> {
    match open_dir(parent, name, last) {
        Ok(fd) => Ok((fd, Found::Existing)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let c = cstring_os(name)?;
            // SAFETY: valid fd and NUL-terminated name.
            let made = unsafe { libc::mkdirat(parent, c.as_ptr(), 0o700) } == 0;
            let err = io::Error::last_os_error();
            if !made && err.kind() != io::ErrorKind::AlreadyExists {
                return Err(err);
            }
            let fd = open_dir(parent, name, last)?;
            Ok((
                fd,
                if made {
                    Found::Created
                } else {
                    Found::Existing
                },
            ))
        }
        Err(e) => Err(e),
    }
}

/// `openat(parent, name, O_DIRECTORY | O_NOFOLLOW)`: read access for the last component
/// (fsync, listing), a path-only descriptor for the others (enough to walk through a
/// directory one may search but not list).
fn open_dir(parent: RawFd, name: &OsStr, readable: bool) -> io::Result<OwnedFd> {
    let c = cstring_os(name)?;
    let access = if readable {
        libc::O_RDONLY
    } else {
        libc::O_PATH
    };
    // SAFETY: valid fd and NUL-terminated name.
    let fd = unsafe {
        libc::openat(
            parent,
            c.as_ptr(),
            access | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        let err = io::Error::last_os_error();
        // With O_PATH, a symbolic link opens as itself and fails O_DIRECTORY: tell it apart.
        if matches!(err.raw_os_error(), Some(libc::ENOTDIR | libc::ELOOP)) && is_symlink(parent, &c)
        {
            return Err(io::Error::from_raw_os_error(libc::ELOOP));
        }
        return Err(err);
    }
    // SAFETY: openat returned a new fd that nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn is_symlink(parent: RawFd, name: &CString) -> bool {
    // SAFETY: a zeroed stat is a valid out-buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid fd, name and buffer.
    let ok = unsafe { libc::fstatat(parent, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
    ok == 0 && st.st_mode & libc::S_IFMT == libc::S_IFLNK
}

fn fstat(fd: RawFd) -> io::Result<libc::stat> {
    // SAFETY: a zeroed stat is a valid out-buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid fd and buffer.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

/// A one-line error for a component of `whole` that could not be walked.
fn describe(err: io::Error, upto: &Path, whole: &Path) -> anyhow::Error {
    match err.raw_os_error() {
        Some(libc::ELOOP) => anyhow::anyhow!(
            "{} is a symbolic link; npu-bpftrace follows none in its output path \
             (give the real path instead of {})",
            upto.display(),
            whole.display()
        ),
        Some(libc::ENOTDIR) => anyhow::anyhow!("{} is not a directory", upto.display()),
        _ => anyhow::Error::new(err)
            .context(format!("cannot create output directory {}", upto.display())),
    }
}

fn cstring(name: &str) -> io::Result<CString> {
    CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

fn cstring_os(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}
