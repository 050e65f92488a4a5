//! Status lines on stderr (progress, what is attached, how a session went), which `--quiet`
//! silences. Errors and warnings are printed whatever it says.
use std::sync::atomic::{AtomicBool, Ordering};

static QUIET: AtomicBool = AtomicBool::new(false);

/// `--quiet`: no status lines from now on.
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// Whether status lines are silenced.
pub fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// `eprintln!` for a status line: nothing under `--quiet`.
#[macro_export]
macro_rules! status {
    ($($arg:tt)*) => {
        if !$crate::say::quiet() {
            eprintln!($($arg)*);
        }
    };
}
