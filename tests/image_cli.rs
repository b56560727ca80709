//! `dra-e2e image`, run as the built binary: the archive it writes from a
//! static program names the reference where containerd's import reads it
//! and holds the program as the entrypoint; a missing program, a
//! dynamically linked one, a script and bad references are refused with a
//! message saying which, and nothing is written.
use crate::common;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

fn image(args: &[&std::ffi::OsStr]) -> (i32, String, String) {
    let out = Command::new(common::bin())
        .arg("image")
        .args(args)
        .output()
        .expect("running dra-e2e image");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The smallest static x86-64 Linux program: one loadable segment, no
/// `PT_INTERP`, code `exit(0)`. Built here so the test needs no static
/// binary installed (busybox-static comes only with real-node setup).
fn static_program(dir: &Path) -> PathBuf {
    const BASE: u64 = 0x40_0000;
    let code: &[u8] = &[
        0xb8, 0x3c, 0, 0, 0, // mov eax, 60 (exit)
        0x31, 0xff, // xor edi, edi
        0x0f, 0x05, // syscall
    ];
    let size = (64 + 56 + code.len()) as u64;
    let mut elf = Vec::new();
    elf.extend_from_slice(b"\x7fELF\x02\x01\x01\0");
    elf.extend_from_slice(&[0; 8]);
    elf.extend_from_slice(&2u16.to_le_bytes()); // ET_EXEC
    elf.extend_from_slice(&0x3eu16.to_le_bytes()); // x86-64
    elf.extend_from_slice(&1u32.to_le_bytes());
    elf.extend_from_slice(&(BASE + 64 + 56).to_le_bytes()); // entry
    elf.extend_from_slice(&64u64.to_le_bytes()); // program headers
    elf.extend_from_slice(&0u64.to_le_bytes()); // no section headers
    elf.extend_from_slice(&0u32.to_le_bytes());
    for v in [64u16, 56, 1, 64, 0, 0] {
        elf.extend_from_slice(&v.to_le_bytes());
    }
    elf.extend_from_slice(&1u32.to_le_bytes()); // PT_LOAD
    elf.extend_from_slice(&5u32.to_le_bytes()); // R + X
    for v in [0, BASE, BASE, size, size, 0x1000] {
        elf.extend_from_slice(&v.to_le_bytes());
    }
    elf.extend_from_slice(code);
    let path = dir.join("tiny-driver");
    std::fs::write(&path, elf).unwrap();
    path
}

/// Every file of a tar, by path.
fn tar_files(bytes: &[u8]) -> BTreeMap<String, (u32, Vec<u8>)> {
    let mut files = BTreeMap::new();
    for entry in tar::Archive::new(bytes).entries().unwrap() {
        let mut entry = entry.unwrap();
        let path = entry.path().unwrap().display().to_string();
        let mode = entry.header().mode().unwrap();
        let mut data = Vec::new();
        entry.read_to_end(&mut data).unwrap();
        files.insert(path, (mode, data));
    }
    files
}

fn blob<'a>(
    outer: &'a BTreeMap<String, (u32, Vec<u8>)>,
    descriptor: &serde_json::Value,
) -> &'a [u8] {
    let digest = descriptor["digest"].as_str().unwrap();
    let hex = digest.strip_prefix("sha256:").unwrap();
    &outer[&format!("blobs/sha256/{hex}")].1
}

/// The archive's only image: its manifest and its config.
fn manifest_and_config(
    outer: &BTreeMap<String, (u32, Vec<u8>)>,
) -> (serde_json::Value, serde_json::Value) {
    let index: serde_json::Value = serde_json::from_slice(&outer["index.json"].1).unwrap();
    let manifest: serde_json::Value =
        serde_json::from_slice(blob(outer, &index["manifests"][0])).unwrap();
    let config = serde_json::from_slice(blob(outer, &manifest["config"])).unwrap();
    (manifest, config)
}

