//! `npu-bpftrace`: zero-code-change tracing of Ascend NPU (CANN) workloads with eBPF.
use clap::Parser;

mod cli;

fn main() -> std::process::ExitCode {
    let args = cli::Cli::parse();
    match cli::run(args) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("npu-bpftrace: error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
