use std::collections::BTreeMap;
use std::io::Read;

use oci_spec::image::{ImageConfiguration, ImageIndex, ImageManifest};

use super::*;

/// The outer archive's regular files by path.
fn read_outer(path: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut ar = tar::Archive::new(File::open(path).unwrap());
    let mut files = BTreeMap::new();
    for e in ar.entries().unwrap() {
        let mut e = e.unwrap();
        if e.header().entry_type() != tar::EntryType::Regular {
            continue;
        }
        let name = e.path().unwrap().to_string_lossy().into_owned();
        let mut buf = Vec::new();
        e.read_to_end(&mut buf).unwrap();
        files.insert(name, buf);
    }
    files
}

#[derive(Debug, PartialEq)]
struct LayerEntry {
    kind: tar::EntryType,
    mode: u32,
    uid: u64,
    link: Option<String>,
    content: Vec<u8>,
}

fn read_layer(bytes: &[u8]) -> BTreeMap<String, LayerEntry> {
    let mut ar = tar::Archive::new(bytes);
    let mut out = BTreeMap::new();
    for e in ar.entries().unwrap() {
        let mut e = e.unwrap();
        let name = e.path().unwrap().to_string_lossy().into_owned();
        let h = e.header().clone();
        let mut content = Vec::new();
        e.read_to_end(&mut content).unwrap();
        out.insert(
            name.trim_end_matches('/').to_owned(),
            LayerEntry {
                kind: h.entry_type(),
                mode: h.mode().unwrap(),
                uid: h.uid().unwrap(),
                link: e
                    .link_name()
                    .unwrap()
                    .map(|l| l.to_string_lossy().into_owned()),
                content,
            },
        );
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(bytes);
    format!("sha256:{}", sha256_of(h).digest())
}

fn blob<'a>(files: &'a BTreeMap<String, Vec<u8>>, digest: &str) -> &'a [u8] {
    let hex = digest.strip_prefix("sha256:").unwrap();
    files
        .get(&format!("blobs/sha256/{hex}"))
        .unwrap_or_else(|| panic!("no blob {digest} in {:?}", files.keys()))
}

/// A spec using every kind of entry; the directory holds its host file.
fn sample(compression: LayerCompression) -> (ImageSpec, tempfile::TempDir) {
    let src_dir = tempfile::tempdir().unwrap();
    let tmp_src = src_dir.path().join("host.txt");
    std::fs::write(&tmp_src, b"from the host").unwrap();
    let mut spec = ImageSpec::new("example.com:5000/team/tool:v1.2");
    spec.entrypoint = vec!["/bin/tool".into()];
    spec.cmd = vec!["--flag".into()];
    spec.working_dir = Some("/work".into());
    spec.compression = compression;
    spec.entries = vec![
        Entry::file("/bin/tool", 0o755, b"#!/bin/sh\necho hi\n".to_vec()),
        Entry::symlink("/bin/alias", "tool"),
        Entry::dir("/tmp", 0o1777),
        Entry::host_file("/usr/share/data/host.txt", 0o600, &tmp_src),
        Entry::symlink("/lib64/ld.so", "/lib/x86_64-linux-gnu/ld.so"),
    ];
    (spec, src_dir)
}

