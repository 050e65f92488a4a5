//! Code shared by the NPU simulator's libraries (statically linked into each of them).
//!
//! State that must be process-wide (the ground-truth writer, the per-thread API nesting) is not
//! here: it lives in `libnpu_sim_core.so`, which every library reaches through [`core`].
#![allow(clippy::missing_safety_doc)]

pub mod abi;
pub mod core;
pub mod dynlib;
pub mod env;
pub mod faults;
pub mod json;
pub mod time;
pub mod trace;

pub use libc;
