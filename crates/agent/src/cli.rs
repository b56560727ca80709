//! `dra-e2e-agent`'s command line: `proxy-agent` in proxy pods (and as
//! upstream's `/hostpathplugin` in the proxy image), `node-init` as process 1
//! of a real node, `sockets` for the interposer. The binary itself is a
//! target of the runner's package (`src/bin/dra-e2e-agent.rs`), so that
//! `cargo install` of the runner installs the agent beside it.
use std::process::ExitCode;

use clap::Parser;

#[derive(Debug, Parser)]
#[command(name = "dra-e2e-agent", version, about = "dra-e2e's program on nodes")]
enum Cli {
    /// Pairs each client of a unix socket with the runner's waiting
    /// connections (or, with --connect, relays one connection to a socket).
    ProxyAgent(crate::proxy_agent::Args),
    /// The node host pod's own process: serves the runner's sockets and
    /// files on the node for the whole run.
    NodeHost(crate::node_host::Args),
    /// Process 1 of a real node's PID namespace; started by the runner.
    NodeInit(crate::node_init::Args),
    /// Lists the unix sockets of a directory (the interposer follows a
    /// driver's registration sockets with it).
    Sockets(crate::sockets::Args),
}

/// The program's entry: parses its command line and runs the command.
pub fn main() -> ExitCode {
    let result = match Cli::parse() {
        Cli::ProxyAgent(args) => crate::proxy_agent::run(args).map(|()| 0),
        Cli::NodeHost(args) => crate::node_host::run(args).map(|()| 0),
        Cli::Sockets(args) => crate::sockets::run(args).map(|()| 0),
        Cli::NodeInit(args) => {
            crate::init_node_init_tracing();
            crate::node_init::main(&args)
        }
    };
    match result {
        Ok(0) => ExitCode::SUCCESS,
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
