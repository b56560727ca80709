//! OCI image archives the runner writes itself, for real nodes that cannot
//! pull from a registry.
//!
//! An archive is a tar of an OCI image layout (`oci-layout`, `index.json`,
//! `blobs/sha256/...`) holding one manifest, its config and a single layer.
//! The manifest's descriptor in `index.json` carries the full reference in
//! `io.containerd.image.name` (and the tag in
//! `org.opencontainers.image.ref.name`), which is what
//! `ctr -n k8s.io images import` names the image after. Pods that use the
//! reference with `imagePullPolicy: IfNotPresent` then run it.
//!
//! [`ImageSpec`] describes an image: its reference, its process defaults and
//! the files of its layer. [`write_archive`] turns it into an archive;
//! [`builtin`] has the images a real node needs (pause, busybox, the proxy
//! image carrying this runner).
pub mod builtin;
pub mod cli;
mod layer;
pub mod libs;

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufWriter, Read, Seek, Write};
use std::path::{Path, PathBuf};

use oci_spec::image::{
    ANNOTATION_REF_NAME, Arch, ConfigBuilder, Descriptor, DescriptorBuilder, Digest,
    ImageConfigurationBuilder, ImageIndexBuilder, ImageManifestBuilder, MediaType, OciLayout,
    OciLayoutBuilder, Os, PlatformBuilder, RootFsBuilder, Sha256Digest,
};
use sha2::{Digest as _, Sha256};

pub use builtin::{BUSYBOX_IMAGE, PAUSE_IMAGE};

/// The annotation containerd reads an imported image's name from.
pub const ANNOTATION_CONTAINERD_IMAGE_NAME: &str = "io.containerd.image.name";

/// The `PATH` every image built here gets.
pub const DEFAULT_PATH: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Where the content of a regular file in the layer comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileSource {
    /// A file on this machine, read when the archive is written (symlinks
    /// followed).
    Host(PathBuf),
    /// Bytes given in memory.
    Bytes(Vec<u8>),
}

/// One entry of the layer. Paths are absolute paths inside the image
/// (`/bin/sh`); missing parent directories are added with mode 0755.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    Dir {
        path: String,
        mode: u32,
    },
    File {
        path: String,
        mode: u32,
        source: FileSource,
    },
    Symlink {
        path: String,
        target: String,
    },
}

impl Entry {
    pub fn dir(path: impl Into<String>, mode: u32) -> Self {
        Entry::Dir {
            path: path.into(),
            mode,
        }
    }

    /// A regular file with the given content.
    pub fn file(path: impl Into<String>, mode: u32, content: impl Into<Vec<u8>>) -> Self {
        Entry::File {
            path: path.into(),
            mode,
            source: FileSource::Bytes(content.into()),
        }
    }

    /// A regular file copied from `host` on this machine.
    pub fn host_file(path: impl Into<String>, mode: u32, host: impl Into<PathBuf>) -> Self {
        Entry::File {
            path: path.into(),
            mode,
            source: FileSource::Host(host.into()),
        }
    }

    pub fn symlink(path: impl Into<String>, target: impl Into<String>) -> Self {
        Entry::Symlink {
            path: path.into(),
            target: target.into(),
        }
    }

    /// The path inside the image.
    pub fn path(&self) -> &str {
        match self {
            Entry::Dir { path, .. } | Entry::File { path, .. } | Entry::Symlink { path, .. } => {
                path
            }
        }
    }
}

/// How the layer blob is stored in the archive.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LayerCompression {
    /// A plain tar: fastest to write and to import, largest on disk.
    #[default]
    None,
    /// gzip at the fastest level.
    Gzip,
}

/// An image to write: its full reference, process defaults and layer files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageSpec {
    /// Full reference with a tag, as pods name it:
    /// `registry.k8s.io/pause:3.10`.
    pub reference: String,
    /// More full references for the same image: `index.json` names the
    /// manifest once per reference, and containerd's import makes an image
    /// of each (as `ctr images export` of several tags of one image writes).
    pub other_references: Vec<String>,
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
    /// `KEY=value` strings.
    pub env: Vec<String>,
    pub working_dir: Option<String>,
    pub entries: Vec<Entry>,
    pub compression: LayerCompression,
}