fn check_archive(compression: LayerCompression) {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("img.tar");
    let (spec, _src) = sample(compression);
    let info = write_archive(&spec, &dest).unwrap();
    assert_eq!(info.path, dest);
    assert_eq!(info.reference, "example.com:5000/team/tool:v1.2");
    // Only the archive is left behind.
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(left.len(), 1, "{left:?}");

    let files = read_outer(&dest);
    let layout: serde_json::Value = serde_json::from_slice(&files["oci-layout"]).unwrap();
    assert_eq!(layout["imageLayoutVersion"], "1.0.0");

    let index: ImageIndex = serde_json::from_slice(&files["index.json"]).unwrap();
    assert_eq!(index.schema_version(), 2);
    assert_eq!(index.manifests().len(), 1);
    let desc = &index.manifests()[0];
    assert_eq!(desc.media_type(), &MediaType::ImageManifest);
    let ann = desc.annotations().as_ref().unwrap();
    assert_eq!(
        ann[ANNOTATION_CONTAINERD_IMAGE_NAME],
        "example.com:5000/team/tool:v1.2"
    );
    assert_eq!(ann[ANNOTATION_REF_NAME], "v1.2");
    assert_eq!(
        desc.platform().as_ref().unwrap().architecture(),
        &Arch::default()
    );

    // Every descriptor's digest and size match the blob it points to.
    assert_eq!(desc.digest().to_string(), info.manifest_digest);
    let manifest_bytes = blob(&files, &info.manifest_digest);
    assert_eq!(hex(manifest_bytes), info.manifest_digest);
    assert_eq!(desc.size(), manifest_bytes.len() as u64);
    let manifest: ImageManifest = serde_json::from_slice(manifest_bytes).unwrap();
    assert_eq!(manifest.config().digest().to_string(), info.config_digest);
    let config_bytes = blob(&files, &info.config_digest);
    assert_eq!(hex(config_bytes), info.config_digest);
    assert_eq!(manifest.config().size(), config_bytes.len() as u64);
    assert_eq!(manifest.layers().len(), 1);
    let layer_desc = &manifest.layers()[0];
    assert_eq!(layer_desc.digest().to_string(), info.layer_digest);
    let layer_bytes = blob(&files, &info.layer_digest);
    assert_eq!(hex(layer_bytes), info.layer_digest);
    assert_eq!(layer_desc.size(), layer_bytes.len() as u64);
    // Nothing but the three blobs and the two JSON files.
    assert_eq!(files.len(), 5, "{:?}", files.keys());

    let tar_bytes = match compression {
        LayerCompression::None => {
            assert_eq!(layer_desc.media_type(), &MediaType::ImageLayer);
            assert_eq!(info.diff_id, info.layer_digest);
            layer_bytes.to_vec()
        }
        LayerCompression::Gzip => {
            assert_eq!(layer_desc.media_type(), &MediaType::ImageLayerGzip);
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(layer_bytes)
                .read_to_end(&mut out)
                .unwrap();
            assert_ne!(info.diff_id, info.layer_digest);
            out
        }
    };
    assert_eq!(hex(&tar_bytes), info.diff_id);

    let config: ImageConfiguration = serde_json::from_slice(config_bytes).unwrap();
    assert_eq!(config.rootfs().diff_ids(), &vec![info.diff_id.clone()]);
    assert_eq!(config.os(), &Os::Linux);
    let process = config.config().as_ref().unwrap();
    assert_eq!(
        process.entrypoint().as_deref(),
        Some(&["/bin/tool".to_owned()][..])
    );
    assert_eq!(process.cmd().as_deref(), Some(&["--flag".to_owned()][..]));
    assert_eq!(process.working_dir().as_deref(), Some("/work"));
    assert_eq!(
        process.env().as_deref(),
        Some(&[DEFAULT_PATH.to_owned()][..])
    );

    let layer = read_layer(&tar_bytes);
    let names: Vec<&str> = layer.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "bin",
            "bin/alias",
            "bin/tool",
            "lib64",
            "lib64/ld.so",
            "tmp",
            "usr",
            "usr/share",
            "usr/share/data",
            "usr/share/data/host.txt"
        ]
    );
    assert!(layer.values().all(|e| e.uid == 0));
    let tool = &layer["bin/tool"];
    assert_eq!(
        (tool.kind, tool.mode, tool.content.as_slice()),
        (
            tar::EntryType::Regular,
            0o755,
            b"#!/bin/sh\necho hi\n".as_slice()
        )
    );
    let alias = &layer["bin/alias"];
    assert_eq!(
        (alias.kind, alias.link.as_deref()),
        (tar::EntryType::Symlink, Some("tool"))
    );
    assert_eq!(
        layer["lib64/ld.so"].link.as_deref(),
        Some("/lib/x86_64-linux-gnu/ld.so")
    );
    let tmp = &layer["tmp"];
    assert_eq!((tmp.kind, tmp.mode), (tar::EntryType::Directory, 0o1777));
    let implied = &layer["usr/share"];
    assert_eq!(
        (implied.kind, implied.mode),
        (tar::EntryType::Directory, 0o755)
    );
    let host = &layer["usr/share/data/host.txt"];
    assert_eq!(
        (host.mode, host.content.as_slice()),
        (0o600, b"from the host".as_slice())
    );
}

