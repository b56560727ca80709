//! `dra-e2e job`: the conformance pack run inside the cluster under test,
//! as a Job, for a driver author who cannot reach its nodes with root or a
//! port-forward ([`crate::cluster::job`] says how). It makes the run's
//! namespace, RBAC, inputs and Job, waits for the Job's pod (watching,
//! with a deadline), reads the results back through the API server into
//! `--out`, and removes everything it made, whether the run passed, failed
//! or was interrupted; its exit status is the runner's in the pod.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, DeleteParams, PostParams};

use crate::cluster::job::objects::{self, INPUTS_DIR, JOB_NAME, JOB_NAME_LABEL, JobPlan};
use crate::cluster::job::results::{self, Results};
use crate::ground::wait::{self, Check};
use crate::profile::{Deployment, Profile};

/// The options of `dra-e2e job`.
#[derive(Debug, clap::Args)]
#[command(
    about = "Run the conformance pack inside the cluster under test, as a Job",
    long_about = "Run the scenarios inside the kubeconfig cluster, as a Job, against a driver \
        installed there: for a cluster whose nodes this machine cannot reach (no root on them, \
        no port-forward or exec through the API server). Makes a namespace, a ServiceAccount \
        bound to cluster-admin, a ConfigMap with the profile and a Job running the runner \
        image (`dra-e2e image runner`, loaded into the nodes or pushed to a registry they \
        pull from); reads the JUnit report, the HTML report, the transcript and the \
        artifacts back through the API server into --out; removes what it made (also on \
        failure and Ctrl-C) and exits with the runner's exit status.",
    after_help = "Example:\n  dra-e2e image runner --out runner.tar   # then load runner.tar into the nodes\n  \
        dra-e2e job --kubeconfig ~/.kube/config --driver-name gpu.example.com \\\n      \
        --device-class gpu.example.com --tags @DriverConformance --out results"
)]
pub struct JobArgs {
    /// Kubeconfig of the cluster (default: KUBECONFIG, then ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,

    /// The runner image the Job runs, as the nodes know it
    /// [default: the reference `dra-e2e image runner` gives this version].
    #[arg(long, value_name = "REF")]
    pub image: Option<String>,

    /// The Job container's imagePullPolicy: IfNotPresent, Never or Always.
    #[arg(long, value_name = "POLICY", default_value = "IfNotPresent", value_parser = ["IfNotPresent", "Never", "Always"])]
    pub image_pull_policy: String,

    /// The driver under test: a profile whose deployment.mode is Installed
    /// or Manifests (its manifests travel with it), or KEP-5970's two flags.
    #[command(flatten)]
    pub driver: super::cli::DriverArgs,

    /// The scenarios to run, as the runner's --tags [default, without
    /// --name: @DriverConformance].
    #[arg(long, value_name = "EXPR", conflicts_with = "name")]
    pub tags: Option<String>,

    /// The scenarios whose name matches this regex, as the runner's --name
    /// (instead of --tags).
    #[arg(long, value_name = "REGEX")]
    pub name: Option<String>,

    /// The directory the results go to: junit.xml, report.html, run.log
    /// (the runner's transcript) and artifacts/.
    #[arg(long, value_name = "DIR", required_unless_present = "remove_leftovers")]
    pub out: Option<PathBuf>,

    /// Remove what earlier `dra-e2e job` commands killed before their end
    /// (SIGKILL, a lost machine) left in the cluster: every namespace and
    /// ClusterRoleBinding labelled dra-e2e.k8s.io/job, their Jobs stopped
    /// first; then exit. It stops a Job whose command still runs elsewhere
    /// too, so use it when none does.
    #[arg(long, conflicts_with_all = ["profile", "driver_name", "device_class", "tags", "name", "out", "image"])]
    pub remove_leftovers: bool,

    /// The Job's limit (its activeDeadlineSeconds): when it passes, the pod
    /// is stopped and the command fails.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "30m")]
    pub timeout: Duration,

    /// More arguments for the runner in the pod, after `--` (e.g.
    /// `-- --concurrency 2 --step-timeout 5m`).
    #[arg(last = true, value_name = "RUNNER_ARGS")]
    pub runner_args: Vec<String>,
}

