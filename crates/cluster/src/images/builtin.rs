//! The images a real node needs and cannot pull: the sandbox (pause) image,
//! the busybox image the scenarios' pods use, upstream's sample device
//! plugin, and the proxy image that carries `dra-e2e-agent` as the kubelet-plugin
//! proxy agent; each also under the name upstream's own `e2e.test` uses.
//!
//! All three are built from Debian's `busybox-static` (`/bin/busybox`), which
//! real nodes need anyway:
//!
//! * **pause** is a four-line `sh` script run by busybox rather than a
//!   compiled program. No static pause binary ships with the machine, and a
//!   tiny C program would need a C toolchain and static libc at run time, or
//!   a build step plus a way for the runner to find its output. The script
//!   behaves as the sandbox needs: it sleeps until SIGTERM or SIGINT and then
//!   exits 0 at once (a trapped signal interrupts `wait`), and as PID 1 it
//!   reaps orphans whenever its `wait` returns, as busybox `ash` waits for
//!   any child.
//! * **busybox** is busybox with a link per applet, default command `sh`.
//! * **proxy** is busybox plus a given program (normally `dra-e2e-agent`)
//!   and every shared library it loads, at the paths the host's dynamic
//!   loader found them, so `dra-e2e-agent proxy-agent …` runs inside. It also
//!   answers to [`HOSTPATHPLUGIN_IMAGE`] and has a `/hostpathplugin` that
//!   runs the agent: upstream's DRA tests (`e2e.test`) run
//!   `/hostpathplugin --v=5 --endpoint=… --proxy-endpoint=tcp://:N` in
//!   pods of that image, and the agent speaks the same protocol. The real
//!   image cannot be pulled here, nor built (its Go module is not on the
//!   module proxy); an archive of it given with `--image-archive` is
//!   imported later and takes the name over.
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use super::{Entry, ImageError, ImageSpec, libs};

/// The sandbox image pods get (`objects::PAUSE_IMAGE` names it too).
pub const PAUSE_IMAGE: &str = "registry.k8s.io/pause:3.10";
/// The busybox image upstream's DRA tests run their containers from.
pub const SAMPLE_DEVICE_PLUGIN_IMAGE: &str =
    "registry.k8s.io/e2e-test-images/sample-device-plugin:1.7";
pub const BUSYBOX_IMAGE: &str = "registry.k8s.io/e2e-test-images/busybox:1.37.0-1";
/// The tags upstream's own e2e tests (`e2e.test` of Kubernetes v1.37) name
/// the busybox and sample device plugin images by
/// (`test/utils/image/manifest.go`, the sample device plugin's manifests).
/// The images written here answer to them too, so that `e2e.test` runs on
/// real nodes with nothing to pull: the busybox is Debian's either way, and
/// the sample device plugin is built from v1.37's source, which is what
/// 1.8.0 is.
pub const UPSTREAM_E2E_BUSYBOX_IMAGE: &str = "registry.k8s.io/e2e-test-images/busybox:1.37.0-2";
pub const UPSTREAM_E2E_SAMPLE_DEVICE_PLUGIN_IMAGE: &str =
    "registry.k8s.io/e2e-test-images/sample-device-plugin:1.8.0";
/// The image upstream's DRA tests run their kubelet-plugin proxy pods from:
/// the newest hostpathplugin of upstream's storage manifests (v1.37).
pub const HOSTPATHPLUGIN_IMAGE: &str = "registry.k8s.io/sig-storage/hostpathplugin:v1.17.1";
/// hostpathplugin's program path, as its image has it.
pub const HOSTPATHPLUGIN_PATH: &str = "/hostpathplugin";
/// Where the proxy image carries the program, on `PATH`.
pub const PROXY_PROGRAM_PATH: &str = "/usr/local/bin/dra-e2e-agent";
/// Where the runner image carries the runner, on `PATH`.
pub const RUNNER_PROGRAM_PATH: &str = "/usr/local/bin/dra-e2e";
/// Where busybox sits in every image built here.
pub const BUSYBOX_PATH: &str = "/bin/busybox";

