//! The HTTP/2 `:authority` a real kubelet sends to each plugin socket.
//!
//! The kubelet talks to both sockets with grpc-go, but dials them
//! differently, and grpc-go derives the authority from the dial target:
//!
//! - the plugin manager dials a *registration* socket by bare path with
//!   `grpc.DialContext(ctx, socketPath, …, WithContextDialer(unix))`. A target
//!   without a scheme falls back to the `passthrough` resolver, which does
//!   not choose an authority, so grpc-go uses the endpoint (the path)
//!   percent-encoded by its `encodeAuthority`:
//!   `%2Fvar%2Flib%2Fkubelet%2Fplugins_registry%2F<driver>-reg.sock`;
//! - the DRA manager dials the *DRA* endpoint (and its health service) as
//!   `grpc.NewClient("unix:" + endpoint)`; the `unix` resolver overrides the
//!   authority with `localhost`.
//!
//! (grpc-go v1.82/v1.83 `clientconn.go` `initAuthority`/`encodeAuthority`,
//! `internal/resolver/unix`; kubelet `pluginmanager/operationexecutor`
//! `dial` and `cm/dra/plugin/dra_plugin_manager.go`.)
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::{AsyncReadWrite, SendAuthority};

/// Which of a plugin's sockets the kubelet is dialling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KubeletSocket {
    /// `plugins_registry/<driver>-reg.sock`, dialled by bare path.
    Registration,
    /// The DRA endpoint the plugin registered (DRA and health services),
    /// dialled as `unix:<path>`.
    Dra,
}

/// What grpc-go's unix resolver puts in `:authority`.
pub const UNIX_TARGET_AUTHORITY: &str = "localhost";

/// The URI a Rust gRPC client (tonic) should be given for a connection from
/// [`KubeletSocket::client_io`]: its authority is what the wrapper expects.
pub const CLIENT_URI: &str = "http://localhost";

impl KubeletSocket {
    /// The `:authority` of every request a kubelet sends to `path`.
    pub fn authority(self, path: &Path) -> String {
        match self {
            Self::Registration => grpc_go_encode_authority(path.as_os_str().as_bytes()),
            Self::Dra => UNIX_TARGET_AUTHORITY.to_owned(),
        }
    }

    /// Makes `io`, a client connection to `path` used with URIs under
    /// [`CLIENT_URI`], carry this socket's kubelet authority on the wire:
    /// hyper cannot put a percent-encoded path in a URI, so for registration
    /// sockets [`SendAuthority`] rewrites it below hyper.
    pub fn client_io(self, path: &Path, io: impl AsyncReadWrite) -> Box<dyn AsyncReadWrite> {
        let authority = self.authority(path);
        if authority == UNIX_TARGET_AUTHORITY {
            Box::new(io)
        } else {
            Box::new(SendAuthority::new(io, authority))
        }
    }
}

/// grpc-go's `encodeAuthority`: every octet other than ASCII letters and
/// digits, the unreserved `-_.~`, the sub-delimiters `!$&'()*+,;=` and the
/// authority delimiters `:[]@` becomes `%XX` (upper-case hex).
pub fn grpc_go_encode_authority(endpoint: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(endpoint.len() * 3);
    for &c in endpoint {
        let keep = c.is_ascii_alphanumeric() || b"-_.~!$&'()*+,;=:[]@".contains(&c);
        if keep {
            out.push(char::from(c));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(c >> 4)]));
            out.push(char::from(HEX[usize::from(c & 15)]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registration_sockets_get_the_percent_encoded_path() {
        let path = Path::new("/var/lib/kubelet/plugins_registry/dra-1.k8s.io-reg.sock");
        assert_eq!(
            KubeletSocket::Registration.authority(path),
            "%2Fvar%2Flib%2Fkubelet%2Fplugins_registry%2Fdra-1.k8s.io-reg.sock"
        );
        assert_eq!(
            KubeletSocket::Dra.authority(Path::new("/var/lib/kubelet/plugins/d/dra.sock")),
            "localhost"
        );
    }

    #[test]
    fn encoding_matches_grpc_go() {
        assert_eq!(grpc_go_encode_authority(b"a-b_c.d~e"), "a-b_c.d~e");
        assert_eq!(grpc_go_encode_authority(b"!$&'()*+,;="), "!$&'()*+,;=");
        assert_eq!(grpc_go_encode_authority(b"[::1]:80@x"), "[::1]:80@x");
        assert_eq!(
            grpc_go_encode_authority(b"a b/%?#\xff"),
            "a%20b%2F%25%3F%23%FF"
        );
        // An authority h2 rejects, which is the point of the rewriter.
        assert!(http::uri::Authority::try_from("%2Fx.sock").is_err());
    }
}