/// How long the pod may take to appear once the Job exists.
const POD_APPEARS: Duration = Duration::from_secs(120);
/// Beyond --timeout: the pod's start and the storing of the results.
const GRACE: Duration = Duration::from_secs(90);
/// How long removing the namespace may take.
const REMOVAL: Duration = Duration::from_secs(180);

/// Container waiting reasons no wait ends: the run cannot start.
const HOPELESS: &[&str] = &[
    "ErrImageNeverPull",
    "InvalidImageName",
    "ImagePullBackOff",
    "CreateContainerConfigError",
    "CreateContainerError",
];

impl JobArgs {
    /// `--out`, which clap requires unless `--remove-leftovers` is given.
    fn out(&self) -> &Path {
        self.out.as_deref().unwrap_or(Path::new("."))
    }
}

/// `--remove-leftovers`: stops and removes what killed `dra-e2e job`
/// commands left, found by their label, as their own ending would have.
async fn remove_leftovers(kubeconfig: Option<&Path>) -> anyhow::Result<i32> {
    use kube::api::ListParams;
    let config = crate::cluster::remote::load_config(kubeconfig).await?;
    let client = kube::Client::try_from(config).context("building the cluster client")?;
    let labelled = ListParams::default().labels(crate::cluster::job::JOB_LABEL);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    let mut names = std::collections::BTreeSet::new();
    for ns in namespaces
        .list(&labelled)
        .await
        .context("listing the namespaces labelled dra-e2e.k8s.io/job")?
    {
        names.extend(ns.metadata.name);
    }
    for b in bindings
        .list(&labelled)
        .await
        .context("listing the ClusterRoleBindings labelled dra-e2e.k8s.io/job")?
    {
        names.extend(b.metadata.name);
    }
    if names.is_empty() {
        println!("job: nothing left by earlier jobs");
        return Ok(0);
    }
    for name in &names {
        // The namespace and the binding share the run's name.
        let made = Made {
            client: client.clone(),
            namespace: name.clone(),
            has_namespace: true,
            has_binding: true,
            has_job: true,
        };
        made.stop_pod()
            .await
            .with_context(|| format!("stopping the Job of {name}"))?;
        made.remove().await?;
    }
    Ok(0)
}

/// Runs `dra-e2e job`; returns the runner's exit status.
pub fn cli_main(args: JobArgs) -> anyhow::Result<i32> {
    if args.remove_leftovers {
        let rt = tokio::runtime::Runtime::new().context("starting the async runtime")?;
        return rt.block_on(remove_leftovers(args.kubeconfig.as_deref()));
    }
    let (inputs, selection) = selection(&args)?;
    std::fs::create_dir_all(args.out())
        .with_context(|| format!("--out {}: creating the directory", args.out().display()))?;
    let image = args
        .image
        .clone()
        .unwrap_or_else(crate::cluster::images::cli::runner_reference);
    if image.trim().is_empty() || image.contains(char::is_whitespace) {
        bail!("--image {image:?}: not an image reference");
    }
    if args.timeout < Duration::from_secs(1) {
        bail!("--timeout {:?}: at least a second", args.timeout);
    }
    let mut runner = vec![
        "job-pod".to_owned(),
        "--".to_owned(),
        "--cluster".to_owned(),
        "kubeconfig".to_owned(),
    ];
    runner.extend(selection);
    match (&args.tags, &args.name) {
        (_, Some(name)) => runner.extend(["--name".to_owned(), name.clone()]),
        (Some(tags), None) => runner.extend(["--tags".to_owned(), tags.clone()]),
        (None, None) => runner.extend(["--tags".to_owned(), "@DriverConformance".to_owned()]),
    }
    runner.extend(args.runner_args.iter().cloned());
    let plan = JobPlan {
        namespace: format!("dra-e2e-job-{}", suffix()),
        image,
        pull_policy: args.image_pull_policy.clone(),
        args: runner,
        inputs,
        deadline: args.timeout,
    };
    let rt = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    rt.block_on(run(&args, &plan))
}

/// Five random lower-case letters and digits, as scenario namespaces have.
fn suffix() -> String {
    use rand::Rng as _;
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    (0..5)
        .map(|_| CHARS[rng.random_range(0..CHARS.len())] as char)
        .collect()
}

