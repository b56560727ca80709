//! `dra-e2e proxy-agent`: pairs unix-socket clients with waiting TCP connections.

/// Entry point of the `proxy-agent` subcommand; `args` excludes the subcommand name.
pub fn cli_main(_args: Vec<std::ffi::OsString>) -> anyhow::Result<()> {
    anyhow::bail!("proxy-agent is not implemented yet")
}
