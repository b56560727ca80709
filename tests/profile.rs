//! `dra-e2e profile check` and `profile show`, run as the built binary: the
//! shipped profiles pass, and every check is shown able to fail with one
//! broken profile under tests/fixtures/profiles/ each, with the exact
//! message (line and field) and exit status 1.
mod common;

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