#[test]
fn uncompressed_archive_layout_digests_and_layer() {
    check_archive(LayerCompression::None);
}

#[test]
fn gzip_archive_layout_digests_and_layer() {
    check_archive(LayerCompression::Gzip);
}

#[test]
fn same_inputs_give_the_same_image_digest() {
    let dir = tempfile::tempdir().unwrap();
    let (spec, _src) = sample(LayerCompression::None);
    let a = write_archive(&spec, &dir.path().join("a.tar")).unwrap();
    let b = write_archive(&spec, &dir.path().join("b.tar")).unwrap();
    assert_eq!(a.manifest_digest, b.manifest_digest);
}

#[test]
fn other_references_name_the_same_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let (mut spec, _src) = sample(LayerCompression::None);
    spec.other_references = vec!["registry.k8s.io/sig-storage/hostpathplugin:v1.17.1".into()];
    let info = write_archive(&spec, &dir.path().join("a.tar")).unwrap();
    let files = read_outer(&info.path);
    let index: ImageIndex = serde_json::from_slice(&files["index.json"]).unwrap();
    let named: Vec<(String, String, String)> = index
        .manifests()
        .iter()
        .map(|d| {
            let ann = d.annotations().as_ref().unwrap();
            (
                ann[ANNOTATION_CONTAINERD_IMAGE_NAME].clone(),
                ann[ANNOTATION_REF_NAME].clone(),
                d.digest().to_string(),
            )
        })
        .collect();
    assert_eq!(
        named,
        [
            (
                "example.com:5000/team/tool:v1.2".to_owned(),
                "v1.2".to_owned(),
                info.manifest_digest.clone()
            ),
            (
                "registry.k8s.io/sig-storage/hostpathplugin:v1.17.1".to_owned(),
                "v1.17.1".to_owned(),
                info.manifest_digest.clone()
            ),
        ]
    );

    // A bad extra reference is refused like a bad first one, naming it.
    spec.other_references = vec!["no-tag".into()];
    let err = write_archive(&spec, &dir.path().join("b.tar")).unwrap_err();
    assert!(err.to_string().contains("no-tag"), "{err}");
    assert!(!dir.path().join("b.tar").exists());
}

#[test]
fn references_need_a_tag() {
    assert_eq!(reference_tag("registry.k8s.io/pause:3.10").unwrap(), "3.10");
    assert_eq!(reference_tag("localhost:5000/x:dev").unwrap(), "dev");
    for bad in [
        "",
        "registry.k8s.io/pause",
        "localhost:5000/x",
        "x@sha256:0123",
        "a b:c",
        "x:",
    ] {
        let err = reference_tag(bad).unwrap_err();
        assert!(matches!(err, ImageError::Reference { .. }), "{bad}: {err}");
    }
}

fn layer_error(entries: Vec<Entry>) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = ImageSpec::new("x.example/y:z");
    spec.entries = entries;
    let err = write_archive(&spec, &dir.path().join("a.tar")).unwrap_err();
    assert!(matches!(err, ImageError::LayerPath { .. }), "{err}");
    // No archive and no temporary file is left behind.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    err.to_string()
}