#[test]
fn an_archive_of_a_static_program_names_its_reference_and_runs_it() {
    let tmp = tempfile::tempdir().unwrap();
    let program = static_program(tmp.path());
    let out = tmp.path().join("sub/dir/driver.oci.tar");
    let reference = "localhost/example/tiny-driver:v1";
    let (code, stdout, stderr) = image(&[
        "--binary".as_ref(),
        program.as_os_str(),
        "--reference".as_ref(),
        reference.as_ref(),
        "--out".as_ref(),
        out.as_os_str(),
        "--env".as_ref(),
        "GREETING=hello".as_ref(),
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains(&format!("wrote {}: image {reference}", out.display())),
        "{stdout}"
    );

    // Readable by others, to be handed on.
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(&out).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o644);

    let outer = tar_files(&std::fs::read(&out).unwrap());
    let index: serde_json::Value = serde_json::from_slice(&outer["index.json"].1).unwrap();
    let manifests = index["manifests"].as_array().unwrap();
    assert_eq!(manifests.len(), 1, "{index}");
    assert_eq!(
        manifests[0]["annotations"]["io.containerd.image.name"],
        reference
    );
    assert_eq!(
        manifests[0]["annotations"]["org.opencontainers.image.ref.name"],
        "v1"
    );

    let manifest: serde_json::Value = serde_json::from_slice(blob(&outer, &manifests[0])).unwrap();
    let config: serde_json::Value =
        serde_json::from_slice(blob(&outer, &manifest["config"])).unwrap();
    assert_eq!(
        config["config"]["Entrypoint"],
        serde_json::json!(["/tiny-driver"])
    );
    let env = config["config"]["Env"].as_array().unwrap();
    assert!(env.iter().any(|e| e == "GREETING=hello"), "{env:?}");
    assert!(
        env.iter().all(|e| !e.as_str().unwrap().starts_with("LD_")),
        "{env:?}"
    );

    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1);
    let layer = tar_files(blob(&outer, &layers[0]));
    let names: Vec<&str> = layer.keys().map(String::as_str).collect();
    // The program and /tmp, nothing else.
    assert_eq!(names, ["tiny-driver", "tmp/"], "{names:?}");
    assert_eq!(layer["tiny-driver"].0, 0o755);
    assert_eq!(layer["tiny-driver"].1, std::fs::read(&program).unwrap());
    assert_eq!(layer["tmp/"].0, 0o1777);
}

