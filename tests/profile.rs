//! `dra-e2e profile check` and `profile show`, run as the built binary: the
//! shipped profiles pass, and every check is shown able to fail with one
//! broken profile under tests/fixtures/profiles/ each, with the exact
//! message (line and field) and exit status 1.
use crate::common;

use std::path::Path;
use std::process::Command;

fn profile(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(common::bin())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .arg("profile")
        .args(args)
        .output()
        .expect("running dra-e2e profile");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const FIXTURES: &str = "tests/fixtures/profiles";

fn fixture_dir() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(FIXTURES)
        .display()
        .to_string()
}

#[test]
fn the_shipped_profiles_and_good_fixtures_pass() {
    for (args, summary) in [
        (
            vec!["profiles/builtin.yaml"],
            "profiles/builtin.yaml: no mistakes: driver ${namespace}.k8s.io, deployment mode \
             Builtin, 10 optional capabilities claimed\n",
        ),
        (
            // Its files are produced by a build; `--no-files` is what says so.
            vec!["--no-files", "profiles/dra-test-driver.yaml"],
            "profiles/dra-test-driver.yaml: no mistakes: driver test-driver.cdi.k8s.io, \
             deployment mode RealNodes, 5 optional capabilities claimed (the files it names \
             were not checked)\n",
        ),
        (
            vec!["tests/fixtures/profiles/real-nodes-built.yaml"],
            "tests/fixtures/profiles/real-nodes-built.yaml: no mistakes: driver \
             gpu.example.com, deployment mode RealNodes, 1 optional capability claimed\n",
        ),
        (
            vec!["tests/fixtures/profiles/simulated-nodes.yaml"],
            "tests/fixtures/profiles/simulated-nodes.yaml: no mistakes: driver \
             gpu.example.com, deployment mode SimulatedNodes, 0 optional capabilities claimed\n",
        ),
        (
            // The same files missing pass when they are not to be checked.
            vec![
                "--no-files",
                "tests/fixtures/profiles/missing-manifest.yaml",
            ],
            "tests/fixtures/profiles/missing-manifest.yaml: no mistakes: driver \
             gpu.example.com, deployment mode RealNodes, 0 optional capabilities claimed (the \
             files it names were not checked)\n",
        ),
    ] {
        let mut full = vec!["check"];
        full.extend(args.iter().copied());
        let (code, stdout, stderr) = profile(&full);
        assert_eq!(
            (code, stdout.as_str(), stderr.as_str()),
            (0, summary, ""),
            "{args:?}"
        );
    }
}

