//! `dra-e2e-agent`: what runs on a node. `proxy-agent` in proxy pods (and as
//! upstream's `/hostpathplugin` in the proxy image), `node-init` as process 1
//! of a real node.
use std::process::ExitCode;

use clap::Parser;

#[derive(Debug, Parser)]
#[command(name = "dra-e2e-agent", version, about = "dra-e2e's program on nodes")]
enum Cli {
    /// Pairs each client of a unix socket with the runner's waiting
    /// connections (or, with --connect, relays one connection to a socket).
    ProxyAgent(dra_e2e_agent::proxy_agent::Args),
    /// Process 1 of a real node's PID namespace; started by the runner.
    NodeInit(dra_e2e_agent::node_init::Args),
    /// Lists the unix sockets of a directory (the interposer follows a
    /// driver's registration sockets with it).
    Sockets(dra_e2e_agent::sockets::Args),
}

fn main() -> ExitCode {
    let result = match Cli::parse() {
        Cli::ProxyAgent(args) => dra_e2e_agent::proxy_agent::run(args).map(|()| 0),
        Cli::Sockets(args) => dra_e2e_agent::sockets::run(args).map(|()| 0),
        Cli::NodeInit(args) => {
            dra_e2e_agent::init_node_init_tracing();
            dra_e2e_agent::node_init::main(&args)
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