/// The pause program: waits for SIGTERM or SIGINT and exits 0. The sleep
/// runs in the background so the signal is handled as soon as it arrives.
pub const PAUSE_SCRIPT: &str = "#!/bin/sh\n\
# Sandbox holder: wait for SIGTERM or SIGINT, then exit 0.\n\
trap 'kill $s 2>/dev/null; exit 0' TERM INT\n\
while :; do sleep 2147483647 & s=$!; wait $s; done\n";

/// The applet names `busybox --list` prints, `busybox` itself excluded.
pub fn busybox_applets(busybox: &Path) -> Result<Vec<String>, ImageError> {
    let command = format!("{} --list", busybox.display());
    let listed = super::stdout_of(Command::new(busybox).arg("--list"), command.clone())?;
    let applets: Vec<String> = listed
        .lines()
        .map(str::trim)
        .filter(|a| !a.is_empty() && *a != "busybox" && !a.contains('/'))
        .map(str::to_owned)
        .collect();
    if !applets.iter().any(|a| a == "sh") {
        return Err(ImageError::Command {
            command,
            detail: "the applet list has no `sh`".into(),
        });
    }
    Ok(applets)
}

/// `/bin/busybox` from `busybox` plus `/bin/<applet>` links for `applets`,
/// and a world-writable `/tmp`.
pub fn busybox_entries(busybox: &Path, applets: &[String]) -> Vec<Entry> {
    let mut entries = vec![
        Entry::host_file(BUSYBOX_PATH, 0o755, busybox),
        Entry::dir("/tmp", 0o1777),
    ];
    entries.extend(
        applets
            .iter()
            .map(|a| Entry::symlink(format!("/bin/{a}"), "busybox")),
    );
    entries
}

/// The pause image: busybox with only `sh` and `sleep`, and `/pause`.
pub fn pause(busybox: &Path) -> ImageSpec {
    let mut spec = ImageSpec::new(PAUSE_IMAGE);
    spec.entries = busybox_entries(busybox, &["sh".to_owned(), "sleep".to_owned()]);
    spec.entries
        .push(Entry::file("/pause", 0o755, PAUSE_SCRIPT.as_bytes()));
    spec.entrypoint = vec!["/pause".into()];
    spec
}

/// Upstream's sample device plugin image (`registry.k8s.io/e2e-test-images/
/// sample-device-plugin`): its static Go program as entrypoint, as upstream's
/// Dockerfile has it.
pub fn sample_device_plugin(program: &Path) -> ImageSpec {
    let mut spec = ImageSpec::new(SAMPLE_DEVICE_PLUGIN_IMAGE);
    spec.entries = vec![
        Entry::host_file("/sampledeviceplugin", 0o755, program),
        Entry::dir("/tmp", 0o1777),
        Entry::dir("/var/run/cdi", 0o755),
    ];
    spec.entrypoint = vec!["/sampledeviceplugin".into(), "-alsologtostderr".into()];
    spec.other_references = vec![UPSTREAM_E2E_SAMPLE_DEVICE_PLUGIN_IMAGE.to_owned()];
    spec
}

/// The busybox image: every applet, default command `sh`.
pub fn busybox(busybox: &Path) -> Result<ImageSpec, ImageError> {
    let applets = busybox_applets(busybox)?;
    let mut spec = ImageSpec::new(BUSYBOX_IMAGE);
    spec.entries = busybox_entries(busybox, &applets);
    spec.cmd = vec!["sh".into()];
    spec.other_references = vec![UPSTREAM_E2E_BUSYBOX_IMAGE.to_owned()];
    Ok(spec)
}

/// The proxy image `reference`: busybox (for `sh`, `sleep`, `base64`, `mv`,
/// `rm`), `program` as [`PROXY_PROGRAM_PATH`] and the shared libraries it
/// loads. `LD_LIBRARY_PATH` names their directories so the loader finds them
/// without the `ld.so.cache` the image lacks.
pub fn proxy(reference: &str, program: &Path, busybox: &Path) -> Result<ImageSpec, ImageError> {
    let mut spec = with_program(reference, program, PROXY_PROGRAM_PATH, busybox)?;
    spec.entries.push(Entry::file(
        HOSTPATHPLUGIN_PATH,
        0o755,
        hostpathplugin_shim(PROXY_PROGRAM_PATH),
    ));
    if reference != HOSTPATHPLUGIN_IMAGE {
        spec.other_references.push(HOSTPATHPLUGIN_IMAGE.to_owned());
    }
    Ok(spec)
}

