//! What the runner and a node host say to each other: one request line at
//! the start of every connection, one answer line, then the connection's
//! purpose (a kubelet's bytes, a file's bytes, a listing).
//!
//! A line rather than a framed protocol because every connection does one
//! thing: a `serve` connection waits for a kubelet and then carries its gRPC
//! bytes untouched, so the only framing needed is where the preamble ends.
//! Both sides know nothing else of each other: the runner's pool sees a
//! connection that answered `ok`, the node host a connection that named a
//! socket. Every request carries the run's token, because the node host
//! listens on the node's address, where anyone on the network may connect,
//! and what it offers (sockets in the kubelet's directories, files in the
//! CDI directory) is root's.
use std::path::{Path, PathBuf};

/// First word of every request: a node host from another version of the
/// project refuses what it would misread.
pub const VERSION: &str = "dra-e2e-host/1";
/// Where the node host finds the run's token (from a Secret).
pub const TOKEN_ENV: &str = "DRA_E2E_NODE_HOST_TOKEN";
/// The longest request or answer line, newline included.
pub const MAX_LINE: usize = 4096;
/// First words of the line the node host prints on stdout once it listens.
pub const READY_PREFIX: &str = "node-host listening";

/// What one connection is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Listen on the unix socket at this path if not yet, and let this
    /// connection wait for its next client: the client's bytes and the
    /// runner's are copied both ways until either ends.
    Serve(PathBuf),
    /// Stop listening on the socket, close the connections waiting for it
    /// and remove its file.
    Close(PathBuf),
    /// Connect to the unix socket and copy both ways.
    Connect(PathBuf),
    /// The unix sockets of a directory: `<identity> <name>` lines.
    Sockets(PathBuf),
    /// Write a file whole (its bytes follow the request line): a reader
    /// never sees part of it.
    Write { path: PathBuf, len: u64 },
    /// Remove a file; one that is not there is removed already.
    Remove(PathBuf),
    /// Whether a file exists: `yes` or `no`.
    Exists(PathBuf),
    /// Every CDI spec file of a directory: `<len> <name>` lines, each
    /// followed by the file's bytes.
    Specs(PathBuf),
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WireError {
    #[error("not a {VERSION} request")]
    Version,
    #[error("wrong token")]
    Token,
    #[error("unknown request {0:?}")]
    Verb(String),
    #[error("request {verb} needs {what}")]
    Missing { verb: String, what: &'static str },
    #[error("path {0:?} is not absolute or has `..` in it")]
    Path(String),
    #[error("length {0:?} is not a number")]
    Length(String),
    #[error("line has a newline or a NUL in it")]
    Control,
}

impl Request {
    fn verb(&self) -> &'static str {
        match self {
            Request::Serve(_) => "serve",
            Request::Close(_) => "close",
            Request::Connect(_) => "connect",
            Request::Sockets(_) => "sockets",
            Request::Write { .. } => "write",
            Request::Remove(_) => "remove",
            Request::Exists(_) => "exists",
            Request::Specs(_) => "specs",
        }
    }

    pub fn path(&self) -> &Path {
        match self {
            Request::Serve(p)
            | Request::Close(p)
            | Request::Connect(p)
            | Request::Sockets(p)
            | Request::Remove(p)
            | Request::Exists(p)
            | Request::Specs(p)
            | Request::Write { path: p, .. } => p,
        }
    }

    /// The request line, newline included. The path is the rest of the line,
    /// so spaces in it need no quoting.
    pub fn line(&self, token: &str) -> Result<String, WireError> {
        let path = self.path().to_str().ok_or(WireError::Control)?;
        check_path(path)?;
        if token.contains(['\n', ' ', '\0']) {
            return Err(WireError::Control);
        }
        let verb = self.verb();
        Ok(match self {
            Request::Write { len, .. } => format!("{VERSION} {token} {verb} {len} {path}\n"),
            _ => format!("{VERSION} {token} {verb} {path}\n"),
        })
    }

    /// Reads a request line (without its newline), checking the token.
    pub fn parse(line: &str, token: &str) -> Result<Request, WireError> {
        let mut words = line.splitn(3, ' ');
        if words.next() != Some(VERSION) {
            return Err(WireError::Version);
        }
        if !same(words.next().unwrap_or_default(), token) {
            return Err(WireError::Token);
        }
        let rest = words.next().unwrap_or_default();
        let (verb, rest) = rest.split_once(' ').unwrap_or((rest, ""));
        let missing = |what| WireError::Missing {
            verb: verb.to_owned(),
            what,
        };
        let (len, path) = if verb == "write" {
            let (len, path) = rest.split_once(' ').ok_or_else(|| missing("a length"))?;
            let len = len
                .parse::<u64>()
                .map_err(|_| WireError::Length(len.to_owned()))?;
            (len, path)
        } else {
            (0, rest)
        };
        if path.is_empty() {
            return Err(missing("a path"));
        }
        check_path(path)?;
        let path = PathBuf::from(path);
        Ok(match verb {
            "serve" => Request::Serve(path),
            "close" => Request::Close(path),
            "connect" => Request::Connect(path),
            "sockets" => Request::Sockets(path),
            "write" => Request::Write { path, len },
            "remove" => Request::Remove(path),
            "exists" => Request::Exists(path),
            "specs" => Request::Specs(path),
            other => return Err(WireError::Verb(other.to_owned())),
        })
    }
}

