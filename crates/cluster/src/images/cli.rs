//! `dra-e2e image`: an OCI image archive holding one program, for a driver
//! whose build gives a single static binary (a Go program built with
//! `CGO_ENABLED=0`, say). Real local nodes import such an archive
//! (`--image-archive`, a profile's `imageArchives`) and never pull, so this
//! is all a driver author needs instead of a container build and a registry.
//!
//! The image holds the program, a world-writable `/tmp`, and nothing else
//! (busybox and its applets with `--with-busybox`): no shell, no CA
//! certificates, no time zones. That suffices for a kubelet
//! plugin, which talks to the API server with the service account's CA (the
//! kubelet mounts it) and to the kubelet over unix sockets in host
//! directories; a program that needs more needs a real image build.
use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;

use super::{Entry, ImageSpec, LayerCompression, builtin, libs, reference_tag, write_archive};
use anyhow::{Context as _, bail};

/// The options of `dra-e2e image`.
#[derive(Debug, clap::Args)]
#[command(
    about = "Write an OCI image archive holding one static program, for real local nodes",
    long_about = "Write an OCI image archive holding one program (a static binary) and a \
                  writable /tmp, for real local nodes to import (--image-archive, a profile's \
                  imageArchives): no container build or registry needed. `dra-e2e image runner` \
                  writes the runner's own image, for `dra-e2e job`.",
    // `image runner --out F` needs no --binary or --reference.
    subcommand_negates_reqs = true,
    args_conflicts_with_subcommands = true,
)]
pub struct ImageArgs {
    #[command(subcommand)]
    kind: Option<ImageKind>,
    /// The program to put in the image; statically linked unless
    /// --with-shared-libs is given.
    #[arg(long, value_name = "PATH", required = true)]
    binary: Option<PathBuf>,
    /// The full reference, with a tag, that pods name the image by
    /// (`localhost/example/driver:v1`); the import names the image after it.
    #[arg(long, value_name = "REF", required = true)]
    reference: Option<String>,
    /// The archive to write (its directory is created if needed; an existing
    /// file is replaced).
    #[arg(long, value_name = "FILE", required = true)]
    out: Option<PathBuf>,
    /// Where the program goes inside the image (default: `/` and the
    /// binary's file name).
    #[arg(long, value_name = "PATH")]
    path: Option<String>,
    /// The image's entrypoint, one argument per flag (default: the program
    /// alone). Pod specs' `command` replaces it anyway.
    #[arg(long, value_name = "ARG", allow_hyphen_values = true)]
    entrypoint: Vec<String>,
    /// An environment variable of the image, `NAME=VALUE` (repeatable).
    #[arg(long, value_name = "NAME=VALUE")]
    env: Vec<String>,
    /// For a dynamically linked program: add every shared library it loads,
    /// as this machine's dynamic loader finds them.
    #[arg(long)]
    with_shared_libs: bool,
    /// Add busybox (Debian's busybox-static at /bin/busybox, which real
    /// nodes need anyway) with a link per applet in /bin: for an image that
    /// needs a shell, as the node host pods of `--proxy-image` do (they run
    /// `/bin/sh`, as upstream's alpine-based hostpathplugin image has it).
    #[arg(long)]
    with_busybox: bool,
    /// gzip the layer (smaller archive, slower to write and import).
    #[arg(long)]
    gzip: bool,
}

/// The images `dra-e2e image` writes besides one program's.
#[derive(Debug, clap::Subcommand)]
enum ImageKind {
    Runner(RunnerImageArgs),
}

/// The options of `dra-e2e image runner`.
#[derive(Debug, clap::Args)]
#[command(
    about = "Write an OCI image archive of this runner, for `dra-e2e job`",
    long_about = "Write an OCI image archive carrying this runner (the running dra-e2e, with the \
                  shared libraries it loads and busybox), which `dra-e2e job` runs in the \
                  cluster under test. Load it into the cluster's nodes (`kind load \
                  image-archive`, `dra-e2e cluster up --image-archive`) or push it to a \
                  registry the nodes pull from."
)]
pub struct RunnerImageArgs {
    /// The archive to write (its directory is created if needed; an existing
    /// file is replaced).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// The full reference, with a tag, that the Job names the image by.
    #[arg(long, value_name = "REF", default_value_t = runner_reference())]
    reference: String,
    /// gzip the layer (smaller archive, slower to write and import).
    #[arg(long)]
    gzip: bool,
}

