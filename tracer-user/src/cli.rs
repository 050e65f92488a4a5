//! Command-line interface.
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Trace Huawei Ascend NPU (CANN) workloads with eBPF uprobes: every ACL, runtime, HCCL,
/// mstx and driver call of a process, with zero code change.
#[derive(Debug, Parser)]
#[command(name = "npu-bpftrace", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {}

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        None => {
            use clap::CommandFactory;
            Cli::command().print_help()?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
