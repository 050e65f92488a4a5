#![no_std]
//! Library target so `tracer-user` can depend on this crate and rebuild when it changes;
//! the BPF programs are the binary target (`src/main.rs`).
