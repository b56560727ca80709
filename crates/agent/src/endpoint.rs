//! The agent's endpoint syntax, as hostpathplugin's proxy mode reads it.
use std::path::PathBuf;

/// Where the agent listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A unix socket path.
    Unix(PathBuf),
    /// `host:port`; an empty host (`:9001`) means every address of the
    /// network namespace, as Go's `net.Listen("tcp", ":9001")` does.
    Tcp { host: String, port: u16 },
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EndpointError {
    #[error("endpoint {0:?} is empty")]
    Empty(String),
    #[error("tcp endpoint {0:?} is not of the form tcp://[host]:port")]
    BadTcp(String),
}

/// Parses `unix://<path>`, `tcp://[host]:<port>` (scheme case-insensitive) or
/// a bare unix socket path.
pub fn parse(value: &str) -> Result<Endpoint, EndpointError> {
    let (scheme, rest) = match value.split_once("://") {
        Some((s, r)) if s.eq_ignore_ascii_case("unix") || s.eq_ignore_ascii_case("tcp") => {
            (s.to_ascii_lowercase(), r)
        }
        _ => ("unix".to_owned(), value),
    };
    if rest.is_empty() {
        return Err(EndpointError::Empty(value.to_owned()));
    }
    if scheme == "unix" {
        return Ok(Endpoint::Unix(PathBuf::from(rest)));
    }
    let bad = || EndpointError::BadTcp(value.to_owned());
    let (host, port) = rest.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    let host = match host.strip_prefix('[') {
        Some(h) => h.strip_suffix(']').ok_or_else(bad)?,
        None if host.contains(':') => return Err(bad()),
        None => host,
    };
    Ok(Endpoint::Tcp {
        host: host.to_owned(),
        port,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp(host: &str, port: u16) -> Endpoint {
        Endpoint::Tcp {
            host: host.to_owned(),
            port,
        }
    }

    #[test]
    fn parses_upstream_forms() {
        assert_eq!(parse("tcp://:9001").unwrap(), tcp("", 9001));
        assert_eq!(parse("TCP://127.0.0.1:0").unwrap(), tcp("127.0.0.1", 0));
        assert_eq!(parse("tcp://[::1]:9002").unwrap(), tcp("::1", 9002));
        assert_eq!(parse("tcp://localhost:80").unwrap(), tcp("localhost", 80));
        assert_eq!(
            parse("unix:///var/lib/kubelet/plugins_registry/d-reg.sock").unwrap(),
            Endpoint::Unix("/var/lib/kubelet/plugins_registry/d-reg.sock".into())
        );
        assert_eq!(
            parse("/var/lib/kubelet/plugins/d/dra.sock").unwrap(),
            Endpoint::Unix("/var/lib/kubelet/plugins/d/dra.sock".into())
        );
    }

    #[test]
    fn rejects_malformed_tcp() {
        for bad in [
            "tcp://9001",
            "tcp://:x",
            "tcp://::1:80",
            "tcp://[::1:80",
            "tcp://:70000",
        ] {
            assert!(matches!(parse(bad), Err(EndpointError::BadTcp(_))), "{bad}");
        }
        assert!(matches!(parse("unix://"), Err(EndpointError::Empty(_))));
        assert!(matches!(parse(""), Err(EndpointError::Empty(_))));
    }
}