#[test]
fn each_check_fails_its_broken_profile_with_line_and_field() {
    let dir = fixture_dir();
    let not_built = |what: &str, path: &str| {
        format!(
            "{what} {dir}/{path} does not exist (relative paths are relative to the profile's \
             directory; `--no-files` skips this check for files a build has yet to produce)"
        )
    };
    let cases: Vec<(&str, Vec<String>)> = vec![
        (
            "syntax",
            vec!["line 4: not valid YAML: illegal placement of ':' indicator (column 11)".into()],
        ),
        ("empty", vec!["line 1: the profile is empty; it needs at least driverName, deviceClass and deployment".into()]),
        (
            "unknown-field",
            vec!["line 6: field `devicesPerNod`: unknown field (did you mean `devicesPerNode`?)".into()],
        ),
        (
            "wrong-type",
            vec!["line 6: field `devicesPerNode`: expected a whole number, found the string `four`".into()],
        ),
        (
            "missing-field",
            vec!["line 1: field `deployment`: missing: where the driver runs: `mode` Builtin, Installed, RealNodes, Manifests or SimulatedNodes".into()],
        ),
        (
            "bad-driver-name",
            vec!["line 1: field `driverName`: `GPU.example.com` is not a DRA driver name: contains `G`: only lower-case letters, digits, `-` and `.` are allowed (use lower case)".into()],
        ),
        (
            "empty-selector",
            vec!["line 3: field `deviceClass.selector`: the CEL selector is empty; it must select the driver's devices, e.g. device.driver == \"gpu.example.com\"".into()],
        ),
        (
            "missing-manifest",
            vec![format!(
                "line 8: field `deployment.manifests[1]`: {}",
                not_built("manifest", "not-built/driver.yaml")
            )],
        ),
        (
            "missing-archive",
            vec![format!(
                "line 9: field `deployment.imageArchives[0]`: {}",
                not_built("image archive", "not-built/driver.oci.tar")
            )],
        ),
        (
            "unknown-capability",
            vec!["line 8: field `capabilities[1]`: unknown capability `AdminAcess` (did you mean `AdminAccess`?)".into()],
        ),
        (
            "unknown-mode",
            vec!["line 5: field `deployment.mode`: unknown mode `Instaled` (did you mean `Installed`?)".into()],
        ),
        (
            "unknown-placeholder",
            vec!["line 8: field `deployment.command[1]`: unknown placeholder `${nodename}` (did you mean `${nodeName}`?)".into()],
        ),
        (
            "no-devices",
            vec!["line 6: field `devicesPerNode`: must be at least 1, not 0".into()],
        ),
        (
            "class-name-and-selector",
            vec!["line 4: field `deviceClass.selector`: conflicts with deviceClass.name (line 3): use an existing class or have one created from a selector, not both".into()],
        ),
        (
            "registration-flag-and-env",
            vec!["line 8: field `registrationDir.env`: conflicts with registrationDir.flag (line 7): the driver is told one way, not both".into()],
        ),
        (
            "mode-conflict",
            vec!["line 6: field `deployment.manifests`: only for mode RealNodes or Manifests, not Installed".into()],
        ),
        (
            "simulated-container-command",
            vec!["line 8: field `containerCheck.command`: simulated nodes run no containers, so no command can run in one; use containerCheck.env".into()],
        ),
        (
            "simulated-no-registration",
            vec!["line 6: field `deployment.command`: never tells the driver where the node's kubelet looks for plugins: pass `${registrationDir}` in it, or set registrationDir (otherwise every node's driver registers with the host's /var/lib/kubelet/plugins_registry)".into()],
        ),
        (
            "registration-twice",
            vec!["line 7: field `registrationDir`: conflicts with `${registrationDir}` in deployment.command (line 6): the directory would be passed twice; keep one".into()],
        ),
        (
            "namespace-not-builtin",
            vec!["line 1: field `driverName`: `${namespace}` is only for deployment.mode Builtin, whose drivers the suite names per scenario".into()],
        ),
        (
            "builtin-unknown-fault",
            vec!["line 7: field `deployment.faults[0]`: unknown fault `FailEverything` (known: FailPrepare, FailUnprepare, NoDevices, FirstClaimOnly, FirstDeviceOnly, FirstRequestOnly, OtherClaimsDevices, WrongDeviceAnswered, CdiNameMismatch, NoDevicesAnswered, NoCdiSpec, CdiSpecElsewhere, CdiSpecKept, CheckpointKeepsClaim, SharedSpecEdits, DeviceBrokenAfterUse, RefusesAdminAccess, ServesLate, SlicesWrongNode, UnprepareUnknownFails, PrepareRepeatFails, PrepareRepeatOtherDevices, ReplayPrepared, SwallowUnprepare)".into()],
        ),
        (
            "three-mistakes",
            vec![
                "line 2: field `driverName`: `gpu_example.com` is not a DRA driver name: contains `_`: only lower-case letters, digits, `-` and `.` are allowed".into(),
                "line 7: field `capabilities[0]`: unknown capability `Sharing` (known: SharedDevices, MultipleDevicesPerClaim, AdminAccess, PartitionableDevices, ConsumableCapacity, DeviceHealth, DeviceMetadata, OpaqueConfig, DeviceTaints, BindingConditions, DeviceStatus)".into(),
                "line 9: field `containerCheck.env[0]`: `=1` has no variable name: write NAME or NAME=VALUE (`*` matches any text)".into(),
            ],
        ),
    ];
    let mut wrong = Vec::new();
    for (name, mistakes) in &cases {
        let file = format!("{FIXTURES}/{name}.yaml");
        let mut expected: String = mistakes.iter().map(|m| format!("{file}: {m}\n")).collect();
        let n = mistakes.len();
        expected.push_str(&format!(
            "{file}: {n} mistake{}\n",
            if n == 1 { "" } else { "s" }
        ));
        let (code, stdout, stderr) = profile(&["check", &file]);
        if (code, stdout.as_str(), stderr.as_str()) != (1, "", expected.as_str()) {
            wrong.push(format!(
                "{name}: exit {code}, stdout {stdout:?}\n  got:\n{stderr}  expected:\n{expected}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn show_prints_the_defaulted_profile_which_checks_clean() {
    let (code, stdout, stderr) = profile(&[
        "show",
        "--driver-name",
        "gpu.example.com",
        "--device-class",
        "gpu-class",
    ]);
    assert_eq!((code, stderr.as_str()), (0, ""), "{stdout}");
    assert!(
        stdout.starts_with(
            "# driver gpu.example.com with DeviceClass gpu-class; defaulted:\n\
             #   deployment.mode: Installed (the driver runs in the kubeconfig cluster already; \
             the suite installs nothing)\n"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("\ndriverName: gpu.example.com\ndeviceClass:\n  name: gpu-class\ndeployment:\n  mode: Installed\n"), "{stdout}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("shown.yaml");
    std::fs::write(&file, &stdout).unwrap();
    let (code, out, err) = profile(&["check", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");

    let (code, stdout, stderr) = profile(&["show", "--driver-name", "GPU", "--device-class", "c"]);
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (
            1,
            "",
            "error: --driver-name `GPU`: not a DRA driver name: contains `G`: only lower-case \
             letters, digits, `-` and `.` are allowed (use lower case)\n"
        )
    );
}

#[test]
fn a_missing_file_or_a_wrong_command_line_is_one_error() {
    let (code, _, stderr) = profile(&["check", "no/such/profile.yaml"]);
    assert_eq!(
        (code, stderr.as_str()),
        (
            1,
            "error: reading driver profile no/such/profile.yaml: No such file or directory (os \
             error 2)\n"
        )
    );
    let (code, _, stderr) = profile(&["check"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("<FILE>"), "{stderr}");
}

const INIT: &str = "tests/fixtures/profile-init";

/// `profile init --manifests FILE... -o OUT` in `dir`, the fixtures given
/// by name.
fn init(dir: &Path, manifests: &[&str], extra: &[&str]) -> (i32, String, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut args = vec!["init".to_owned(), "--manifests".to_owned()];
    args.extend(
        manifests
            .iter()
            .map(|m| root.join(INIT).join(m).display().to_string()),
    );
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    let out = Command::new(common::bin())
        .current_dir(dir)
        .arg("profile")
        .args(&args)
        .output()
        .expect("running dra-e2e profile init");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn init_writes_the_test_drivers_profile_from_its_manifests() {
    use dra_e2e::profile::{Deployment, Options, Profile};
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("profiles")).unwrap();
    let files = ["rbac.yaml", "deviceclass.yaml", "kubelet-plugin.yaml"];
    let (code, stdout, stderr) = init(dir.path(), &files, &["-o", "profiles/driver.yaml"]);
    assert_eq!((code, stdout.as_str()), (0, ""), "{stderr}");
    assert_eq!(
        stderr,
        "profiles/driver.yaml: the profile of driver test-driver.cdi.k8s.io; fill in its \
         commented fields, then `dra-e2e profile check profiles/driver.yaml`\n\
         profiles/driver.yaml: its first line names the schema profiles/profile.schema.json \
         for editors; `dra-e2e profile schema --out profiles/profile.schema.json` writes it\n"
    );
    let written = dir.path().join("profiles/driver.yaml");
    let text = std::fs::read_to_string(&written).unwrap();
    // Editors find the schema beside the profile.
    assert_eq!(
        text.lines().next(),
        Some("# yaml-language-server: $schema=profile.schema.json"),
        "{text}"
    );
    // The manifests' paths are relative to the profile.
    assert!(text.contains("\n  manifests:\n    - ../../"), "{text}");
    for hint in ["# capabilities: []\n", "# containerCheck:\n#   env:\n"] {
        assert!(text.contains(hint), "{hint:?} in\n{text}");
    }
    let got = Profile::load(&written, Options { check_files: true })
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
    let shipped = Profile::load(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles/dra-test-driver.yaml"),
        Options { check_files: false },
    )
    .unwrap();
    assert_eq!(got.driver_name, shipped.driver_name);
    assert_eq!(got.device_class, shipped.device_class);
    assert_eq!(got.registration_dir, shipped.registration_dir);
    assert_eq!(got.devices_per_node, shipped.devices_per_node);
    assert_eq!(got.device_count, shipped.device_count);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(INIT);
    assert_eq!(
        got.deployment,
        Deployment::RealNodes {
            manifests: files.iter().map(|f| root.join(f)).collect(),
            image_archives: vec![],
        }
    );
    // What no manifest says is left to the author: nothing claimed.
    assert!(got.capabilities.is_empty());
    let (code, out, err) = profile(&["check", "--no-files", written.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("no mistakes: driver test-driver.cdi.k8s.io, deployment mode RealNodes"));

    // OUT is not overwritten without --force.
    let (code, _, stderr) = init(dir.path(), &files, &["-o", "profiles/driver.yaml"]);
    assert_eq!(
        (code, stderr.as_str()),
        (
            1,
            "error: --out profiles/driver.yaml: exists already; give --force to overwrite it\n"
        )
    );
    // With the schema there, nothing more is said about it.
    std::fs::write(dir.path().join("profiles/profile.schema.json"), "{}").unwrap();
    let (code, _, stderr) = init(
        dir.path(),
        &files,
        &["-o", "profiles/driver.yaml", "--force"],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("schema"), "{stderr}");
    // --schema names another, e.g. a URL.
    let (code, stdout, stderr) = init(
        dir.path(),
        &files,
        &["--schema", "https://example.com/profile.schema.json"],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.starts_with(
            "# yaml-language-server: $schema=https://example.com/profile.schema.json\n# \
             Written by `dra-e2e profile init`"
        ),
        "{stdout}"
    );

    // Without a DeviceClass the driver's name comes from the DaemonSet
    // (its plugin directory), and the runner is to make the class.
    let (code, stdout, stderr) = init(dir.path(), &["kubelet-plugin.yaml"], &[]);
    assert_eq!((code, stderr.as_str()), (0, ""), "{stdout}");
    assert!(
        stdout.contains(
            "\ndriverName: test-driver.cdi.k8s.io\n\n# No DeviceClass of the driver in the \
             manifests: the runner creates one with\n# this selector.\ndeviceClass:\n  selector: \
             device.driver == \"test-driver.cdi.k8s.io\"\n"
        ),
        "{stdout}"
    );
}

#[test]
fn init_says_what_it_could_not_find() {
    let dir = tempfile::tempdir().unwrap();
    let shown = |f: &str| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(INIT)
            .join(f)
            .display()
            .to_string()
    };
    let (plugin, second, classes, rbac) = (
        shown("kubelet-plugin.yaml"),
        shown("second-plugin.yaml"),
        shown("deviceclass.yaml"),
        shown("rbac.yaml"),
    );
    let no_registration = shown("no-registration.yaml");
    for (files, extra, says) in [
        (
            &["deviceclass.yaml", "rbac.yaml"][..],
            &[][..],
            format!(
                "error: no DaemonSet in {classes}, {rbac}: a DRA driver's kubelet plugin runs as \
                 a DaemonSet on every node, and profile init reads the driver's settings from \
                 it (found only DeviceClass, Namespace, ServiceAccount); give the file that \
                 holds it too\n"
            ),
        ),
        (
            &["kubelet-plugin.yaml", "second-plugin.yaml"],
            &[],
            format!(
                "error: 2 DaemonSets in {plugin}, {second} look like kubelet plugins (they \
                 mount the kubelet's plugin directories): dra-test-driver/dra-test-driver \
                 ({plugin}), dra-test-driver/other-plugin ({second}); say which one runs the \
                 driver with --daemonset NAME\n"
            ),
        ),
        (
            &["kubelet-plugin.yaml", "second-plugin.yaml"],
            &["--daemonset", "nope"],
            format!(
                "error: --daemonset nope: no DaemonSet of that name in {plugin}, {second} (they \
                 hold dra-test-driver/dra-test-driver ({plugin}), dra-test-driver/other-plugin \
                 ({second}))\n"
            ),
        ),
        (
            &["no-registration.yaml", "deviceclass.yaml"],
            &[],
            format!(
                "error: DaemonSet dra-test-driver/dra-test-driver ({no_registration}): no \
                 registration setting found: looked for a container argument (--FLAG=DIR or \
                 --FLAG DIR) or environment variable whose value is or contains \
                 /var/lib/kubelet/plugins_registry, and for a hostPath volume of that \
                 directory. The driver then must use the default path, which the DaemonSet \
                 does not mount by itself; add the flag or variable that sets it to the \
                 DaemonSet, or mount /var/lib/kubelet/plugins_registry as its own hostPath \
                 volume\n"
            ),
        ),
    ] {
        let (code, stdout, stderr) = init(dir.path(), files, extra);
        assert_eq!(
            (code, stdout.as_str(), stderr.as_str()),
            (1, "", says.as_str()),
            "{files:?} {extra:?}"
        );
    }

    // --daemonset picks one of two.
    let (code, stdout, stderr) = init(
        dir.path(),
        &[
            "kubelet-plugin.yaml",
            "second-plugin.yaml",
            "deviceclass.yaml",
        ],
        &["--daemonset", "dra-test-driver"],
    );
    assert_eq!((code, stderr.as_str()), (0, ""), "{stdout}");
    assert!(stdout.contains("DaemonSet dra-test-driver/dra-test-driver"));

    // The default path, mounted: no registrationDir, and a warning.
    let (code, stdout, stderr) = init(
        dir.path(),
        &["default-registration.yaml", "deviceclass.yaml"],
        &[],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.starts_with("warning: DaemonSet dra-test-driver/dra-test-driver (")
            && stderr.contains(
                "no registration setting found (looked for a container argument or \
                 environment variable whose value is or contains \
                 /var/lib/kubelet/plugins_registry); the driver then must use the default path"
            ),
        "{stderr}"
    );
    assert!(!stdout.contains("\nregistrationDir:"), "{stdout}");
    assert!(
        stdout.contains("\n# Not set: no container argument"),
        "{stdout}"
    );
}

/// `profile schema` prints the JSON Schema; `--out` writes the same; a
/// profile whose first line names it still passes the check.
#[test]
fn schema_prints_the_json_schema_and_out_writes_it() {
    let (code, stdout, stderr) = profile(&["schema"]);
    assert_eq!(code, 0, "{stderr}");
    let schema: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(schema["$schema"], "http://json-schema.org/draft-07/schema#");
    assert!(schema["properties"]["deployment"].is_object(), "{stdout}");

    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("profile.schema.json");
    let (code, written, stderr) = profile(&["schema", "--out", out.to_str().unwrap()]);
    assert_eq!((code, written.as_str()), (0, ""), "{stderr}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), stdout);

    let nowhere = dir.path().join("no/such/dir/s.json");
    let (code, _, stderr) = profile(&["schema", "--out", nowhere.to_str().unwrap()]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "error: --out {}: cannot write it",
            nowhere.display()
        )),
        "{stderr}"
    );
}