impl ImageSpec {
    /// An image with no files, `PATH` set and nothing to run.
    pub fn new(reference: impl Into<String>) -> Self {
        Self {
            reference: reference.into(),
            other_references: Vec::new(),
            entrypoint: Vec::new(),
            cmd: Vec::new(),
            env: vec![DEFAULT_PATH.to_owned()],
            working_dir: None,
            entries: Vec::new(),
            compression: LayerCompression::None,
        }
    }
}

/// What [`write_archive`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchiveInfo {
    pub path: PathBuf,
    pub reference: String,
    /// `sha256:...` of the manifest: the image's digest once imported.
    pub manifest_digest: String,
    pub config_digest: String,
    /// Digest of the layer blob as stored (compressed if gzip).
    pub layer_digest: String,
    /// Digest of the uncompressed layer tar (the config's `rootfs.diff_ids`).
    pub diff_id: String,
}

/// Runs `cmd` (described as `command` in errors) and returns its stdout;
/// failing to start it or a non-zero exit is an [`ImageError::Command`]
/// quoting its stderr.
pub(crate) fn stdout_of(
    cmd: &mut std::process::Command,
    command: String,
) -> Result<String, ImageError> {
    let out = cmd.output().map_err(|e| ImageError::Command {
        command: command.clone(),
        detail: e.to_string(),
    })?;
    if !out.status.success() {
        return Err(ImageError::Command {
            command,
            detail: format!(
                "{}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Writing or describing an image failed; every variant names the image and,
/// where there is one, the file.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("image {image}: {op} {path}: {source}", path = .path.display())]
    Io {
        image: String,
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("image {image}: invalid reference: {reason}")]
    Reference { image: String, reason: String },
    #[error("image {image}: layer entry {path:?}: {reason}")]
    LayerPath {
        image: String,
        path: String,
        reason: String,
    },
    #[error("image {image}: building the OCI {what}: {source}")]
    Oci {
        image: String,
        what: &'static str,
        #[source]
        source: oci_spec::OciSpecError,
    },
    #[error("running `{command}`: {detail}")]
    Command { command: String, detail: String },
    #[error(
        "{exe} needs the shared library {library}, which the dynamic loader cannot find",
        exe = .exe.display()
    )]
    MissingLibrary { exe: PathBuf, library: String },
    #[error("{path}: cannot read its ELF headers: {detail}", path = .path.display())]
    Elf { path: PathBuf, detail: String },
}

/// The tag of a full reference (`registry.k8s.io/pause:3.10` -> `3.10`).
/// References without a tag, or pinned by digest, are refused: containerd
/// would store them under a name pods do not use.
pub fn reference_tag(reference: &str) -> Result<&str, ImageError> {
    let bad = |reason: &str| ImageError::Reference {
        image: reference.to_owned(),
        reason: reason.to_owned(),
    };
    if reference.is_empty() || reference.chars().any(char::is_whitespace) {
        return Err(bad("empty or contains whitespace"));
    }
    if reference.contains('@') {
        return Err(bad("digest references cannot be written, use a tag"));
    }
    let last = reference.rsplit('/').next().unwrap_or(reference);
    match last.split_once(':') {
        Some((name, tag)) if !name.is_empty() && !tag.is_empty() && !tag.contains(':') => Ok(tag),
        _ => Err(bad("needs a tag (`name:tag`)")),
    }
}

/// A writer that hashes and counts everything passing through it.
struct Hashing<W> {
    inner: W,
    hasher: Sha256,
    len: u64,
}

impl<W: Write> Hashing<W> {
    fn new(inner: W) -> Self {
        Self {
            inner,
            hasher: Sha256::new(),
            len: 0,
        }
    }

    fn finish(self) -> (W, Sha256Digest, u64) {
        let digest = sha256_of(self.hasher);
        (self.inner, digest, self.len)
    }
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

fn sha256_of(hasher: Sha256) -> Sha256Digest {
    let hex: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    hex.parse()
        .expect("64 lowercase hex characters are a valid sha256 digest")
}

fn sha256_bytes(bytes: &[u8]) -> Sha256Digest {
    let mut h = Sha256::new();
    h.update(bytes);
    sha256_of(h)
}

/// Writes `spec` as an OCI image archive at `dest` (replaced atomically if it
/// exists; its directory must exist). Temporary files live next to `dest`
/// and are removed on error.
pub fn write_archive(spec: &ImageSpec, dest: &Path) -> Result<ArchiveInfo, ImageError> {
    let image = spec.reference.as_str();
    let mut names = Vec::new();
    for r in std::iter::once(&spec.reference).chain(&spec.other_references) {
        names.push((r.as_str(), reference_tag(r)?));
    }
    let io_err = |op: &'static str, path: &Path| {
        let path = path.to_owned();
        move |source| ImageError::Io {
            image: image.to_owned(),
            op,
            path,
            source,
        }
    };
    let oci_err = |what: &'static str| {
        move |source| ImageError::Oci {
            image: image.to_owned(),
            what,
            source,
        }
    };
    let dir = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };

    // The layer goes to a temporary file first: its digests are needed
    // before the manifest can be written, and it may be large.
    let layer_tmp = tempfile::Builder::new()
        .prefix(".layer-")
        .tempfile_in(dir)
        .map_err(io_err("creating a temporary file in", dir))?;
    let layer_file = layer_tmp
        .reopen()
        .map_err(io_err("opening", layer_tmp.path()))?;
    let entries = layer::plan(image, &spec.entries)?;
    let (diff_id, layer_digest, layer_size) = match spec.compression {
        LayerCompression::None => {
            let sink = Hashing::new(BufWriter::new(layer_file));
            let sink = layer::write(image, &entries, sink)?;
            let (buf, digest, len) = sink.finish();
            finish_file(buf).map_err(io_err("writing", layer_tmp.path()))?;
            (digest.clone(), digest, len)
        }
        LayerCompression::Gzip => {
            let blob = Hashing::new(BufWriter::new(layer_file));
            let gz = flate2::write::GzEncoder::new(blob, flate2::Compression::fast());
            let sink = layer::write(image, &entries, Hashing::new(gz))?;
            let (gz, diff_id, _) = sink.finish();
            let blob = gz.finish().map_err(io_err("writing", layer_tmp.path()))?;
            let (buf, digest, len) = blob.finish();
            finish_file(buf).map_err(io_err("writing", layer_tmp.path()))?;
            (diff_id, digest, len)
        }
    };

    let layer_media = match spec.compression {
        LayerCompression::None => MediaType::ImageLayer,
        LayerCompression::Gzip => MediaType::ImageLayerGzip,
    };
    let mut process = ConfigBuilder::default().env(spec.env.clone());
    if !spec.entrypoint.is_empty() {
        process = process.entrypoint(spec.entrypoint.clone());
    }
    if !spec.cmd.is_empty() {
        process = process.cmd(spec.cmd.clone());
    }
    if let Some(wd) = &spec.working_dir {
        process = process.working_dir(wd.clone());
    }
    let config = ImageConfigurationBuilder::default()
        .architecture(Arch::default())
        .os(Os::default())
        .config(process.build().map_err(oci_err("config"))?)
        .rootfs(
            RootFsBuilder::default()
                .typ("layers")
                .diff_ids(vec![Digest::from(diff_id.clone()).to_string()])
                .build()
                .map_err(oci_err("rootfs"))?,
        )
        .build()
        .map_err(oci_err("config"))?;
    let config_json = config.to_string().map_err(oci_err("config"))?.into_bytes();
    let config_digest = sha256_bytes(&config_json);

    let manifest = ImageManifestBuilder::default()
        .schema_version(2u32)
        .media_type(MediaType::ImageManifest)
        .config(Descriptor::new(
            MediaType::ImageConfig,
            config_json.len() as u64,
            config_digest.clone(),
        ))
        .layers(vec![Descriptor::new(
            layer_media,
            layer_size,
            layer_digest.clone(),
        )])
        .build()
        .map_err(oci_err("manifest"))?;
    let manifest_json = manifest
        .to_string()
        .map_err(oci_err("manifest"))?
        .into_bytes();
    let manifest_digest = sha256_bytes(&manifest_json);

    let mut manifest_descs = Vec::new();
    for (reference, tag) in names {
        let annotations = HashMap::from([
            (
                ANNOTATION_CONTAINERD_IMAGE_NAME.to_owned(),
                reference.to_owned(),
            ),
            (ANNOTATION_REF_NAME.to_owned(), tag.to_owned()),
        ]);
        manifest_descs.push(
            DescriptorBuilder::default()
                .media_type(MediaType::ImageManifest)
                .size(manifest_json.len() as u64)
                .digest(manifest_digest.clone())
                .annotations(annotations)
                .platform(
                    PlatformBuilder::default()
                        .architecture(Arch::default())
                        .os(Os::default())
                        .build()
                        .map_err(oci_err("platform"))?,
                )
                .build()
                .map_err(oci_err("manifest descriptor"))?,
        );
    }
    let index = ImageIndexBuilder::default()
        .schema_version(2u32)
        .media_type(MediaType::ImageIndex)
        .manifests(manifest_descs)
        .build()
        .map_err(oci_err("index"))?;
    let index_json = index.to_string().map_err(oci_err("index"))?.into_bytes();
    let layout: OciLayout = OciLayoutBuilder::default()
        .image_layout_version("1.0.0")
        .build()
        .map_err(oci_err("layout"))?;
    let layout_json = serde_json::to_vec(&layout).map_err(|e| ImageError::Oci {
        image: image.to_owned(),
        what: "layout",
        source: oci_spec::OciSpecError::SerDe(e),
    })?;

    let out_tmp = tempfile::Builder::new()
        .prefix(".archive-")
        .tempfile_in(dir)
        .map_err(io_err("creating a temporary file in", dir))?;
    let out_file = out_tmp
        .reopen()
        .map_err(io_err("opening", out_tmp.path()))?;
    let mut tar = tar::Builder::new(BufWriter::new(out_file));
    let blob_path = |d: &Sha256Digest| format!("blobs/sha256/{}", d.digest());
    let write_outer = |tar: &mut tar::Builder<BufWriter<File>>| -> io::Result<()> {
        append_dir(tar, "blobs/")?;
        append_dir(tar, "blobs/sha256/")?;
        append_bytes(tar, "oci-layout", &layout_json)?;
        let mut layer = layer_tmp.reopen()?;
        layer.rewind()?;
        let mut header = outer_header(tar::EntryType::Regular, layer_size);
        tar.append_data(
            &mut header,
            blob_path(&layer_digest),
            layer.take(layer_size),
        )?;
        append_bytes(tar, &blob_path(&config_digest), &config_json)?;
        append_bytes(tar, &blob_path(&manifest_digest), &manifest_json)?;
        append_bytes(tar, "index.json", &index_json)?;
        Ok(())
    };
    write_outer(&mut tar).map_err(io_err("writing", out_tmp.path()))?;
    let buf = tar
        .into_inner()
        .map_err(io_err("writing", out_tmp.path()))?;
    finish_file(buf).map_err(io_err("writing", out_tmp.path()))?;
    out_tmp
        .persist(dest)
        .map_err(|e| io_err("renaming a finished archive to", dest)(e.error))?;
    drop(layer_tmp);

    Ok(ArchiveInfo {
        path: dest.to_owned(),
        reference: spec.reference.clone(),
        manifest_digest: Digest::from(manifest_digest).to_string(),
        config_digest: Digest::from(config_digest).to_string(),
        layer_digest: Digest::from(layer_digest).to_string(),
        diff_id: Digest::from(diff_id).to_string(),
    })
}

/// Flushes a buffered file and syncs nothing more: the archive is read back
/// by a local process right away, durability across crashes is not needed.
fn finish_file(buf: BufWriter<File>) -> io::Result<()> {
    buf.into_inner().map_err(|e| e.into_error())?;
    Ok(())
}

fn outer_header(kind: tar::EntryType, size: u64) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(kind);
    h.set_size(size);
    h.set_mode(if kind == tar::EntryType::Directory {
        0o755
    } else {
        0o644
    });
    h.set_mtime(0);
    h.set_uid(0);
    h.set_gid(0);
    h
}

fn append_dir<W: Write>(tar: &mut tar::Builder<W>, path: &str) -> io::Result<()> {
    let mut h = outer_header(tar::EntryType::Directory, 0);
    tar.append_data(&mut h, path, io::empty())
}

fn append_bytes<W: Write>(tar: &mut tar::Builder<W>, path: &str, bytes: &[u8]) -> io::Result<()> {
    let mut h = outer_header(tar::EntryType::Regular, bytes.len() as u64);
    tar.append_data(&mut h, path, bytes)
}

#[cfg(test)]
mod tests;
