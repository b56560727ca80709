//! `dra-e2e-agent`, the small program on nodes: its code is crates/agent;
//! it links nothing of the runner.
fn main() -> std::process::ExitCode {
    dra_e2e_agent::cli::main()
}
