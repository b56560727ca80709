//! The local cluster: etcd, kube-apiserver, kube-scheduler and
//! kube-controller-manager as child processes of the runner.

/// Entry point of the `cluster` subcommand; `args` excludes the subcommand name.
pub fn cli_main(_args: Vec<std::ffi::OsString>) -> anyhow::Result<()> {
    anyhow::bail!("the local cluster is not implemented yet")
}
