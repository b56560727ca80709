//! The Go toolchain on this machine, as far as building the control plane
//! and the real nodes' components needs it: which version `go` is, and
//! whether it satisfies a module's `go` line.
//!
//! Versions follow the Go project's own order (`go/version`): a language
//! version (`1.26`) comes before its prereleases (`1.26rc1`), which come
//! before the release (`1.26.0`). Distributions append words of their own
//! (`go1.26.8 X:nocoverageredesign`, `go1.22.2-1`, `(Red Hat 1.21.9-1.el9)`),
//! so only the leading version is read. A development toolchain (`devel
//! go1.27-abcdef`) satisfies every requirement, as the go command itself
//! treats it.
use std::cmp::Ordering;
use std::fmt;
use std::process::Command;

/// Where the prerelease of a version stands; later variants are newer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    /// `1.26`: the language version, older than any of its toolchains.
    Language,
    Beta(u32),
    Rc(u32),
    Release,
}

/// A Go version such as `1.26.8`, `1.27rc1` or `1.26`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GoVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
    pub stage: Stage,
}

impl Ord for GoVersion {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.major, self.minor, self.patch, self.stage).cmp(&(
            other.major,
            other.minor,
            other.patch,
            other.stage,
        ))
    }
}

impl PartialOrd for GoVersion {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for GoVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)?;
        match self.stage {
            Stage::Language => Ok(()),
            Stage::Beta(n) => write!(f, "beta{n}"),
            Stage::Rc(n) => write!(f, "rc{n}"),
            Stage::Release => write!(f, ".{}", self.patch),
        }
    }
}

impl GoVersion {
    /// Reads a version without the `go` prefix (`1.26.8`, `1.27rc1`,
    /// `1.26`), ignoring whatever follows it (`-1`, `+vendor`, ` X:...`).
    /// `None` when it does not start with `<major>.<minor>`.
    pub fn parse(s: &str) -> Option<GoVersion> {
        let (major, rest) = number(s)?;
        let (minor, rest) = number(rest.strip_prefix('.')?)?;
        let mut v = GoVersion {
            major,
            minor,
            patch: 0,
            stage: Stage::Language,
        };
        if let Some(after) = rest.strip_prefix('.')
            && let Some((patch, _)) = number(after)
        {
            v.patch = patch;
            v.stage = Stage::Release;
        } else if let Some((n, _)) = rest.strip_prefix("rc").and_then(number) {
            v.stage = Stage::Rc(n);
        } else if let Some((n, _)) = rest.strip_prefix("beta").and_then(number) {
            v.stage = Stage::Beta(n);
        } else if major == 1 && minor < 21 {
            // Before Go 1.21, `go1.20` named the release itself.
            v.stage = Stage::Release;
        }
        Some(v)
    }
}

/// Leading decimal digits of `s` as a number, and the rest.
fn number(s: &str) -> Option<(u32, &str)> {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    Some((s[..end].parse().ok()?, &s[end..]))
}

/// What `go version` (or `go env GOVERSION`) says of the toolchain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Toolchain {
    Release(GoVersion),
    /// Built from Go's own source tree; the version it develops, if named.
    Devel(Option<GoVersion>),
}

impl Toolchain {
    /// Reads the output of `go version` (`go version go1.26.8 linux/amd64`,
    /// `go version devel go1.27-3f2c1a4 Tue ... linux/amd64`) or of `go env
    /// GOVERSION` (`go1.26.8`).
    pub fn parse(output: &str) -> Option<Toolchain> {
        let words: Vec<&str> = output.split_whitespace().collect();
        // The first word naming a version: `go1...`, never the command
        // name `go` itself.
        let version = words
            .iter()
            .filter_map(|w| w.strip_prefix("go"))
            .find_map(GoVersion::parse);
        if words.contains(&"devel") {
            return Some(Toolchain::Devel(version));
        }
        version.map(Toolchain::Release)
    }

    /// Whether this toolchain can build a module whose `go` line is `needed`.
    pub fn satisfies(&self, needed: &GoVersion) -> bool {
        match self {
            Toolchain::Release(v) => v >= needed,
            Toolchain::Devel(_) => true,
        }
    }
}

impl fmt::Display for Toolchain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Toolchain::Release(v) => write!(f, "Go {v}"),
            Toolchain::Devel(Some(v)) => write!(f, "a development Go ({v})"),
            Toolchain::Devel(None) => write!(f, "a development Go"),
        }
    }
}

/// Why the toolchain could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ToolchainError {
    #[error("`go` is not on PATH")]
    Missing,
    #[error("`go version` failed ({status}): {stderr}")]
    Failed { status: String, stderr: String },
    #[error("`go version` printed {0:?}, which names no Go version")]
    Unreadable(String),
}