#[test]
fn bad_layer_paths_are_refused_with_the_image_and_path() {
    let msg = layer_error(vec![Entry::file("bin/x", 0o644, "")]);
    assert!(
        msg.contains("x.example/y:z") && msg.contains("bin/x"),
        "{msg}"
    );
    layer_error(vec![Entry::file("/a/../b", 0o644, "")]);
    layer_error(vec![Entry::file("/a//b", 0o644, "")]);
    layer_error(vec![Entry::dir("/", 0o755)]);
    let msg = layer_error(vec![
        Entry::file("/a", 0o644, ""),
        Entry::symlink("/a", "b"),
    ]);
    assert!(msg.contains("declared twice"), "{msg}");
    let msg = layer_error(vec![
        Entry::file("/a", 0o644, ""),
        Entry::file("/a/b", 0o644, ""),
    ]);
    assert!(msg.contains("not a directory"), "{msg}");
    let msg = layer_error(vec![
        Entry::file("/a/b", 0o644, ""),
        Entry::symlink("/a", "c"),
    ]);
    assert!(msg.contains("below it"), "{msg}");
}

#[test]
fn an_implied_directory_may_be_given_a_mode_later() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = ImageSpec::new("x.example/y:z");
    spec.entries = vec![Entry::file("/d/f", 0o644, "x"), Entry::dir("/d", 0o700)];
    let info = write_archive(&spec, &dir.path().join("a.tar")).unwrap();
    let files = read_outer(&info.path);
    let layer = read_layer(blob(&files, &info.layer_digest));
    assert_eq!(layer["d"].mode, 0o700);
}

#[test]
fn a_missing_host_file_is_named_in_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = ImageSpec::new("x.example/y:z");
    spec.entries = vec![Entry::host_file("/f", 0o644, "/nonexistent/file")];
    let msg = write_archive(&spec, &dir.path().join("a.tar"))
        .unwrap_err()
        .to_string();
    assert!(msg.contains("x.example/y:z"), "{msg}");
    assert!(msg.contains("/nonexistent/file"), "{msg}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// Debian's busybox-static, which `make node` installs for real nodes: the
/// tests that take it are left to `make test` (feature cluster-tests).
#[cfg(feature = "cluster-tests")]
fn host_busybox() -> &'static Path {
    let p = Path::new("/bin/busybox");
    assert!(
        p.exists(),
        "real-node images need /bin/busybox: apt-get install busybox-static"
    );
    p
}

#[cfg(feature = "cluster-tests")]
#[test]
fn busybox_image_has_every_applet_as_a_link() {
    let spec = builtin::busybox(host_busybox()).unwrap();
    assert_eq!(spec.reference, BUSYBOX_IMAGE);
    assert_eq!(spec.other_references, [builtin::UPSTREAM_E2E_BUSYBOX_IMAGE]);
    assert_eq!(spec.cmd, ["sh"]);
    let dir = tempfile::tempdir().unwrap();
    let info = write_archive(&spec, &dir.path().join("bb.tar")).unwrap();
    let files = read_outer(&info.path);
    let layer = read_layer(blob(&files, &info.layer_digest));
    let bb = &layer["bin/busybox"];
    assert_eq!((bb.kind, bb.mode), (tar::EntryType::Regular, 0o755));
    assert_eq!(bb.content, std::fs::read(host_busybox()).unwrap());
    for applet in ["sh", "base64", "mv", "rm", "sleep", "cat", "env", "["] {
        let e = &layer[&format!("bin/{applet}")];
        assert_eq!(
            (e.kind, e.link.as_deref()),
            (tar::EntryType::Symlink, Some("busybox")),
            "{applet}"
        );
    }
    assert!(!layer.contains_key("bin/busybox/busybox"));
}

#[cfg(feature = "cluster-tests")]
#[test]
fn pause_image_runs_its_script_under_busybox() {
    let spec = builtin::pause(host_busybox());
    assert_eq!(spec.reference, PAUSE_IMAGE);
    assert_eq!(spec.entrypoint, ["/pause"]);
    let script = spec.entries.iter().find(|e| e.path() == "/pause").unwrap();
    assert!(matches!(script, Entry::File { mode: 0o755, .. }));
    assert!(spec.entries.contains(&Entry::symlink("/bin/sh", "busybox")));
    assert!(
        spec.entries
            .contains(&Entry::symlink("/bin/sleep", "busybox"))
    );
}