fn check_path(path: &str) -> Result<(), WireError> {
    if path.contains(['\n', '\0']) {
        return Err(WireError::Control);
    }
    if !path.starts_with('/') || Path::new(path).components().any(|c| c.as_os_str() == "..") {
        return Err(WireError::Path(path.to_owned()));
    }
    Ok(())
}

/// Compares without stopping at the first difference, so the time an answer
/// takes does not tell how much of a guessed token was right.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// The node host's answer to a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Done (or, for `serve`, waiting); `instance` names the node host
    /// process, so the runner sees when it was started again.
    Ok {
        instance: String,
    },
    Err(String),
}

impl Answer {
    pub fn line(&self) -> String {
        match self {
            Answer::Ok { instance } => format!("ok {instance}\n"),
            // One line: a message never breaks the framing.
            Answer::Err(m) => format!("err {}\n", m.replace(['\n', '\r'], " ")),
        }
    }

    pub fn parse(line: &str) -> Option<Answer> {
        if let Some(instance) = line.strip_prefix("ok ") {
            Some(Answer::Ok {
                instance: instance.to_owned(),
            })
        } else {
            line.strip_prefix("err ").map(|m| Answer::Err(m.to_owned()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_request_reads_back_as_written() {
        let p = || PathBuf::from("/var/lib/kubelet/plugins/a b.k8s.io/dra.sock");
        for r in [
            Request::Serve(p()),
            Request::Close(p()),
            Request::Connect(p()),
            Request::Sockets(p()),
            Request::Write { path: p(), len: 42 },
            Request::Remove(p()),
            Request::Exists(p()),
            Request::Specs(p()),
        ] {
            let line = r.line("t0ken").unwrap();
            assert!(line.ends_with('\n'));
            assert_eq!(Request::parse(line.trim_end_matches('\n'), "t0ken"), Ok(r));
        }
    }

    #[test]
    fn a_wrong_token_or_version_is_refused_before_anything_else() {
        let line = Request::Serve("/s".into()).line("right").unwrap();
        let line = line.trim_end();
        assert_eq!(Request::parse(line, "wrong"), Err(WireError::Token));
        assert_eq!(Request::parse(line, "righ"), Err(WireError::Token));
        assert_eq!(
            Request::parse(&line.replace("/1", "/2"), "right"),
            Err(WireError::Version)
        );
        assert_eq!(Request::parse("", "right"), Err(WireError::Version));
    }

    #[test]
    fn bad_requests_are_named() {
        let parse = |rest: &str| Request::parse(&format!("{VERSION} t {rest}"), "t");
        assert_eq!(parse("bogus /x"), Err(WireError::Verb("bogus".into())));
        assert!(matches!(parse("serve"), Err(WireError::Missing { .. })));
        assert_eq!(parse("serve rel/x"), Err(WireError::Path("rel/x".into())));
        assert_eq!(
            parse("remove /a/../etc"),
            Err(WireError::Path("/a/../etc".into()))
        );
        assert_eq!(parse("write x /a"), Err(WireError::Length("x".into())));
        assert!(matches!(
            parse("write /a"),
            Err(WireError::Missing { .. }) | Err(WireError::Length(_))
        ));
        assert_eq!(
            Request::Serve("/a\nb".into()).line("t"),
            Err(WireError::Control)
        );
    }

    #[test]
    fn answers_are_one_line() {
        let ok = Answer::Ok {
            instance: "abc".into(),
        };
        assert_eq!(Answer::parse(ok.line().trim_end()), Some(ok));
        let err = Answer::Err("two\nlines".into());
        assert_eq!(err.line(), "err two lines\n");
        assert_eq!(
            Answer::parse(err.line().trim_end()),
            Some(Answer::Err("two lines".into()))
        );
        assert_eq!(Answer::parse("what"), None);
    }
}