/// The ConfigMap's files and the runner's driver options in the pod.
fn selection(args: &JobArgs) -> anyhow::Result<(BTreeMap<String, String>, Vec<String>)> {
    if let (Some(name), Some(class)) = (&args.driver.driver_name, &args.driver.device_class) {
        Profile::from_flags(name, class)?;
        return Ok((
            BTreeMap::new(),
            vec![
                "--driver-name".into(),
                name.clone(),
                "--device-class".into(),
                class.clone(),
            ],
        ));
    }
    let Some(path) = &args.driver.profile else {
        bail!(
            "name the driver under test, installed in the cluster: --profile FILE, or \
             --driver-name NAME --device-class CLASS (the suite's own driver is hosted by the \
             runner on nodes it reaches, which a Job cannot)"
        );
    };
    let inputs = profile_inputs(path)?;
    let args = vec!["--profile".into(), format!("{INPUTS_DIR}/{PROFILE_KEY}")];
    Ok((inputs, args))
}

/// The profile's key in the inputs ConfigMap.
const PROFILE_KEY: &str = "profile.yaml";

/// The profile at `path` and the files it names, as the pod reads them:
/// keys of the inputs ConfigMap, the profile's paths pointing at them.
fn profile_inputs(path: &Path) -> anyhow::Result<BTreeMap<String, String>> {
    let shown = path.display();
    let profile = Profile::load(path, crate::profile::Options { check_files: true })?;
    let refuse = |field: &str, why: &str| {
        anyhow::anyhow!(
            "--profile {shown}: {field}: {why}; a Job inside the cluster tests a driver \
             installed there (deployment.mode: Installed) or one it installs from manifests \
             whose images the nodes already have or pull (deployment.mode: Manifests)"
        )
    };
    let mut inputs = BTreeMap::new();
    match &profile.deployment {
        Deployment::Installed => {
            let text =
                std::fs::read_to_string(path).with_context(|| format!("--profile {shown}"))?;
            inputs.insert(PROFILE_KEY.to_owned(), text);
        }
        Deployment::Manifests { manifests } => {
            let mut moved = Vec::new();
            for (i, m) in manifests.iter().enumerate() {
                let base = m
                    .file_name()
                    .and_then(|n| n.to_str())
                    .filter(|n| {
                        n.chars()
                            .all(|c| c.is_ascii_alphanumeric() || "-._".contains(c))
                    })
                    .unwrap_or("manifest.yaml");
                let key = format!("manifest-{i}-{base}");
                let text = std::fs::read_to_string(m).with_context(|| {
                    format!(
                        "--profile {shown}: deployment.manifests[{i}] {}",
                        m.display()
                    )
                })?;
                inputs.insert(key.clone(), text);
                moved.push(PathBuf::from(key));
            }
            let mut in_pod = profile.clone();
            in_pod.deployment = Deployment::Manifests { manifests: moved };
            inputs.insert(PROFILE_KEY.to_owned(), in_pod.to_yaml());
        }
        Deployment::RealNodes { .. } => {
            return Err(refuse(
                "deployment.mode RealNodes",
                "the local cluster's real nodes import deployment.imageArchives from this \
                 machine, which a pod cannot do",
            ));
        }
        Deployment::SimulatedNodes { .. } => {
            return Err(refuse(
                "deployment.mode SimulatedNodes",
                "simulated nodes run inside the runner on the local cluster",
            ));
        }
        Deployment::Builtin => {
            return Err(refuse(
                "deployment.mode Builtin",
                "the suite's own driver is hosted by the runner on nodes it reaches",
            ));
        }
    }
    let size: usize = inputs.values().map(String::len).sum();
    if size > results::MAX_BYTES {
        bail!(
            "--profile {shown}: the profile and its manifests hold {} KiB, more than the {} KiB \
             a ConfigMap carries",
            size >> 10,
            results::MAX_BYTES >> 10
        );
    }
    Ok(inputs)
}

/// What this command made in the cluster, removed at the end whatever
/// happened.
struct Made {
    client: kube::Client,
    namespace: String,
    has_namespace: bool,
    has_binding: bool,
    has_job: bool,
}