/// The runner image's default reference: this runner's version, under a
/// registry domain no one pulls from (the image is loaded, not pulled).
pub fn runner_reference() -> String {
    format!("dra-e2e.local/runner:{}", env!("CARGO_PKG_VERSION"))
}

/// Runs `dra-e2e image ARGS`; returns the exit status.
pub fn cli_main(cli: ImageArgs) -> anyhow::Result<i32> {
    if let Some(ImageKind::Runner(runner)) = cli.kind {
        return runner_main(runner);
    }
    // clap requires the three without a subcommand.
    let (Some(binary), Some(reference), Some(out)) = (cli.binary, cli.reference, cli.out) else {
        bail!("dra-e2e image needs --binary, --reference and --out (or: dra-e2e image runner)");
    };
    let options = ProgramImage {
        binary,
        reference,
        path: cli.path,
        entrypoint: cli.entrypoint,
        env: cli.env,
        with_shared_libs: cli.with_shared_libs,
        busybox: cli
            .with_busybox
            .then(|| PathBuf::from(crate::real_node::binaries::BUSYBOX)),
        compression: if cli.gzip {
            LayerCompression::Gzip
        } else {
            LayerCompression::None
        },
    };
    let spec = options.spec()?;
    write_for_handing_on(&spec, &out)
}

/// `dra-e2e image runner`: the running executable is the program.
fn runner_main(cli: RunnerImageArgs) -> anyhow::Result<i32> {
    check_reference(&cli.reference)
        .map_err(|reason| anyhow::anyhow!("--reference {}: {reason}", cli.reference))?;
    let program = std::env::current_exe().context("finding the running dra-e2e executable")?;
    let busybox = PathBuf::from(crate::real_node::binaries::BUSYBOX);
    let mut spec = builtin::runner(&cli.reference, &program, &busybox).with_context(|| {
        format!(
            "the runner image of {} (busybox from {})",
            program.display(),
            busybox.display()
        )
    })?;
    if cli.gzip {
        spec.compression = LayerCompression::Gzip;
    }
    write_for_handing_on(&spec, &cli.out)
}

/// Writes `spec` to `out` with a plain file's mode and says what it wrote.
fn write_for_handing_on(spec: &ImageSpec, out: &std::path::Path) -> anyhow::Result<i32> {
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating the directory {}", dir.display()))?;
    }
    let info = write_archive(spec, out)?;
    // The archive is written through a private temporary file (0600); it is
    // meant to be handed on, so it gets a plain file's mode.
    std::fs::set_permissions(out, std::fs::Permissions::from_mode(0o644))
        .with_context(|| format!("setting the mode of {}", out.display()))?;
    let size = std::fs::metadata(out)
        .with_context(|| format!("reading {}", out.display()))?
        .len();
    println!(
        "wrote {}: image {} ({} MiB, manifest {})",
        out.display(),
        info.reference,
        size.div_ceil(1 << 20),
        info.manifest_digest
    );
    Ok(0)
}

/// An image of one program: what `dra-e2e image` writes.
#[derive(Debug, Clone)]
pub struct ProgramImage {
    pub binary: PathBuf,
    pub reference: String,
    /// Inside the image; `None`: `/<file name of binary>`.
    pub path: Option<String>,
    /// Empty: the program alone.
    pub entrypoint: Vec<String>,
    /// `NAME=VALUE` strings, after the default `PATH`.
    pub env: Vec<String>,
    pub with_shared_libs: bool,
    /// busybox to add with its applets (`--with-busybox`); `None`: no shell.
    pub busybox: Option<PathBuf>,
    pub compression: LayerCompression,
}