/// The runner image `reference`: busybox (a shell for whoever debugs the
/// pod), the runner `program` at [`RUNNER_PROGRAM_PATH`] with the shared
/// libraries it loads, and the runner as entrypoint. The runner carries its
/// scenarios and build scripts, so nothing else is needed to run the pack
/// against a driver installed in the cluster the pod runs in.
pub fn runner(reference: &str, program: &Path, busybox: &Path) -> Result<ImageSpec, ImageError> {
    let mut spec = with_program(reference, program, RUNNER_PROGRAM_PATH, busybox)?;
    spec.entrypoint = vec![RUNNER_PROGRAM_PATH.into()];
    spec.cmd = vec!["--help".into()];
    // The runner writes its reports, artifacts and cache under the working
    // directory and HOME; /tmp is the one writable directory of the image.
    spec.env.push("HOME=/tmp".into());
    spec.working_dir = Some("/tmp".into());
    Ok(spec)
}

/// Busybox plus `program` at `path` and every shared library it loads;
/// default command `sh`.
pub fn with_program(
    reference: &str,
    program: &Path,
    path: &str,
    busybox: &Path,
) -> Result<ImageSpec, ImageError> {
    let applets = busybox_applets(busybox)?;
    let mut spec = ImageSpec::new(reference);
    spec.entries = busybox_entries(busybox, &applets);
    spec.entries.push(Entry::host_file(path, 0o755, program));
    let (lib_entries, ld_library_path) = shared_library_entries(reference, program)?;
    spec.entries.extend(lib_entries);
    spec.env.extend(ld_library_path);
    spec.cmd = vec!["sh".into()];
    Ok(spec)
}

/// Layer entries for every shared library `program` loads (none for a static
/// program), at the paths the host's dynamic loader found them, and the
/// `LD_LIBRARY_PATH=...` setting naming their directories, so the loader
/// finds them without the `ld.so.cache` an image built here lacks.
pub fn shared_library_entries(
    reference: &str,
    program: &Path,
) -> Result<(Vec<Entry>, Option<String>), ImageError> {
    let mut entries = Vec::new();
    let mut lib_dirs: Vec<String> = Vec::new();
    for lib in libs::shared_libraries(program)? {
        let path = lib.to_str().ok_or_else(|| ImageError::LayerPath {
            image: reference.to_owned(),
            path: lib.display().to_string(),
            reason: "library path is not UTF-8".into(),
        })?;
        // Libraries keep their mode (usually 0644 or 0755).
        let mode = std::fs::metadata(&lib)
            .map_err(|source| ImageError::Io {
                image: reference.to_owned(),
                op: "reading",
                path: lib.clone(),
                source,
            })?
            .permissions()
            .mode()
            & 0o7777;
        if let Some(dir) = lib.parent().and_then(Path::to_str)
            && !lib_dirs.iter().any(|d| d == dir)
        {
            lib_dirs.push(dir.to_owned());
        }
        entries.push(Entry::host_file(path, mode, &lib));
    }
    let ld_library_path =
        (!lib_dirs.is_empty()).then(|| format!("LD_LIBRARY_PATH={}", lib_dirs.join(":")));
    Ok((entries, ld_library_path))
}

/// The `/hostpathplugin` of the proxy image: runs `program proxy-agent`
/// with hostpathplugin's flags (`--v`, `--endpoint`, `--proxy-endpoint`),
/// which the agent takes as they are. `exec`, so the agent is the process
/// the end of the exec session reaches.
pub fn hostpathplugin_shim(program: &str) -> String {
    format!("#!/bin/sh\nexec {program} proxy-agent \"$@\"\n")
}