#[test]
fn path_and_entrypoint_can_be_chosen() {
    let tmp = tempfile::tempdir().unwrap();
    let program = static_program(tmp.path());
    let out = tmp.path().join("a.tar");
    let (code, stdout, stderr) = image(&[
        "--binary".as_ref(),
        program.as_os_str(),
        "--reference".as_ref(),
        "registry.example.com:5000/team/driver:1.0".as_ref(),
        "--out".as_ref(),
        out.as_os_str(),
        "--path".as_ref(),
        "/usr/bin/driver".as_ref(),
        "--entrypoint".as_ref(),
        "/usr/bin/driver".as_ref(),
        "--entrypoint".as_ref(),
        "--v=5".as_ref(),
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let outer = tar_files(&std::fs::read(&out).unwrap());
    let (manifest, config) = manifest_and_config(&outer);
    assert_eq!(
        config["config"]["Entrypoint"],
        serde_json::json!(["/usr/bin/driver", "--v=5"])
    );
    let layer = tar_files(blob(&outer, &manifest["layers"][0]));
    assert!(layer.contains_key("usr/bin/driver"), "{:?}", layer.keys());
}

/// Runs `dra-e2e image` expecting exit status 1 and nothing written;
/// returns stderr.
fn refused(binary: &Path, reference: &str, extra: &[&str]) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out.tar");
    let mut args: Vec<&std::ffi::OsStr> = vec![
        "--binary".as_ref(),
        binary.as_os_str(),
        "--reference".as_ref(),
        reference.as_ref(),
        "--out".as_ref(),
        out.as_os_str(),
    ];
    args.extend(extra.iter().map(std::ffi::OsStr::new));
    let (code, stdout, stderr) = image(&args);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(!out.exists(), "an archive was written: {stderr}");
    assert_eq!(
        std::fs::read_dir(tmp.path()).unwrap().count(),
        0,
        "temporary files were left: {stderr}"
    );
    stderr
}

#[test]
fn a_missing_program_is_named() {
    let err = refused(Path::new("/nonexistent/driver"), "localhost/d:1", &[]);
    assert!(
        err.starts_with("error: --binary /nonexistent/driver: No such file or directory"),
        "{err}"
    );
}

#[test]
fn a_directory_or_a_script_is_not_a_program() {
    let tmp = tempfile::tempdir().unwrap();
    let err = refused(tmp.path(), "localhost/d:1", &[]);
    assert!(err.contains("not a regular file"), "{err}");

    let script = tmp.path().join("driver.sh");
    std::fs::write(&script, "#!/bin/sh\nexec sleep 1\n").unwrap();
    let err = refused(&script, "localhost/d:1", &[]);
    assert!(
        err.contains(&format!(
            "{}: cannot read its ELF headers",
            script.display()
        )),
        "{err}"
    );
}

#[test]
fn a_dynamically_linked_program_needs_its_libraries() {
    // coreutils' `true`: small, and linked against libc dynamically.
    let program = Path::new("/bin/true");
    let err = refused(program, "localhost/d:1", &[]);
    assert!(err.contains("dynamically linked (its loader is /"), "{err}");
    assert!(err.contains("CGO_ENABLED=0"), "{err}");
    assert!(err.contains("--with-shared-libs"), "{err}");

    // With them, the layer has the loader and libc, and LD_LIBRARY_PATH.
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("dyn.tar");
    let (code, stdout, stderr) = image(&[
        "--binary".as_ref(),
        program.as_os_str(),
        "--reference".as_ref(),
        "localhost/d:1".as_ref(),
        "--out".as_ref(),
        out.as_os_str(),
        "--with-shared-libs".as_ref(),
        "--gzip".as_ref(),
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let outer = tar_files(&std::fs::read(&out).unwrap());
    let (manifest, _) = manifest_and_config(&outer);
    let layer = &manifest["layers"][0];
    assert_eq!(
        layer["mediaType"],
        "application/vnd.oci.image.layer.v1.tar+gzip"
    );
    let mut tar = Vec::new();
    flate2::read::GzDecoder::new(blob(&outer, layer))
        .read_to_end(&mut tar)
        .unwrap();
    let files = tar_files(&tar);
    assert!(files.contains_key("true"), "{:?}", files.keys());
    assert!(
        files
            .keys()
            .any(|k| k.rsplit('/').next().unwrap().starts_with("libc.so")),
        "{:?}",
        files.keys()
    );
    let config: serde_json::Value =
        serde_json::from_slice(blob(&outer, &manifest["config"])).unwrap();
    let env = config["config"]["Env"].as_array().unwrap();
    assert!(
        env.iter()
            .any(|e| e.as_str().unwrap().starts_with("LD_LIBRARY_PATH=/")),
        "{env:?}"
    );
}

#[test]
fn bad_references_are_refused_with_the_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let program = static_program(tmp.path());
    for (reference, reason) in [
        ("localhost/driver", "needs a tag"),
        ("localhost/driver@sha256:0123", "digest references"),
        ("", "empty"),
        ("driver:v1", "no registry domain"),
        (
            "example/driver:v1",
            "kubelet would look for docker.io/example/driver",
        ),
        ("localhost/Driver:v1", "path component `Driver`"),
        ("localhost/driver-:v1", "path component `driver-`"),
        ("localhost//driver:v1", "path component ``"),
        ("localhost/driver:-v1", "tag `-v1`"),
        (
            "local_host.io/driver:v1",
            "`local_host.io` is not a registry domain",
        ),
        (
            "localhost:port/driver:v1",
            "`localhost:port` is not a registry domain",
        ),
    ] {
        let err = refused(&program, reference, &[]);
        assert!(
            err.starts_with(&format!("error: --reference {reference}: ")) && err.contains(reason),
            "{reference:?}: want {reason:?}, got {err}"
        );
    }
}

#[test]
fn bad_options_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let program = static_program(tmp.path());
    let err = refused(&program, "localhost/d:1", &["--path", "driver"]);
    assert!(
        err.contains("--path driver: must be an absolute path"),
        "{err}"
    );
    let err = refused(&program, "localhost/d:1", &["--env", "=1"]);
    assert!(err.contains("--env =1: write NAME=VALUE"), "{err}");

    // A missing required option is a usage error (exit status 2).
    let (code, _, stderr) = image(&["--binary".as_ref(), program.as_os_str()]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--reference"), "{stderr}");
}

/// `--with-busybox` adds Debian's busybox-static (which `make node`
/// installs, hence the feature) with its applet links, for images whose
/// pods run a shell: the node host pods of `--proxy-image`.
#[cfg(feature = "cluster-tests")]
#[test]
fn with_busybox_the_image_has_a_shell_beside_the_program() {
    let tmp = tempfile::tempdir().unwrap();
    let program = static_program(tmp.path());
    let out = tmp.path().join("a.tar");
    let (code, stdout, stderr) = image(&[
        "--binary".as_ref(),
        program.as_os_str(),
        "--reference".as_ref(),
        "registry.k8s.io/sig-storage/hostpathplugin:v1.17.1".as_ref(),
        "--out".as_ref(),
        out.as_os_str(),
        "--path".as_ref(),
        "/hostpathplugin".as_ref(),
        "--with-busybox".as_ref(),
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let outer = tar_files(&std::fs::read(&out).unwrap());
    let (manifest, config) = manifest_and_config(&outer);
    assert_eq!(
        config["config"]["Entrypoint"],
        serde_json::json!(["/hostpathplugin"])
    );
    let layer_bytes = blob(&outer, &manifest["layers"][0]);
    let layer = tar_files(layer_bytes);
    assert_eq!(layer["hostpathplugin"].1, std::fs::read(&program).unwrap());
    assert_eq!(
        layer["bin/busybox"].1,
        std::fs::read("/bin/busybox").unwrap()
    );
    assert_eq!(layer["tmp/"].0, 0o1777);
    // The applets are links to busybox: sh and what the node host pods'
    // commands use.
    let links: BTreeMap<String, String> = tar::Archive::new(layer_bytes)
        .entries()
        .unwrap()
        .filter_map(|e| {
            let e = e.unwrap();
            let link = e.link_name().unwrap()?.display().to_string();
            Some((e.path().unwrap().display().to_string(), link))
        })
        .collect();
    for applet in ["sh", "mkdir", "sleep"] {
        assert_eq!(
            links.get(&format!("bin/{applet}")).map(String::as_str),
            Some("busybox"),
            "{applet}"
        );
    }

    // The program cannot take an applet's place.
    let why = refused(
        &program,
        "localhost/x:1",
        &["--with-busybox", "--path", "/bin/sh"],
    );
    assert!(why.contains("--path /bin/sh"), "{why}");
}
