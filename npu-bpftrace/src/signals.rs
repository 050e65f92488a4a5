//! The signals that stop a session (SIGINT, SIGTERM, SIGHUP), with where each came from,
//! and those that start and stop recording within it (SIGUSR1, SIGUSR2).
//!
//! tokio's signal streams say only that a signal arrived. Stopping needs more: in `record`
//! mode the first stop signal is passed on to the traced command unless the terminal already
//! sent it to the command's whole process group (Ctrl-C, a hangup), and that is told by the
//! signal's `si_code` (`SI_KERNEL` for the terminal, `SI_USER` for kill(2)). So the handler
//! is our own: it writes the signal number and code to a pipe that the session reads.
use std::{
    io,
    os::fd::{AsRawFd, FromRawFd, OwnedFd},
    sync::atomic::{AtomicI32, Ordering},
};

use tokio::io::{Interest, unix::AsyncFd};

/// The signals that end a session: SIGHUP (an ssh disconnect) is treated like SIGTERM.
pub const STOP_SIGNALS: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];
/// The signals that start (SIGUSR1) and stop (SIGUSR2) recording, as nsys and perf's
/// control fds do; the session goes on.
pub const CONTROL_SIGNALS: [i32; 2] = [libc::SIGUSR1, libc::SIGUSR2];

/// The pipe's write end, for the handler (-1 until installed).
static WRITE_END: AtomicI32 = AtomicI32::new(-1);

/// One stop signal received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caught {
    pub signo: i32,
    /// Sent by the kernel (the terminal: Ctrl-C, a hangup) rather than by kill(2): the
    /// terminal sends it to the whole foreground process group, a traced command included.
    pub from_terminal: bool,
}

impl Caught {
    /// `SIGINT`, `SIGTERM`, `SIGHUP`, `SIGUSR1` or `SIGUSR2`.
    pub fn name(self) -> &'static str {
        match self.signo {
            libc::SIGINT => "SIGINT",
            libc::SIGTERM => "SIGTERM",
            libc::SIGHUP => "SIGHUP",
            libc::SIGUSR1 => "SIGUSR1",
            libc::SIGUSR2 => "SIGUSR2",
            _ => "a signal",
        }
    }

    /// One of [`STOP_SIGNALS`] (not a [`CONTROL_SIGNALS`] one).
    pub fn is_stop(self) -> bool {
        STOP_SIGNALS.contains(&self.signo)
    }

    /// The status a shell reports for a process this signal ended: 128 + its number.
    pub fn exit_code(self) -> u8 {
        128 + self.signo as u8
    }
}

/// The stop and control signals of this process, as an async stream.
pub struct StopSignals {
    read_end: AsyncFd<OwnedFd>,
}

impl StopSignals {
    /// Installs the handler for [`STOP_SIGNALS`] and [`CONTROL_SIGNALS`]; from now on they
    /// no longer end the process.
    /// Must run inside the tokio runtime.
    pub fn install() -> io::Result<Self> {
        let mut fds = [0; 2];
        // SAFETY: valid pointer to two ints.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: pipe2 just returned these two open fds, owned by nobody else.
        let (read_end, write_end) = unsafe { (OwnedFd::from_raw_fd(fds[0]), fds[1]) };
        let old = WRITE_END.swap(write_end, Ordering::SeqCst);
        if old >= 0 {
            // SAFETY: the fd of an earlier installation, which nobody reads any more.
            unsafe { libc::close(old) };
        }
        for signo in STOP_SIGNALS.into_iter().chain(CONTROL_SIGNALS) {
            // SAFETY: a zeroed sigaction is a valid value (no handler, empty mask, no flags).
            let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
            action.sa_sigaction = on_signal as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            // SAFETY: valid pointers; the handler only calls async-signal-safe functions.
            if unsafe { libc::sigaction(signo, &action, std::ptr::null_mut()) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        // SAFETY: the OwnedFd moves into the AsyncFd, which deregisters it before closing.
        let read_end = unsafe { AsyncFd::register_with_interest(read_end, Interest::READABLE) }?;
        Ok(Self { read_end })
    }

    /// The next stop signal; control signals meanwhile are ignored (recording is ending).
    pub async fn recv_stop(&mut self) -> io::Result<Caught> {
        loop {
            let caught = self.recv().await?;
            if caught.is_stop() {
                return Ok(caught);
            }
        }
    }

    /// The next stop or control signal.
    pub async fn recv(&mut self) -> io::Result<Caught> {
        loop {
            let mut guard = self.read_end.readable().await?;
            let mut buf = [0u8; 8];
            match guard.try_io(|fd| {
                // SAFETY: reads into a local buffer of its length.
                let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(n as usize)
                }
            }) {
                // Writes of 8 bytes to a pipe are atomic: whole messages or nothing.
                Ok(Ok(8)) => {
                    let signo = i32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]);
                    let code = i32::from_ne_bytes([buf[4], buf[5], buf[6], buf[7]]);
                    return Ok(Caught {
                        signo,
                        from_terminal: code == libc::SI_KERNEL,
                    });
                }
                Ok(Ok(_)) => continue,
                Ok(Err(e)) => return Err(e),
                Err(_would_block) => continue,
            }
        }
    }
}

/// The signal handler: passes (signal, si_code) to the pipe. A hangup of the terminal also
/// points stdout and stderr at /dev/null: writing to a hung-up terminal fails, and the
/// session must still flush and finish.
extern "C" fn on_signal(signo: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: only async-signal-safe calls (errno access, isatty's ioctl, open, dup2, close,
    // write); `info` is the kernel's siginfo for this delivery (or null).
    unsafe {
        let errno = *libc::__errno_location();
        if signo == libc::SIGHUP {
            let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if null >= 0 {
                for fd in [1, 2] {
                    if libc::isatty(fd) == 1 {
                        libc::dup2(null, fd);
                    }
                }
                libc::close(null);
            }
        }
        let code = if info.is_null() { 0 } else { (*info).si_code };
        let mut msg = [0u8; 8];
        msg[..4].copy_from_slice(&signo.to_ne_bytes());
        msg[4..].copy_from_slice(&code.to_ne_bytes());
        let fd = WRITE_END.load(Ordering::Relaxed);
        if fd >= 0 {
            libc::write(fd, msg.as_ptr().cast(), msg.len());
        }
        *libc::__errno_location() = errno;
    }
}