/// The `go` on PATH, as the build scripts run it: with `GOTOOLCHAIN=local`,
/// so that no other toolchain is fetched in its place.
pub fn installed() -> Result<Toolchain, ToolchainError> {
    let out = Command::new("go")
        .arg("version")
        .env("GOTOOLCHAIN", "local")
        .output()
        .map_err(|_| ToolchainError::Missing)?;
    if !out.status.success() {
        return Err(ToolchainError::Failed {
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    Toolchain::parse(&text).ok_or(ToolchainError::Unreadable(text))
}

/// The `go` line of a go.mod file's text (`go 1.26.0`).
pub fn module_requirement(go_mod: &str) -> Option<GoVersion> {
    go_mod
        .lines()
        .find_map(|l| l.trim().strip_prefix("go "))
        .and_then(|v| GoVersion::parse(v.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> GoVersion {
        GoVersion::parse(s).unwrap_or_else(|| panic!("{s} does not parse"))
    }

    fn release(s: &str) -> Toolchain {
        Toolchain::Release(v(s))
    }

    #[test]
    fn go_version_outputs_name_their_toolchain() {
        let cases = [
            // The release this machine has (the word `go` before it is
            // the command, not a version: the bug this guards).
            ("go version go1.26.8 linux/amd64", release("1.26.8")),
            ("go version go1.27rc1 linux/amd64", release("1.27rc1")),
            ("go version go1.27beta2 darwin/arm64", release("1.27beta2")),
            // Distributions' suffixes.
            (
                "go version go1.26.8 X:nocoverageredesign linux/amd64",
                release("1.26.8"),
            ),
            ("go version go1.22.2-1 linux/amd64", release("1.22.2")),
            (
                "go version go1.21.9 (Red Hat 1.21.9-1.el9_4) linux/amd64",
                release("1.21.9"),
            ),
            (
                "go version go1.26.8+bigcorp.3 linux/amd64",
                release("1.26.8"),
            ),
            // Old releases named without a patch.
            ("go version go1.20 linux/amd64", release("1.20.0")),
            // `go env GOVERSION`.
            ("go1.26.8", release("1.26.8")),
            ("go1.27rc1\n", release("1.27rc1")),
            // Development toolchains.
            (
                "go version devel go1.27-3f2c1a4b Tue Nov 3 10:00:00 2026 +0000 linux/amd64",
                Toolchain::Devel(Some(v("1.27"))),
            ),
            (
                "go version devel +3f2c1a4b Tue Nov 3 10:00:00 2026 +0000 linux/amd64",
                Toolchain::Devel(None),
            ),
            ("devel go1.27-3f2c1a4b", Toolchain::Devel(Some(v("1.27")))),
        ];
        for (out, want) in cases {
            assert_eq!(Toolchain::parse(out), Some(want), "{out}");
        }
        for junk in ["go version", "", "go version gox linux/amd64", "go1"] {
            assert_eq!(Toolchain::parse(junk), None, "{junk}");
        }
    }

    #[test]
    fn versions_follow_gos_order() {
        let order = [
            "1.25.9",
            "1.26",
            "1.26beta1",
            "1.26rc1",
            "1.26rc2",
            "1.26.0",
            "1.26.6",
            "1.26.10",
            "1.27rc1",
            "1.27.0",
            "2.0.0",
        ];
        for pair in order.windows(2) {
            assert!(v(pair[0]) < v(pair[1]), "{} < {}", pair[0], pair[1]);
        }
        assert_eq!(v("1.26.0"), v("1.26.0"));
    }

    #[test]
    fn a_toolchain_satisfies_the_module_it_can_build() {
        let needed = v("1.26.0");
        assert!(release("1.26.8").satisfies(&needed));
        assert!(release("1.26.0").satisfies(&needed));
        assert!(release("1.27rc1").satisfies(&needed));
        assert!(!release("1.26rc2").satisfies(&needed));
        assert!(!release("1.25.9").satisfies(&needed));
        assert!(Toolchain::Devel(None).satisfies(&needed));
        // A language-version go line is met by its prereleases.
        assert!(release("1.26rc1").satisfies(&v("1.26")));
    }

    #[test]
    fn the_go_line_of_a_module() {
        let m = "module x\n\ngo 1.26.0\n\ntoolchain go1.26.8\n\nrequire (\n)\n";
        assert_eq!(module_requirement(m), Some(v("1.26.0")));
        assert_eq!(module_requirement("module x\n"), None);
    }

    #[test]
    fn versions_print_as_go_spells_them() {
        assert_eq!(v("1.26.8").to_string(), "1.26.8");
        assert_eq!(v("1.27rc1").to_string(), "1.27rc1");
        assert_eq!(v("1.26").to_string(), "1.26");
        assert_eq!(release("1.26.8").to_string(), "Go 1.26.8");
    }
}