impl Made {
    /// Deletes the Job and waits until its pod is gone. Before the rest: a
    /// runner still running (the command was interrupted, or its wait
    /// failed) tears its scenarios down when stopped, which takes the
    /// permissions the binding gives, and stores what it has.
    async fn stop_pod(&self) -> anyhow::Result<()> {
        let dp = DeleteParams::background();
        let ns = &self.namespace;
        if self.has_job {
            let jobs: Api<Job> = Api::namespaced(self.client.clone(), ns);
            crate::ground::objects::delete_if_present(&jobs, JOB_NAME, &dp)
                .await
                .with_context(|| format!("deleting Job {ns}/{JOB_NAME}"))?;
            let pods: Api<Pod> = Api::namespaced(self.client.clone(), ns);
            wait::list(
                &pods,
                kube::runtime::watcher::Config::default()
                    .labels(&format!("{JOB_NAME_LABEL}={JOB_NAME}")),
                &format!("the pod of Job {ns}/{JOB_NAME} to stop"),
                objects::STOP_GRACE + GRACE,
                wait::none_left(|p: &Pod| wait::describe_pod(Some(p))),
            )
            .await?;
        }
        Ok(())
    }

    /// Deletes the binding and the namespace (with everything in it) and
    /// waits until the namespace is gone.
    async fn remove(&self) -> anyhow::Result<()> {
        let dp = DeleteParams::background();
        let ns = &self.namespace;
        if self.has_binding {
            let api: Api<ClusterRoleBinding> = Api::all(self.client.clone());
            crate::ground::objects::delete_if_present(&api, ns, &dp)
                .await
                .with_context(|| format!("deleting ClusterRoleBinding {ns}"))?;
        }
        if self.has_namespace {
            let api: Api<Namespace> = Api::all(self.client.clone());
            crate::ground::objects::delete_if_present(&api, ns, &dp)
                .await
                .with_context(|| format!("deleting namespace {ns}"))?;
            wait::object(
                &api,
                ns,
                &format!("namespace {ns} to be gone"),
                REMOVAL,
                |n| match n {
                    None => Check::Done(()),
                    Some(n) => Check::Pending(format!(
                        "phase {}",
                        n.status
                            .as_ref()
                            .and_then(|s| s.phase.as_deref())
                            .unwrap_or("?")
                    )),
                },
            )
            .await?;
        }
        if self.has_namespace || self.has_binding {
            println!("job: removed namespace {ns} and ClusterRoleBinding {ns}");
        }
        Ok(())
    }
}

async fn run(args: &JobArgs, plan: &JobPlan) -> anyhow::Result<i32> {
    use tokio::signal::unix::{SignalKind, signal};
    let config = crate::cluster::remote::load_config(args.kubeconfig.as_deref()).await?;
    let server = config.cluster_url.to_string();
    let client = kube::Client::try_from(config).context("building the cluster client")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let mut terminate =
        signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut made = Made {
        client: client.clone(),
        namespace: plan.namespace.clone(),
        has_namespace: false,
        has_binding: false,
        has_job: false,
    };
    let outcome = tokio::select! {
        r = in_cluster(&client, &server, args, plan, &mut made) => r,
        _ = interrupt.recv() => Err(anyhow::anyhow!("interrupted (SIGINT)")),
        _ = terminate.recv() => Err(anyhow::anyhow!("terminated (SIGTERM)")),
    };
    if outcome.is_err() && made.has_job {
        println!(
            "job: stopping the Job's pod (its runner tears its scenarios down), then removing \
             namespace {} and ClusterRoleBinding {}",
            plan.namespace, plan.namespace
        );
    }
    let stopped = made.stop_pod().await;
    // An interrupted runner stores what it has when stopped: the scenarios
    // so far, and its transcript up to the interruption.
    if outcome.is_err()
        && made.has_job
        && stopped.is_ok()
        && let Ok(Some(results)) = fetch(&client, &plan.namespace).await
        && let Err(e) = hand_over(args.out(), &results)
    {
        eprintln!("job: the interrupted run's results: {e:#}");
    }
    let removed = match stopped {
        Ok(()) => made.remove().await,
        // Removing the namespace stops the pod too, without its teardown.
        Err(e) => made.remove().await.and(Err(e)),
    };
    match (outcome, removed) {
        (Ok(code), Ok(())) => Ok(code),
        (Ok(_), Err(e)) => Err(e.context(format!(
            "removing what the run made (namespace {}, ClusterRoleBinding {}); the results are \
             in {}",
            plan.namespace,
            plan.namespace,
            args.out().display()
        ))),
        (Err(e), Ok(())) => Err(e),
        (Err(e), Err(r)) => Err(e.context(format!(
            "and removing namespace {} and ClusterRoleBinding {} failed too: {r:#}",
            plan.namespace, plan.namespace
        ))),
    }
}

