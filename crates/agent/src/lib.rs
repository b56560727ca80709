//! The program that runs on nodes rather than beside the runner: the node
//! host, the long-lived process of a node host pod ([`node_host`], its wire
//! in [`host_wire`]), the proxy agent that upstream's way of proxying runs by
//! exec ([`proxy_agent`], with its `--connect` mode in [`relay`]) and
//! process 1 of a real node's PID namespace ([`node_init`]). It is its own small binary, `dra-e2e-agent`, so the
//! proxy image carries this and not the whole runner; the runner links the
//! same code for the agents it starts on this machine.
/// The program's name: on `PATH` in the proxy image, and what proxy pods run.
pub const PROGRAM: &str = "dra-e2e-agent";

pub mod cli;
pub mod endpoint;
pub mod host_wire;
pub mod node_host;
pub mod node_init;
pub mod proxy_agent;
pub mod relay;
pub mod sockets;
pub mod takeover;

/// Logging of process 1 of a real node: its stderr is the node's
/// `node-init.log`, so plain lines stamped with the time, as the node's
/// other logs are.
pub fn init_node_init_tracing() {
    struct Clock;
    impl tracing_subscriber::fmt::time::FormatTime for Clock {
        fn format_time(
            &self,
            w: &mut tracing_subscriber::fmt::format::Writer<'_>,
        ) -> std::fmt::Result {
            let now = jiff::Timestamp::now().strftime("%H:%M:%S%.3f");
            write!(w, "[node-init {now}]")
        }
    }
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("info"))
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_timer(Clock)
        .with_level(false)
        .with_target(false)
        .try_init();
}
