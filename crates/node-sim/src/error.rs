//! Errors of starting and running simulated nodes.
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum NodeSimError {
    #[error("node {node}: {action}: {source}")]
    Kube {
        node: String,
        action: String,
        #[source]
        source: kube::Error,
    },
    #[error("node {node}: {action} {}: {source}", path.display())]
    Io {
        node: String,
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("node {node}: watch {}: {source}", path.display())]
    Watch {
        node: String,
        path: PathBuf,
        #[source]
        source: notify::Error,
    },
    #[error("node {node}: invalid configuration: {message}")]
    Config { node: String, message: String },
}