/// Makes the objects, waits for the pod, fetches the results.
async fn in_cluster(
    client: &kube::Client,
    server: &str,
    args: &JobArgs,
    plan: &JobPlan,
    made: &mut Made,
) -> anyhow::Result<i32> {
    let ns = &plan.namespace;
    let pp = PostParams::default();
    Api::<Namespace>::all(client.clone())
        .create(&pp, &plan.namespace_object()?)
        .await
        .with_context(|| format!("creating namespace {ns} in the cluster at {server}"))?;
    made.has_namespace = true;
    Api::<ClusterRoleBinding>::all(client.clone())
        .create(&pp, &plan.binding()?)
        .await
        .with_context(|| {
            format!(
                "creating ClusterRoleBinding {ns} (to {}): the kubeconfig's user must be \
                 allowed to grant it",
                objects::CLUSTER_ROLE
            )
        })?;
    made.has_binding = true;
    Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create(&pp, &plan.service_account()?)
        .await
        .with_context(|| format!("creating ServiceAccount {ns}/{}", objects::SERVICE_ACCOUNT))?;
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .create(&pp, &plan.inputs()?)
        .await
        .with_context(|| format!("creating ConfigMap {ns}/{}", objects::INPUTS))?;
    Api::<Job>::namespaced(client.clone(), ns)
        .create(&pp, &plan.job()?)
        .await
        .with_context(|| format!("creating Job {ns}/{JOB_NAME}"))?;
    made.has_job = true;
    println!(
        "job: Job {ns}/{JOB_NAME} created (image {}, deadline {})",
        plan.image,
        humantime::format_duration(plan.deadline)
    );

    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let selector = format!("{JOB_NAME_LABEL}={JOB_NAME}");
    let pod = wait::list(
        &pods,
        kube::runtime::watcher::Config::default().labels(&selector),
        &format!("the pod of Job {ns}/{JOB_NAME}"),
        POD_APPEARS,
        |items| match items.first().and_then(|p| p.metadata.name.clone()) {
            Some(name) => Check::Done(name),
            None => Check::Pending("no pod yet".into()),
        },
    )
    .await;
    let pod = match pod {
        Ok(pod) => pod,
        Err(e) => bail!("{e}{}", job_conditions(client, ns).await),
    };
    let ended = match wait_for_end(&pods, &pod, plan.deadline + GRACE).await {
        Ok(ended) => ended,
        Err(e) => bail!("{e}{}", job_conditions(client, ns).await),
    };
    let found = fetch(client, ns).await?;
    let Some(results) = found else {
        bail!(
            "the runner's pod {ns}/{pod} ended ({}) without storing its results; what it \
             said last:\n{}",
            ended.describe(),
            ended.message.trim_end()
        );
    };
    hand_over(args.out(), &results)?;
    println!("job: runner exited with status {}", results.exit_status);
    Ok(results.exit_status)
}

/// Writes the results into `out` and prints the transcript's closing lines
/// and what was written.
fn hand_over(out: &Path, results: &Results) -> anyhow::Result<()> {
    write_results(out, results)?;
    let log = results
        .files
        .get("run.log")
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .unwrap_or_default();
    for line in summary_lines(&log) {
        println!("{line}");
    }
    let mut listed: Vec<&str> = results
        .files
        .keys()
        .map(|k| match k.as_str() {
            "artifacts.tar" => "artifacts/",
            k => k,
        })
        .collect();
    listed.sort_unstable();
    println!("job: results in {}: {}", out.display(), listed.join(", "));
    Ok(())
}