#[cfg(feature = "cluster-tests")]
#[test]
fn pause_script_exits_zero_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("pause");
    std::fs::write(&script, builtin::PAUSE_SCRIPT).unwrap();
    let mut child = std::process::Command::new(host_busybox())
        .arg("sh")
        .arg(&script)
        .spawn()
        .unwrap();
    // Give the shell time to install its trap; a signal before that would
    // kill it with the default action and the test would see it.
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(
        child.try_wait().unwrap().is_none(),
        "pause exited by itself"
    );
    dra_e2e_sys::kill(child.id(), dra_e2e_sys::Signal::Term).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{status}");
}

#[cfg(feature = "cluster-tests")]
#[test]
fn proxy_image_carries_the_program_and_its_libraries() {
    let exe = std::env::current_exe().unwrap();
    let spec = builtin::proxy("dra-e2e.local/proxy-agent:test", &exe, host_busybox()).unwrap();
    assert!(
        spec.entries
            .contains(&Entry::host_file(builtin::PROXY_PROGRAM_PATH, 0o755, &exe))
    );
    let libs = libs::shared_libraries(&exe).unwrap();
    assert!(!libs.is_empty());
    for lib in &libs {
        assert!(
            spec.entries.iter().any(
                |e| matches!(e, Entry::File { path, source: FileSource::Host(h), .. }
                    if Path::new(path) == lib && h == lib)
            ),
            "{lib:?} missing"
        );
    }
    let ld_path = spec
        .env
        .iter()
        .find_map(|e| e.strip_prefix("LD_LIBRARY_PATH="))
        .unwrap();
    for lib in &libs {
        let dir = lib.parent().unwrap().to_str().unwrap();
        assert!(
            ld_path.split(':').any(|d| d == dir),
            "{ld_path} lacks {dir}"
        );
    }
    assert!(
        spec.entries
            .contains(&Entry::symlink("/bin/base64", "busybox"))
    );
    // Upstream's DRA tests find it under hostpathplugin's name and path.
    assert_eq!(spec.other_references, [builtin::HOSTPATHPLUGIN_IMAGE]);
    let shim = spec
        .entries
        .iter()
        .find(|e| e.path() == builtin::HOSTPATHPLUGIN_PATH)
        .expect("a /hostpathplugin");
    let Entry::File {
        mode: 0o755,
        source: FileSource::Bytes(script),
        ..
    } = shim
    else {
        panic!("{shim:?}")
    };
    assert_eq!(
        String::from_utf8_lossy(script),
        builtin::hostpathplugin_shim(builtin::PROXY_PROGRAM_PATH)
    );
}

/// The shim hands hostpathplugin's own flags, as upstream's tests pass them,
/// to the agent, which listens where they say.
#[cfg(feature = "cluster-tests")]
#[test]
fn hostpathplugin_shim_runs_the_agent_with_upstreams_flags() {
    let dir = tempfile::tempdir().unwrap();
    let shim = dir.path().join("hostpathplugin");
    let agent = dir.path().join("agent");
    // A stand-in for the runner that prints its arguments.
    std::fs::write(&agent, "#!/bin/sh\necho \"$@\"\n").unwrap();
    std::fs::write(&shim, builtin::hostpathplugin_shim(agent.to_str().unwrap())).unwrap();
    for f in [&agent, &shim] {
        std::fs::set_permissions(f, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    let out = std::process::Command::new(host_busybox())
        .arg("sh")
        .arg(&shim)
        .args([
            "--v=5",
            "--endpoint=/p/dra.sock",
            "--proxy-endpoint=tcp://:9001",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "proxy-agent --v=5 --endpoint=/p/dra.sock --proxy-endpoint=tcp://:9001\n"
    );
}