impl ProgramImage {
    /// Checks the options and the program and describes the image. Every
    /// error names what is wrong: the reference, the binary, a variable.
    pub fn spec(&self) -> anyhow::Result<ImageSpec> {
        check_reference(&self.reference)
            .map_err(|reason| anyhow::anyhow!("--reference {}: {reason}", self.reference))?;
        let binary = &self.binary;
        let meta =
            std::fs::metadata(binary).with_context(|| format!("--binary {}", binary.display()))?;
        if !meta.is_file() {
            bail!("--binary {}: not a regular file", binary.display());
        }
        let path = match &self.path {
            Some(p) => p.clone(),
            None => {
                let name = binary
                    .file_name()
                    .and_then(|n| n.to_str())
                    .with_context(|| {
                        format!(
                            "--binary {}: its file name is not UTF-8; give --path",
                            binary.display()
                        )
                    })?;
                format!("/{name}")
            }
        };
        if !path.starts_with('/') {
            bail!("--path {path}: must be an absolute path inside the image");
        }
        for e in &self.env {
            match e.split_once('=') {
                Some((name, _)) if !name.is_empty() => {}
                _ => bail!("--env {e}: write NAME=VALUE"),
            }
        }

        let mut spec = ImageSpec::new(&self.reference);
        spec.compression = self.compression;
        // Go's os.TempDir and many libraries assume a writable /tmp. A
        // container's root file system is writable anyway, but the
        // directory must exist.
        spec.entries = vec![
            Entry::host_file(path.clone(), 0o755, binary),
            Entry::dir("/tmp", 0o1777),
        ];
        if let Some(busybox) = &self.busybox {
            let applets = builtin::busybox_applets(busybox).with_context(|| {
                format!(
                    "--with-busybox: listing the applets of {}",
                    busybox.display()
                )
            })?;
            if path == builtin::BUSYBOX_PATH || applets.iter().any(|a| path == format!("/bin/{a}"))
            {
                bail!(
                    "--path {path}: --with-busybox has busybox and a link per applet there; \
                     give the program another path"
                );
            }
            // busybox_entries brings its own /tmp, the same as the one above.
            spec.entries.retain(|e| e.path() != "/tmp");
            spec.entries
                .extend(builtin::busybox_entries(busybox, &applets));
        }
        if let Some(loader) = libs::interpreter(binary)? {
            if !self.with_shared_libs {
                bail!(
                    "--binary {}: dynamically linked (its loader is {}), and the image would \
                     hold nothing but the program: build it statically (for Go: \
                     CGO_ENABLED=0) or pass --with-shared-libs to add the libraries it loads \
                     on this machine",
                    binary.display(),
                    loader.display()
                );
            }
            let (lib_entries, ld_library_path) =
                builtin::shared_library_entries(&self.reference, binary)?;
            spec.entries.extend(lib_entries);
            spec.env.extend(ld_library_path);
        }
        spec.env.extend(self.env.iter().cloned());
        spec.entrypoint = if self.entrypoint.is_empty() {
            vec![path]
        } else {
            self.entrypoint.clone()
        };
        Ok(spec)
    }
}

/// Checks a full image reference as containerd and the kubelet read it
/// (`[domain[:port]/]path:tag`), so that a name pods cannot match is
/// refused here rather than found as an `ErrImageNeverPull` later. The
/// kubelet normalizes a name without a domain to `docker.io/library/...`,
/// which the imported name would then not be: a domain is required.
pub fn check_reference(reference: &str) -> Result<(), String> {
    let tag = reference_tag(reference).map_err(|e| match e {
        super::ImageError::Reference { reason, .. } => reason,
        other => other.to_string(),
    })?;
    let name = &reference[..reference.len() - tag.len() - 1];
    if tag.len() > 128
        || !tag.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
        || !tag
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
    {
        return Err(format!(
            "tag `{tag}`: letters, digits, `_`, `.` and `-` only, not starting with `.` or `-`, \
             at most 128 characters"
        ));
    }
    let (domain, path) = match name.split_once('/') {
        Some((d, p)) if d.contains(['.', ':']) || d == "localhost" => (d, p),
        _ => {
            return Err(format!(
                "`{name}` has no registry domain (`localhost/{name}`, `registry.k8s.io/...`): \
                 the kubelet would look for docker.io/{}{name}",
                if name.contains('/') { "" } else { "library/" }
            ));
        }
    };
    let (host, port) = match domain.split_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (domain, None),
    };
    if host.is_empty()
        || !host
            .split('.')
            .all(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
        || port.is_some_and(|p| p.is_empty() || !p.chars().all(|c| c.is_ascii_digit()))
    {
        return Err(format!(
            "`{domain}` is not a registry domain (`host[:port]`)"
        ));
    }
    for component in path.split('/') {
        let ok = !component.is_empty()
            && component.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            && component.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            && component
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c));
        if !ok {
            return Err(format!(
                "path component `{component}`: lower-case letters, digits and `.`, `_`, `-` \
                 between them only"
            ));
        }
    }
    Ok(())
}