/// The Job's true conditions on a line of their own, for an error about
/// its pod; nothing when it has none.
async fn job_conditions(client: &kube::Client, ns: &str) -> String {
    let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
    match jobs.get_opt(JOB_NAME).await {
        Ok(Some(job)) => {
            let conditions: Vec<String> = job
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .into_iter()
                .filter(|c| c.status == "True")
                .map(|c| {
                    format!(
                        "{}: {} {}",
                        c.type_,
                        c.reason.unwrap_or_default(),
                        c.message.unwrap_or_default()
                    )
                    .trim_end()
                    .to_owned()
                })
                .collect();
            if conditions.is_empty() {
                String::new()
            } else {
                format!("\nJob {ns}/{JOB_NAME}: {}", conditions.join("; "))
            }
        }
        Ok(None) => format!("\nJob {ns}/{JOB_NAME} is gone"),
        Err(e) => format!("\nreading Job {ns}/{JOB_NAME}: {e}"),
    }
}

/// How the pod ended.
#[derive(Debug)]
struct Ended {
    phase: String,
    exit_code: Option<i32>,
    /// The container's termination message (the wrapper writes the
    /// transcript's end there).
    message: String,
}

impl Ended {
    fn describe(&self) -> String {
        match self.exit_code {
            Some(c) => format!("{}, exit code {c}", self.phase),
            None => self.phase.clone(),
        }
    }
}

/// Watches the pod until it succeeded or failed; a container that cannot
/// start ends the wait at once with its reason (and, as every pod wait,
/// what the cluster says about the pod).
async fn wait_for_end(
    pods: &Api<Pod>,
    pod: &str,
    timeout: Duration,
) -> Result<Ended, wait::WaitError> {
    let mut said_running = false;
    let mut seen = false;
    wait::pod(
        pods,
        pod,
        &format!(
            "the runner's pod {}/{pod} to finish",
            pods.namespace().unwrap_or("?")
        ),
        timeout,
        |p| {
            let Some(p) = p else {
                return if seen {
                    Check::Fail(
                        "the pod is gone: the Job's deadline (--timeout) passed, or it was \
                         deleted"
                            .into(),
                    )
                } else {
                    Check::Pending("no pod".into())
                };
            };
            seen = true;
            let phase = wait::pod_phase(p).to_owned();
            let status = p.status.as_ref();
            let container = status
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|cs| cs.iter().find(|c| c.name == JOB_NAME));
            if phase == "Succeeded" || phase == "Failed" {
                let terminated = container
                    .and_then(|c| c.state.as_ref())
                    .and_then(|s| s.terminated.as_ref());
                return Check::Done(Ended {
                    phase,
                    exit_code: terminated.map(|t| t.exit_code),
                    message: terminated
                        .and_then(|t| t.message.clone())
                        .unwrap_or_default(),
                });
            }
            if let Some(waiting) = container
                .and_then(|c| c.state.as_ref())
                .and_then(|s| s.waiting.as_ref())
                && let Some(reason) = waiting.reason.as_deref()
                && HOPELESS.contains(&reason)
            {
                return Check::Fail(format!(
                    "its container cannot start: {reason}: {}",
                    waiting.message.as_deref().unwrap_or("")
                ));
            }
            if phase == "Running" && !said_running {
                said_running = true;
                println!(
                    "job: pod {pod} running on node {}",
                    p.spec
                        .as_ref()
                        .and_then(|s| s.node_name.as_deref())
                        .unwrap_or("?")
                );
            }
            Check::Pending(wait::describe_pod(Some(p)))
        },
    )
    .await
}

/// The results the pod stored; `None` when it stored none.
async fn fetch(client: &kube::Client, ns: &str) -> anyhow::Result<Option<Results>> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let Some(index) = api
        .get_opt(results::INDEX)
        .await
        .with_context(|| format!("reading ConfigMap {ns}/{}", results::INDEX))?
    else {
        return Ok(None);
    };
    let mut parts = Vec::new();
    for n in 1..=Results::parts_of(&index)? {
        let name = results::part_name(n);
        parts.push(
            api.get(&name)
                .await
                .with_context(|| format!("reading ConfigMap {ns}/{name}"))?,
        );
    }
    Ok(Some(Results::from_config_maps(&index, &parts)?))
}

/// Writes the results' files into `out`; the artifacts are unpacked there.
fn write_results(out: &Path, results: &Results) -> anyhow::Result<()> {
    for (name, bytes) in &results.files {
        if name == "artifacts.tar" {
            let dir = out.join("artifacts");
            if dir.exists() {
                std::fs::remove_dir_all(&dir)
                    .with_context(|| format!("replacing {}", dir.display()))?;
            }
            tar::Archive::new(&bytes[..])
                .unpack(out)
                .with_context(|| format!("unpacking the artifacts into {}", out.display()))?;
            continue;
        }
        // The names are the wrapper's own; nothing else is written.
        if !["junit.xml", "report.html", "run.log"].contains(&name.as_str()) {
            continue;
        }
        let path = out.join(name);
        std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// The transcript's closing lines: counts, the conformance summary, the
/// failures named, the leak check and errors.
fn summary_lines(log: &str) -> Vec<&str> {
    const PREFIXES: &[&str] = &[
        "driver conformance of ",
        "failed: ",
        "leak check",
        "kubelet: ",
        "the run stopped early",
        "no scenario ran",
        "error: ",
    ];
    log.lines()
        .filter(|l| {
            PREFIXES.iter().any(|p| l.starts_with(p)) || {
                // `N passed, N failed[, N skipped]`
                let mut words = l.split(' ');
                matches!(
                    (words.next(), words.next(), words.next(), words.next()),
                    (Some(p), Some("passed,"), Some(f), Some(w))
                        if p.parse::<u32>().is_ok() && f.parse::<u32>().is_ok()
                            && w.starts_with("failed")
                )
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_is_the_closing_lines() {
        let log = "Feature: x\n  Scenario: y\n   ✔  Given z\n\
                   driver conformance of d: 7 behaviours: 6 passed, 0 skipped, 1 failed\n\
                   failed: f.feature:3: y: Given z: boom\n\
                   6 passed, 1 failed\n\
                   kubelet: real kubelet\n\
                   leak check: nothing left behind\n";
        assert_eq!(
            summary_lines(log),
            [
                "driver conformance of d: 7 behaviours: 6 passed, 0 skipped, 1 failed",
                "failed: f.feature:3: y: Given z: boom",
                "6 passed, 1 failed",
                "kubelet: real kubelet",
                "leak check: nothing left behind",
            ]
        );
    }

    #[test]
    fn profiles_a_job_cannot_deploy_are_refused_naming_the_field() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("p.yaml");
        std::fs::write(&p, "driverName: d.example.com\ndeviceClass:\n  name: c\ndeployment:\n  mode: SimulatedNodes\n  command: [/bin/true, \"${registrationDir}\"]\n").unwrap();
        let e = profile_inputs(&p).unwrap_err().to_string();
        assert!(e.contains("deployment.mode SimulatedNodes"), "{e}");
        assert!(e.contains("Installed"), "{e}");
    }

    #[test]
    fn a_manifests_profile_travels_with_its_manifests() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("m")).unwrap();
        std::fs::write(dir.path().join("m/driver.yaml"), "kind: List\n").unwrap();
        let p = dir.path().join("p.yaml");
        std::fs::write(&p, "driverName: d.example.com\ndeviceClass:\n  name: c\ndeployment:\n  mode: Manifests\n  manifests: [m/driver.yaml]\n").unwrap();
        let inputs = profile_inputs(&p).unwrap();
        assert_eq!(inputs["manifest-0-driver.yaml"], "kind: List\n");
        // The pod reads the profile beside the manifests.
        let in_pod = Path::new(INPUTS_DIR).join(PROFILE_KEY);
        let profile = crate::profile::parse_str(
            &inputs[PROFILE_KEY],
            &in_pod,
            crate::profile::Options { check_files: false },
        )
        .unwrap();
        assert_eq!(
            profile.deployment,
            Deployment::Manifests {
                manifests: vec![Path::new(INPUTS_DIR).join("manifest-0-driver.yaml")]
            }
        );
    }
}
