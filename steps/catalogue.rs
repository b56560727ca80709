//! The step catalogue printed by `dra-e2e steps`, and written as
//! `docs/steps.md` by `dra-e2e steps --markdown` (`make steps-doc`). A test
//! checks that every example matches exactly one step definition, so the
//! catalogue cannot drift from the steps; `tests/docs.rs` checks that
//! `docs/steps.md` is what [`markdown`] gives.

pub struct Entry {
    pub pattern: &'static str,
    pub description: &'static str,
    pub example: &'static str,
}

pub struct Topic {
    pub title: &'static str,
    pub entries: &'static [Entry],
}

pub const CATALOGUE: &[Topic] = &[
    Topic {
        title: "Nodes and drivers",
        entries: &[
            Entry {
                pattern: "Given <min>[ to <max>] ready node(s)",
                description: "Use between min and max ready schedulable nodes (sorted by name); the scenario is skipped when the cluster has fewer than min.",
                example: "Given 1 to 4 ready nodes",
            },
            Entry {
                pattern: "Given <n> more ready node(s) shared with other scenarios",
                description: "For a scenario with nodes of its own (`@OwnNodes`, after `Given 1 ready node`, before its drivers): n more nodes that it shares with the other scenarios, numbered after its own (`node 1` after its own `node 0`), e.g. where its pods go once its own node is lost. On a cluster of two nodes, whose one node an owner may have, the other is shared; the scenario is skipped when the cluster has fewer nodes than it needs in all.",
                example: "Given 1 more ready node shared with other scenarios",
            },
            Entry {
                pattern: "Given a driver [\"<name>\"] with <resources>[, <setting>]...",
                description: "Start a test driver (named <namespace>[-<name>].k8s.io) on the scenario's nodes. Resources: `N devices per node`, `a network pool of N [tainted] devices [tainted k=v:Effect]`, `an all-nodes pool \"p\" of N devices`, `these devices` (table node | device | attributes), `these slices per node` (a YAML doc string, one document per slice of each node's pool, each holding `devices` and/or `sharedCounters` of a ResourceSlice spec: counter sets, devices consuming counters or sharing capacity; published by the plugin like upstream's ToDriverResources; a slice the API server refuses, or whose fields it drops, fails the step with its reason), `a shared pool \"p\" of these slices` (the same doc string, `partitionTypeAttribute` allowed too: one pool p that the driver's nodes share, selected by hostname, like upstream's PartitionableResources and ShareableResources), `node-allocatable devices \"<devices>\"` (see Node-allocatable resources), `no devices`. Settings: `not registered with the kubelet`, `serving the v1beta1 API` / `serving the v1 and v1beta1 APIs`, `serving the v1alpha1 health API` (default: the v1 and v1alpha1 health APIs), `without device health`, `in rolling-update mode`, `not started yet`, `with its DRA service started after registration` (registration alone until `the DRA service of <driver> starts on <node>`), `with its DRA socket in the plugin registry` (`plugins_registry/<driver>-common.sock`, where the kubelet's plugin watcher also finds it), `skipping node operations \"*\"` (or `\"NodeUnprepareResources\"`, several joined by ` and `: the `skipNodeOperations` of every slice the driver publishes), `writing device metadata v1beta1` / `writing device metadata v1beta1 and v1alpha1` (one file per prepared request, with the objects in these versions in this order, mounted through CDI; needs a container runtime), `on node N` / `on nodes N and M` / `on nodes N, M and K` (only on those of the scenario's nodes; a `these devices` table still numbers the scenario's nodes). Without a name it is \"the driver\"; otherwise the first driver is.",
                example: "Given a driver with 2 devices per node, serving the v1beta1 API",
            },
            Entry {
                pattern: "Given a second instance \"<name>\" of <driver>[, not started yet]",
                description: "Another instance of the same driver (same name and resources, own sockets when in rolling-update mode), for update scenarios.",
                example: "Given a second instance \"new\" of driver \"old\"",
            },
            Entry {
                pattern: "When <driver> starts",
                description: "Set up a driver that was declared `not started yet`.",
                example: "When the driver starts",
            },
            Entry {
                pattern: "When <driver> is torn down",
                description: "Stop the driver's plugins and remove its objects; when no other instance of it runs, wait until the kubelet wiped its slices.",
                example: "When driver \"old\" is torn down",
            },
            Entry {
                pattern: "When <driver> is replaced by <driver>",
                description: "Tear one instance down and start the other on the same sockets, timing the outage.",
                example: "When driver \"old\" is replaced by driver \"new\"",
            },
            Entry {
                pattern: "Then <driver> is registered on every node",
                description: "The kubelet of every node the driver runs on completed the registration handshake with the plugin.",
                example: "Then the driver is registered on every node",
            },
            Entry {
                pattern: "Then the kubelet lists the plugin of <driver> as registered on every node",
                description: "The kubelet's own view, for any driver, hosted or not: its plugin manager lists the driver's registration socket among the registered plugins (its metrics through the API server; a simulated kubelet says what it registered and connected to), within 60 s on every scenario node.",
                example: "Then the kubelet lists the plugin of the driver as registered on every node",
            },
            Entry {
                pattern: "Given a device class [for <driver>] [with parameters <json>][, serving extended resource \"<name>\"]",
                description: "DeviceClass <namespace>[-<name>]-class selecting the driver's devices; parameters reach containers as admin_<k>=<v>. With an extended resource name, pods can ask for the driver's devices in their resource limits (every class also serves `deviceclass.resource.kubernetes.io/<class>`).",
                example: "Given a device class with parameters {\"x\":\"y\"}",
            },
            Entry {
                pattern: "When the device class selector is changed to \"<cel>\" / When the device class selector is restored",
                description: "Change the class's CEL selector, or set it back to the driver's devices.",
                example: "When the device class selector is changed to \"false\"",
            },
            Entry {
                pattern: "Given|When device class \"<name>\" is created as a copy of the device class[, serving extended resource \"<name>\"]",
                description: "Create another class like the scenario's (placeholders allowed in the name); the copy serves the given extended resource, or none.",
                example: "When device class \"${class}-b\" is created as a copy of the device class",
            },
        ],
    },
    Topic {
        title: "The driver under test",
        entries: &[
            Entry {
                pattern: "Given the driver under test",
                description: "The scenario uses the run's driver under test as \"the driver\" with its DeviceClass as \"the device class\": the suite's own (a hosted driver with the profile's devicesPerNode on the scenario's nodes and a class of its own), or the driver `--profile` / `--driver-name` names, installed once for the run (waits until it has devices on the scenario's nodes). Steps that need a hosted plugin (call counts, faults, prepared claims) refuse a driver they do not host.",
                example: "Given the driver under test",
            },
            Entry {
                pattern: "Then pod \"<name>\" runs without a \"<reason>\" event",
                description: "Wait (5 minutes) until the pod runs; fail as soon as an event with that reason appears for it first, with the event's message (e.g. the kubelet's FailedPrepareDynamicResources, naming the driver and its error).",
                example: "Then pod \"tester-1\" runs without a \"FailedPrepareDynamicResources\" event",
            },
            Entry {
                pattern: "When pod \"<name>\" is deleted and the driver lets its claims go",
                description: "Delete the pod and wait (2 minutes) until it is gone; the kubelet finishes a pod only once the driver unprepared its claims, so the failure names the driver and node (KEP-5970 behaviour 6). Where the runner sees the driver's answers and reaches the node (its own driver; any driver behind the interposer), no spec in the node's CDI directory may still define the CDI devices of a claim the driver unprepared, and a repeated unprepare must have been answered alike.",
                example: "When pod \"tester-1\" is deleted and the driver lets its claims go",
            },
            Entry {
                pattern: "When pod \"<name>\" is deleted without waiting",
                description: "Delete the pod (gracefully) and go on at once: on a node that is away the pod stays until its kubelet lets it go. Its node and claims are noted before the deletion, for `Then the driver lets the claims of pod \"<name>\" go`.",
                example: "When pod \"tester-1\" is deleted without waiting",
            },
            Entry {
                pattern: "When pod \"<name>\" is deleted while its claims are being prepared / Then the driver lets the claims of pod \"<name>\" go",
                description: "Delete the pod without waiting, while a NodePrepareResources of the driver is in flight on its node (`When NodePrepareResources is stalled on node N`, `Then NodePrepareResources is called on node N`); refused when none is, or where the runner does not see the driver's calls (tag the scenario `@Interposed`). Its node and claims are noted before the deletion; the `Then` step waits and checks as `When pod ... is deleted and the driver lets its claims go` does.",
                example: "Then the driver lets the claims of pod \"tester-1\" go",
            },
            Entry {
                pattern: "Then the driver publishes devices on <node>",
                description: "The driver's slices hold at least one device for the node, and every pool there has all the slices its latest generation says (KEP-5970 behaviour 2).",
                example: "Then the driver publishes devices on every node",
            },
            Entry {
                pattern: "Given|When the driver's devices are noted / Then the driver publishes the devices noted",
                description: "Remember the device names per node of the driver's slices; later, wait (2 minutes) until the scenario's nodes have exactly those again.",
                example: "Then the driver publishes the devices noted",
            },
            Entry {
                pattern: "Then every container|container \"<c>\"|init container \"<c>\" of pod \"<name>\" has its device",
                description: "The profile's containerCheck holds in the container: each env pattern matches a variable its pod spec does not set and the runtime does not add (what CDI injected), and the check command, if any, exits 0. The suite's own driver: `claim_*=true`. Where the runner sees the driver's answers and reaches the node (its own driver; any driver behind the interposer), the answers must match the claims' allocations, and every CDI device answered for a claim must be defined by a spec in the node's CDI directory: checked from the driver's answer on, so a missing spec fails at once rather than leaving the pod pending; elsewhere these checks are not possible.",
                example: "Then every container of pod \"tester-1\" has its device",
            },
            Entry {
                pattern: "Then all pods are running with their devices",
                description: "Every pod the scenario created runs and each of its containers has its device.",
                example: "Then all pods are running with their devices",
            },
            Entry {
                pattern: "Then container \"<c>\" of pod \"<name>\" has no device",
                description: "None of the container's injected variables matches the profile's env patterns: a container that uses no claim got nothing of the driver's.",
                example: "Then container \"with-resource-1\" of pod \"tester-1\" has no device",
            },
            Entry {
                pattern: "When pods \"<prefix>\" with an inline claim take every device of <node>",
                description: "As many pods as the profile's devicesPerNode, each with a claim for one device and a node selector for the node; waits until all run (tag the scenario `@DevicesPerNode`).",
                example: "When pods \"busy\" with an inline claim take every device of node 0",
            },
            Entry {
                pattern: "When the driver's pod on <node> is restarted",
                description: "Delete the driver's pod on the node (from the DaemonSet of the manifests the runner deployed) and wait until a new one is ready there (tag the scenario `@DriverPods`).",
                example: "When the driver's pod on node 0 is restarted",
            },
            Entry {
                pattern: "When the driver is restarted with one device fewer on every node / When the driver is restarted with all its devices",
                description: "Restart the driver under test telling it (the profile's `deviceCount` flag or variable) to offer one device fewer than `devicesPerNode`, or all of them again: a new rollout of its DaemonSet on real nodes, its processes started again on simulated ones; waits for the rollout. Teardown restores the count and waits for the devices (tag the scenario `@DeviceCount`).",
                example: "When the driver is restarted with one device fewer on every node",
            },
            Entry {
                pattern: "When the driver's DaemonSet is rolled out",
                description: "Roll the driver under test's DaemonSet out again with nothing changed (a template annotation, as `kubectl rollout restart`), the way its update strategy says: with `maxSurge: 1` the new pod starts beside the old one, then the old one goes. Waits until every node runs the new pod alone. Only for a driver the runner deploys from manifests.",
                example: "When the driver's DaemonSet is rolled out",
            },
            Entry {
                pattern: "When the driver is uninstalled / When the driver is installed again",
                description: "Uninstall the driver under test as `helm uninstall` would: delete every object of its profile's manifests, most recent first (its DeviceClass too when they hold it), and wait until they and its pods are gone (on simulated nodes: stop its processes); later, create them again from the same manifests (the nodes have the images) and wait (2 minutes) until it publishes on every ready node what it did at the run's start. Teardown deletes the slices it left behind and installs it again when the scenario does not (tag the scenario `@DriverUninstalls @serial`).",
                example: "When the driver is uninstalled",
            },
            Entry {
                pattern: "Then none of the driver's ResourceSlices remain",
                description: "Watch (2 minutes, as upstream's IsGone) until no ResourceSlice of the driver is left; otherwise fail naming each slice still there with its pool and node (or node selector), and who should have removed it: the kubelet wipes node-local slices, nobody but the driver those without `spec.nodeName`.",
                example: "Then none of the driver's ResourceSlices remain",
            },
            Entry {
                pattern: "Then the driver publishes one device fewer than noted",
                description: "Wait (2 minutes) until each of the scenario's nodes shows the devices noted but one, and no other.",
                example: "Then the driver publishes one device fewer than noted",
            },
            Entry {
                pattern: "When <node> is cut off from the control plane / When <node> is connected again",
                description: "Cut the node off the local cluster's control plane as a network partition would: a real node's packets to and from the API server are dropped (its pods' too), a simulated node's requests and watches stall; what stands for a driver's process on the node keeps its sockets. Its kubelet neither renews its Lease nor sees its pods meanwhile. `connected again` lifts the cut and waits (90 s) until the Node is Ready and schedulable again; teardown does the same for a node left cut, before it deletes the pods. Refused on a kubeconfig cluster (tag the scenario `@OwnNodes`: the node is away for every scenario on it).",
                example: "When node 0 is cut off from the control plane",
            },
            Entry {
                pattern: "Then <node> is reported unreachable",
                description: "Wait (150 s: the node lifecycle controller's grace period is 50 s) until the Node's Ready condition is `Unknown` and it carries the `node.kubernetes.io/unreachable` taint; the failure says what the Node showed last.",
                example: "Then node 0 is reported unreachable",
            },
            Entry {
                pattern: "When <node> is rebooted",
                description: "Reboot a real node of the local cluster: every process and container ends, run-time mounts go, `/run` (with `/var/run/cdi`) starts empty, `/var/lib` and `/etc` are kept; waits (3 minutes) for a new boot ID and the node Ready (tag the scenario `@NodeOperations`).",
                example: "When node 0 is rebooted",
            },
            Entry {
                pattern: "When the kubelet|containerd on <node> is stopped|started|restarted",
                description: "Through the real node's process 1, as its init system would: a started or restarted kubelet is done when it has posted the Node's status again (1 minute), containerd when its socket answers, a stopped daemon when its process is gone; teardown starts a daemon the scenario left stopped, before it deletes the pods (tag the scenario `@NodeOperations @serial`: the node is away for every scenario on it).",
                example: "When the kubelet on node 0 is restarted",
            },
            Entry {
                pattern: "When the kube-apiserver|kube-scheduler|kube-controller-manager is restarted",
                description: "Restart a control-plane component of the local cluster as an operator would: SIGTERM (SIGKILL after 5 s), then the same program started again on the same address, certificates and etcd; done when it answers its readiness probe again. Scenarios in flight ride it out: the runner's requests are tried again while the API server is away (connection errors, 429 and 5xx, for up to a minute), its watches start again. On a kubeconfig cluster the step fails saying it needs the local cluster (tag the scenario `@serial`).",
                example: "When the kube-apiserver is restarted",
            },
            Entry {
                pattern: "Then the kubelet on <node> reports metric \"<name>\": (table | <label> | value |)",
                description: "Read the kubelet's own metrics through the API server's node proxy (30 s until they match): the metric has exactly the table's samples, by the value of the label the first column names; placeholders allowed (tag the scenario `@KubeletMetrics`).",
                example: "Then the kubelet on node 0 reports metric \"dra_resource_claims_in_use\":",
            },
            Entry {
                pattern: "Then pod <name> runs again after the reboot",
                description: "Wait (3 minutes) until every container of the pod restarted and is running and ready again.",
                example: "Then pod \"tester-1\" runs again after the reboot",
            },
        ],
    },
    Topic {
        title: "Claims",
        entries: &[
            Entry {
                pattern: "Given an external claim \"<name>\" [for <driver>] [with admin access]",
                description: "A ResourceClaim with one request `my-request` of the driver's class and opaque config {\"a\":\"b\"} (env user_a=b).",
                example: "Given an external claim \"external-claim\"",
            },
            Entry {
                pattern: "Given an external claim \"<name>\" with spec:",
                description: "A ResourceClaim whose spec is the YAML doc string (placeholders ${class}, ${driver}, ${class:<name>}, ${driver:<name>}, ${namespace}, ${node0}, ... are replaced).",
                example: "Given an external claim \"all\" with spec:",
            },
            Entry {
                pattern: "Then <claim> is allocated|deallocated|not reserved|deleted",
                description: "Wait for the claim's state. <claim> is `claim \"name\"`, `the claim of pod \"name\"` (the claim generated for its inline claim) or `the extended resource claim of pod \"name\"` (the claim the scheduler made for its extended resources).",
                example: "Then the claim of pod \"tester-1\" is deleted",
            },
            Entry {
                pattern: "Then <claim> is allocated with results \"<request>\"[, ...]",
                description: "The allocation's results name exactly these requests (or `request/sub-request`), in order.",
                example: "Then claim \"external-multiclaim\" is allocated with results \"request-1/sub-request-2\", \"request-2\"",
            },
            Entry {
                pattern: "Then <claim> is reserved for pod \"<pod>\"",
                description: "The claim's status.reservedFor names the pod.",
                example: "Then claim \"external-claim\" is reserved for pod \"tester-1\"",
            },
            Entry {
                pattern: "When <claim> is deleted|force-deleted",
                description: "Delete the claim; force-deletion with a grace period of 0. Its finalizer stays: the control plane removes it once no pod reserves the claim.",
                example: "When claim \"external-claim\" is force-deleted",
            },
            Entry {
                pattern: "Then the claim of pod \"<pod>\" has a name shorter than 64 characters",
                description: "The generated claim name is a valid object name.",
                example: "Then the claim of pod \"tester-1\" has a name shorter than 64 characters",
            },
        ],
    },
    Topic {
        title: "Pods",
        entries: &[
            Entry {
                pattern: "When pod \"<name>\" with an inline claim|using claim(s) \"<c>\"[, \"<c2>\" and \"<c3>\"]|without claims is created",
                description: "A pod with container `with-resource`. Inline: a template named after the pod, pod claim `my-inline-claim`. Containers run upstream's busybox test image; without `command` they sleep until stopped (exiting at once on SIGTERM). Optional table | option | value |: containers, containers use the claims, init container (`yes`: an init container `init` with the first container's claims whose script prints its env and fails unless it has `user_a=b`, as upstream's; or `\"k=v\", ...`: check those entries instead; or `prints its env`: check nothing, for a later step to judge its env), command (a `sh -c` script), restart policy, node (index or name; binds without the scheduler), node selector (index or name), grace period, tolerates an unreachable node for (a duration: a toleration of the `node.kubernetes.io/unreachable` NoExecute taint for that long, after which the taint eviction controller evicts the pod from a node reported unreachable; default 300 s), pod claim name, extended resource (`name=quantity[, name=quantity]`, every container), container N extended resources (the same, for one container), device class, cel selector, device toleration (`NoSchedule`, `key:Effect`, `key=value:Effect`), template (`none`: create none; a name: use that existing template), container N claims (`claim[/request], ...`).",
                example: "When pod \"tester-1\" with an inline claim is created",
            },
            Entry {
                pattern: "When <n> pods \"<prefix>\" with an inline claim|using claim \"<c>\" are created",
                description: "Pods <prefix>-1 ... <prefix>-n, with the same optional table.",
                example: "When 5 pods \"tester\" using claim \"external-claim\" are created",
            },
            Entry {
                pattern: "When one pod per node with an inline claim is created",
                description: "Pods tester-1 ... tester-N, one for each of the scenario's nodes.",
                example: "When one pod per node with an inline claim is created",
            },
            Entry {
                pattern: "Then pod \"<name>\" is running|scheduled|unschedulable|completed|failed|gone|pending",
                description: "Wait (5 minutes) until the pod reaches the state; `unschedulable` waits for the scheduler's reason `Unschedulable` and fails if the pod gets scheduled.",
                example: "Then pod \"tester-1\" is running",
            },
            Entry {
                pattern: "Then all pods are <state>",
                description: "Every pod the scenario created reaches the state.",
                example: "Then all pods are scheduled",
            },
            Entry {
                pattern: "Then pod \"<name>\" is running with env \"<k=v>\"[, \"<k=v>\"]... in every container",
                description: "Upstream's TestPod: wait (5 minutes) until the pod runs, then every one of its containers has each entry in its env.",
                example: "Then pod \"tester-1\" is running with env \"admin_x=y\" and \"user_a=b\" in every container",
            },
            Entry {
                pattern: "Then all pods are running with env \"<k=v>\"[, \"<k=v>\"]... in every container",
                description: "The same for every pod the scenario created.",
                example: "Then all pods are running with env \"admin_x=y\" and \"user_a=b\" in every container",
            },
            Entry {
                pattern: "Then each pod in turn is scheduled|running with env \"<k=v>\"... in every container and then deleted",
                description: "For pods created at once that compete for devices: each, in whatever order, gets there (5 minutes per pod), is deleted and gone, which frees its devices for the others.",
                example: "Then each pod in turn is scheduled and then deleted",
            },
            Entry {
                pattern: "Then pod \"<name>\" stays pending|running|terminating for <duration>",
                description: "The pod stays Pending, or Running and not being deleted, or deleted but still there (its kubelet has not let it go), the whole time (checked every 200ms).",
                example: "Then pod \"tester-1\" stays pending for 20s",
            },
            Entry {
                pattern: "When the containers of pod \"<name>\" are restarted",
                description: "End the process of each of the pod's regular containers (`kill -TERM 1` by exec in it; the default command exits at once on SIGTERM) and wait (1 minute) until the kubelet started each again and it is running and ready; the kubelet creates them from the claims it prepared before, without asking the driver, so the claims' CDI devices must still resolve. The pod needs restart policy `Always`. A simulated node has no exec: its kubelet ends the containers itself, with the same status, and creates them again from the CDI specs as they are then.",
                example: "When the containers of pod \"tester-1\" are restarted",
            },
            Entry {
                pattern: "Then pod \"<name>\" is unschedulable with a message containing \"<text>\"",
                description: "PodScheduled=False with the text, never scheduled.",
                example: "Then pod \"tester-1\" is unschedulable with a message containing \"CEL runtime error\"",
            },
            Entry {
                pattern: "Then pod \"<name>\" has restarted at least <n> times",
                description: "A container's restartCount reaches n.",
                example: "Then pod \"tester-1\" has restarted at least 2 times",
            },
            Entry {
                pattern: "Then all pods run on different nodes",
                description: "No two of the scenario's pods share a node.",
                example: "Then all pods run on different nodes",
            },
            Entry {
                pattern: "When pod \"<name>\" is deleted|force-deleted / When all pods are deleted",
                description: "Delete and wait until the pod is gone (force: grace period 0).",
                example: "When pod \"tester-1\" is force-deleted",
            },
            Entry {
                pattern: "When the status of pod \"<name>\" marks its claim as not needed",
                description: "Write resourceClaimStatuses without a claim name, as a controller does for claims it will not create.",
                example: "When the status of pod \"tester-1\" marks its claim as not needed",
            },
            Entry {
                pattern: "Then every container|container \"<c>\"|init container \"<c>\" of pod \"<name>\" has env \"<k=v>\"[ and \"<k=v>\"]",
                description: "The container's environment contains the entries: `env` run by exec in a running container (on simulated nodes, the env the node gave it). An init container must have exited 0 (its own script checked the entries it was built with); the env it printed to its log is then compared, since an exited container cannot be exec'd.",
                example: "Then every container of pod \"tester-1\" has env \"admin_x=y\" and \"user_a=b\"",
            },
            Entry {
                pattern: "Then container \"<c>\" of pod \"<name>\" gets|does not get request \"<request>\" of <claim>",
                description: "The driver's marker env of that claim request (claim_<claim>_<request>=true) is, or is not, in the container: its device reached the container.",
                example: "Then container \"with-resource\" of pod \"tester-1\" gets request \"container-0-request-0\" of the extended resource claim of pod \"tester-1\"",
            },
            Entry {
                pattern: "Then container \"<c>\" of pod \"<name>\" gets|does not get requests \"<request>\"[, \"<request>\"]... of <claim>",
                description: "The same for each of several requests of the claim.",
                example: "Then container \"with-resource-1\" of pod \"tester-1\" gets requests \"container-1-request-0\", \"container-1-request-1\" of the extended resource claim of pod \"tester-1\"",
            },
            Entry {
                pattern: "Then pod \"<name>\" has extended resource requests[ in this order]: (table | container | resource | request |)",
                description: "The pod's extendedResourceClaimStatus maps exactly these container resources to requests of its extended resource claim (in any order; with `requests in this order:` in the table's order, as upstream's ExtendedResourceClaimStatus test checks that the i-th mapping names request container-0-request-i).",
                example: "Then pod \"tester-1\" has extended resource requests:",
            },
            Entry {
                pattern: "Then pod \"<name>\" has no extended resource claim",
                description: "The scheduler made no claim for the pod's extended resources (a device plugin serves them, or it asks for zero).",
                example: "Then pod \"tester-1\" has no extended resource claim",
            },
            Entry {
                pattern: "Then container \"<c>\" of pod \"<name>\" has exactly the driver env \"<k=v>\", ...",
                description: "The container's admin_/user_/claim_ variables are exactly these.",
                example: "Then container \"with-resource\" of pod \"tester-1\" has exactly the driver env \"user_a=b\", \"claim_c_my_request=true\"",
            },
            Entry {
                pattern: "Then pod \"<name>\" got no \"<reason>\" event",
                description: "No event with that reason exists for the pod now (checked once, as upstream does once the pod runs).",
                example: "Then pod \"tester-1\" got no \"FailedPrepareDynamicResources\" event",
            },
            Entry {
                pattern: "Then pod \"<name>\" gets a \"<reason>\" event containing \"<text>\"",
                description: "An event with that reason and message appears for the pod (10 minutes). The text may name `${old uid:<claim>}`: the UID of a claim a plugin still has prepared under the name of a claim the scenario re-created.",
                example: "Then pod \"tester-2\" gets a \"FailedPrepareDynamicResources\" event containing \"still exists\"",
            },
        ],
    },
    Topic {
        title: "Plugin calls",
        entries: &[
            Entry {
                pattern: "When <method> [of <driver>] is made to fail|no longer fails on <node>",
                description: "Inject gRPC UNKNOWN \"injected error\" into the method (all API versions) or stop. <method>: NodePrepareResources, NodeUnprepareResources, GetInfo, NotifyRegistrationStatus, or NodeWatchResources (the health stream fails as it opens; one already open goes on). <node>: `node N`, `every node`, `the node of pod \"p\"`.",
                example: "When NodePrepareResources is made to fail on node 0",
            },
            Entry {
                pattern: "When <method> [of <driver>] is made to fail after the driver answers on <node>",
                description: "The call reaches the driver, which does the work; the kubelet gets gRPC UNKNOWN \"injected error\" instead of its answer. Ended by `no longer fails`.",
                example: "When NodePrepareResources is made to fail after the driver answers on node 0",
            },
            Entry {
                pattern: "When <method> [of <driver>] is delayed by <duration> on <node> / is no longer delayed on <node>",
                description: "Hold each call that long before it reaches the driver (e.g. `5s`, `500ms`).",
                example: "When NodePrepareResources is delayed by 5s on node 0",
            },
            Entry {
                pattern: "When <method> [of <driver>] has its connection cut after the driver answers on <node> / is no longer cut on <node>",
                description: "The call reaches the driver, which does the work; then the connection the call came on is closed instead of answering, as a plugin that crashes mid-call.",
                example: "When NodePrepareResources has its connection cut after the driver answers on node 0",
            },
            Entry {
                pattern: "When <method> [of <driver>] is stalled|released on <node>",
                description: "Hold NodePrepareResources/NodeUnprepareResources calls until released.",
                example: "When NodeUnprepareResources is stalled on node 0",
            },
            Entry {
                pattern: "Then <method> [of <driver>] is called on <node>",
                description: "Wait until the method was called at least once, and remember the count. Also for NodeWatchResources (the kubelet's health stream, counted when it opens).",
                example: "Then NodePrepareResources is called on node 0",
            },
            Entry {
                pattern: "Then <method> [of <driver>] has been called again on <node>",
                description: "Wait (2 minutes, upstream's retry timeout) until there are more calls than when last counted (by `is called` or an earlier `has been called again`, which moves the count on).",
                example: "Then NodePrepareResources has been called again on node 0",
            },
            Entry {
                pattern: "Then <method> [of <driver>] has succeeded on <node>",
                description: "Wait (2 minutes) until a call of the method completed without an error, for the call or any of its claims (upstream's `NodePrepareResourcesSucceeded`).",
                example: "Then NodePrepareResources has succeeded on node 0",
            },
            Entry {
                pattern: "Then <method> [of <driver>] is not called again on <node> for <duration>",
                description: "The count when the step begins holds for the whole duration (upstream's `Consistently` on the call count).",
                example: "Then NodePrepareResources is not called again on node 0 for 120s",
            },
            Entry {
                pattern: "Then <method> [of <driver>] was called <n> time(s) on <node>",
                description: "Exact call count, summed over API versions.",
                example: "Then NodePrepareResources was called 0 times on node 0",
            },
            Entry {
                pattern: "Then the kubelet opened <n> connection(s) to the DRA socket of <driver> on <node>",
                description: "Exact count of the connections the kubelet opened to the plugin's DRA socket since the plugin started (a kubelet keeps one for all its calls, health stream included).",
                example: "Then the kubelet opened 1 connection to the DRA socket of the driver on node 0",
            },
            Entry {
                pattern: "Then <method> [of <driver>] was called through the v1|v1beta1|v1alpha4|v1alpha1 API on <node>",
                description: "The kubelet used that gRPC API version (NodeWatchResources: the health API, v1 or v1alpha1).",
                example: "Then NodePrepareResources of driver \"other\" was called through the v1beta1 API on the node of pod \"tester-1\"",
            },
            Entry {
                pattern: "When the plugin on <node> unprepares <claim> by hand",
                description: "The plugin forgets the claim (the one of that name on the API server) and removes its CDI files without a NodeUnprepareResources call, as upstream does after a pod whose claim the kubelet was told not to unprepare.",
                example: "When the plugin on node 0 unprepares claim \"external-claim\" by hand",
            },
            Entry {
                pattern: "Then the plugin on <node> has prepared <claim>",
                description: "The plugin holds the claim as prepared.",
                example: "Then the plugin on node 0 has prepared claim \"external-claim\"",
            },
            Entry {
                pattern: "Then no plugin has prepared claims",
                description: "Wait (1 minute) until every plugin unprepared everything.",
                example: "Then no plugin has prepared claims",
            },
            Entry {
                pattern: "Then the plugin on <node> has prepared only the old claim|the current claim \"<name>\"",
                description: "The plugin has exactly that claim prepared, told from its re-created namesake by UID (the old one: the UID it had when the scenario created it); checked at once, not waited for.",
                example: "Then the plugin on node 0 has prepared only the current claim \"external-claim\"",
            },
        ],
    },
    Topic {
        title: "Device health",
        entries: &[
            Entry {
                pattern: "Then the health stream of <driver> on <node> went through the API of its kubelet's version",
                description: "Upstream's check for a driver serving every health API: the kubelet's version in its Node says which stream it opens (v1 from 1.37, v1alpha1 before); that one was opened and no other.",
                example: "Then the health stream of the driver on node 0 went through the API of its kubelet's version",
            },
            Entry {
                pattern: "Then no health stream of <driver> was opened through the v1|v1alpha1 API on <node>",
                description: "The kubelet subscribes on one health API version only: it never called NodeWatchResources of that version (served or not).",
                example: "Then no health stream of driver \"old\" was opened through the v1 API on node 0",
            },
            Entry {
                pattern: "When <driver> reports device \"<device>\" on <node> as Healthy|Unhealthy|Unknown[ with message \"<m>\"]",
                description: "The plugin's health stream reports the device so (its pool is found from the driver's resources).",
                example: "When the driver reports device \"device-00\" on node 0 as Unhealthy with message \"ECC errors\"",
            },
            Entry {
                pattern: "When <driver> reports the device of claim \"<claim>\" on <node> as Healthy|Unhealthy|Unknown with message \"<m>\"",
                description: "The same for the one device of the driver allocated to the claim (fails unless there is exactly one), as upstream reports on whichever device the scheduler chose.",
                example: "When the driver reports the device of claim \"health-test-claim\" on the node of pod \"tester-1\" as Healthy with message \"ok\"",
            },
            Entry {
                pattern: "Then the devices of pod \"<name>\" are reported Healthy|Unhealthy|Unknown[ with message \"<m>\"][ within <duration>]",
                description: "Wait (1 minute, or the duration given) until every device of the pod's claims shows that health (and message) in its container statuses' allocatedResourcesStatus.",
                example: "Then the devices of pod \"tester-1\" are reported Unhealthy with message \"ECC errors\"",
            },
        ],
    },
    Topic {
        title: "Node-allocatable resources",
        entries: &[
            Entry {
                pattern: "Given a driver with node-allocatable devices \"<devices>\"[, <setting>]...",
                description: "A driver whose plugin publishes, on each of its nodes (pool = node name), one slice of devices carrying nodeAllocatableResources (gate DRANodeAllocatableResources), as upstream's driver publishes its custom devices: `name: <resource> <quantity> per device|pod|container [+ ...], ...`, devices separated by `;`. `per device` is a mapping (deviceMultiplier), `per pod` and `per container` an overhead. A slice whose nodeAllocatableResources the API server drops (the gate is off) fails the step. Takes the settings of `a driver with`.",
                example: "Given a driver with node-allocatable devices \"device-01: memory 1000Mi per device, cpu 1 per device\"",
            },
            Entry {
                pattern: "When pod \"<name>\" with these containers is created: (table | container | resources | claims |)",
                description: "Upstream's cgroup test pod: busybox containers sleeping until stopped, restartPolicy Never, the node's /sys/fs/cgroup mounted at /sysfscgroup in the first container. resources: `cpu 1/2, memory 1Gi/2Gi` (request/limit), `cpu 1000m` (request only), `cpu -/2` (limit only) or `none`; claims: external claims of those names, comma-separated, or `-`. A row named `pod` gives pod-level resources and claims no container uses.",
                example: "When pod \"tester-1\" with these containers is created:",
            },
            Entry {
                pattern: "Then the cgroups of pod \"<name>\" are: (table | cgroup | values |)",
                description: "The pod's cgroup (row `pod`, found by its UID under the mounted tree) and each named container's own cgroup, read by exec, hold what the kubelet writes for these resources: `cpu request Q, cpu limit Q, memory limit Q` or `none` (cpu.shares/cpu.weight, cpu.cfs_quota_us/cpu.max, memory.limit_in_bytes/memory.max; a container row without a cpu request uses the container's own; an unset memory limit is not checked, as upstream).",
                example: "Then the cgroups of pod \"tester-1\" are:",
            },
            Entry {
                pattern: "Then container \"<c>\" of pod \"<name>\" has the oom_score_adj of its QoS class for a memory request of \"<quantity>\"",
                description: "/proc/1/oom_score_adj in the container, read by exec, is -997 (Guaranteed), 1000 (BestEffort), or for Burstable 1000 - 1000 * request / node memory capacity (at least 2), the request including the container's DRA share.",
                example: "Then container \"c1\" of pod \"tester-1\" has the oom_score_adj of its QoS class for a memory request of \"1524Mi\"",
            },
            Entry {
                pattern: "When pod \"<name>\" is resized to: (table | container | resources |)",
                description: "Patch the pod's resize subresource (strategic merge) to these resources (row `pod`: pod-level; what a row leaves out is removed), then wait (5 minutes) until the kubelet actuated it: no PodResizePending/PodResizeInProgress condition, status.observedGeneration caught up, pod Ready; fails at once when the resize is infeasible, and when a container restarted for it.",
                example: "When pod \"tester-1\" is resized to:",
            },
            Entry {
                pattern: "Then pod \"<name>\" has allocated resources: (table | allocation | resources |)",
                description: "status.allocatedResources of the pod (row `pod`) and of each named container are exactly these (`cpu 1500m, memory 2000Mi`; `none`), compared as quantities; `(not checked)` skips a row.",
                example: "Then pod \"tester-1\" has allocated resources:",
            },
        ],
    },
    Topic {
        title: "Device metadata",
        entries: &[
            Entry {
                pattern: "Then container \"<c>\" of pod \"<p>\" reads the v1beta1|v1alpha1 device metadata of request \"<r>\" of <claim>[ written by <driver>]",
                description: "Read by exec the request's metadata file where the container sees it (`/var/run/kubernetes.io/dra-device-attributes/resourceclaims/<claim>/<request>/<driver>-metadata.json`, or `resourceclaimtemplates/<pod claim name>/...` for a claim from a template), and check it as upstream does: the first object of a version a reader knows decodes and validates, has that API version, the claim's name, namespace and UID, generation 1, the pod claim name only for a claim from a template, exactly that one request, and devices of the driver carrying the string attributes `driverName`, `pool` and `device`. Needs a driver `writing device metadata`.",
                example: "Then container \"with-resource\" of pod \"tester-1\" reads the v1beta1 device metadata of request \"my-request\" of claim \"external-claim\"",
            },
            Entry {
                pattern: "Then container \"<c>\" of pod \"<p>\" cannot read the device metadata of request \"<r>\" of <claim>",
                description: "`cat` of the request's metadata file fails in the container (it does not get the request's devices, so the file is not mounted there).",
                example: "Then container \"with-resource-1\" of pod \"tester-1\" cannot read the device metadata of request \"req0\" of claim \"external-claim\"",
            },
        ],
    },
    Topic {
        title: "Device plugins",
        entries: &[
            Entry {
                pattern: "Given the sample device plugin is deployed on node <n>|nodes <n> and <m>",
                description: "Upstream's sample device plugin (two `example.com/resource`) as DaemonSet `sample-device-plugin`, labelled `k8s-app=sample-device-plugin` as upstream's, whose pods run only on those nodes; waits (5 minutes) until it runs on each. First it waits until the plugin of earlier scenarios is gone and the scenario's other nodes advertise no `example.com/resource`: only one copy may run at a time (tag the scenario `@serial`). Needs a container runtime. Upstream uninstalls it with `When DaemonSet objects labelled \"k8s-app=sample-device-plugin\" are deleted as a collection`.",
                example: "Given the sample device plugin is deployed on node 1",
            },
            Entry {
                pattern: "Given|Then node <n> has <count> allocatable \"<resource>\"",
                description: "Wait (5 minutes) until the Node's status.allocatable lists the resource with exactly that quantity. A resource the kubelet stopped advertising stays listed with 0; one it never advertised is not 0.",
                example: "Then node 0 has 0 allocatable \"example.com/resource\"",
            },
            Entry {
                pattern: "Then the pod on node <n> has no extended resource claim",
                description: "The one pod of the scenario's own on that node (the scheduler chose it among like pods) has no claim for its extended resources: a device plugin serves them.",
                example: "Then the pod on node 1 has no extended resource claim",
            },
            Entry {
                pattern: "Then container \"<c>\" of the pod on node <n> gets request \"<request>\" of its extended resource claim",
                description: "The one pod of the scenario's own on that node has an extended resource claim (it fails at once if it has none: a device plugin served it), and the DRA driver's env of that request is in the container.",
                example: "Then container \"with-resource\" of the pod on node 0 gets request \"container-0-request-0\" of its extended resource claim",
            },
        ],
    },
    Topic {
        title: "Workloads and device taint rules",
        entries: &[
            Entry {
                pattern: "Given a workload \"<name>\" with a pod group with an inline claim|using claim(s) \"<c>\"[, ...]|without claims",
                description: "A Workload with one PodGroupTemplate `group` and the PodGroup `<name>-group-0` made from it, both carrying the claims: an external claim as pod-group claim `resource-claim` (several keep their names), or a template named after the workload as `my-inline-claim`. Optional table | device toleration | <toleration> | shapes that template.",
                example: "Given a workload \"tester-0\" with a pod group using claim \"external-claim\"",
            },
            Entry {
                pattern: "When pod \"<name>\" joins the pod group of workload \"<w>\"",
                description: "A pod in the workload's PodGroup (`spec.schedulingGroup`) listing the group's claims, each used by its container.",
                example: "When pod \"tester-1\" joins the pod group of workload \"tester-0\"",
            },
            Entry {
                pattern: "Then pod \"<name>\" uses the claims of the pod group of workload \"<w>\"",
                description: "Each of the group's claims resolves, for the pod, to the group's ResourceClaim (not one of its own), and that claim is reserved for the PodGroup.",
                example: "Then pod \"tester-1\" uses the claims of the pod group of workload \"tester-0\"",
            },
            Entry {
                pattern: "Given|When pod \"<name>\" is kept by finalizer \"<f>\"",
                description: "Add the finalizer, so the pod stays visible once deleted; teardown removes it (retried for 30 s) before the pods are deleted.",
                example: "When pod \"tester-1\" is kept by finalizer \"e2e-test/dont-delete-me\"",
            },
            Entry {
                pattern: "When a DeviceTaintRule for the devices of <driver> with taint \"<key>=<value>:<Effect>\" is created",
                description: "A DeviceTaintRule (generateName `device-taint-rule-<namespace>-`) selecting every device of the driver, with that taint and no timeAdded; deleted at teardown.",
                example: "When a DeviceTaintRule for the devices of the driver with taint \"test.example.com/evict=now:NoExecute\" is created",
            },
            Entry {
                pattern: "Then the taint of the DeviceTaintRule was added within a minute of now",
                description: "The server set the taint's timeAdded of the scenario's last DeviceTaintRule to within a minute of now.",
                example: "Then the taint of the DeviceTaintRule was added within a minute of now",
            },
            Entry {
                pattern: "Then pod \"<name>\" is evicted by the device taint manager",
                description: "Wait (5 minutes) until the pod is being deleted; it must then carry the condition DisruptionTarget=True with reason DeletionByDeviceTaintManager and upstream's message. Needs a finalizer on the pod.",
                example: "Then pod \"tester-1\" is evicted by the device taint manager",
            },
            Entry {
                pattern: "When replica set \"<name>\" adopts pod \"<pod>\"",
                description: "Label the pod and create a ReplicaSet of 1 pod selecting it by that label, whose template is the pod's spec (its claims, from the same template) without where it was placed (node, node selector), restarting always; wait (1 minute) until the ReplicaSet controls the pod. The pod keeps its name for the steps about it; a pod the ReplicaSet makes in its place goes wherever the scheduler finds a device. Deleted at teardown before the pods.",
                example: "When replica set \"tester\" adopts pod \"tester-1\"",
            },
            Entry {
                pattern: "Then replica set \"<name>\" has <n> running pod(s) on <node>",
                description: "Wait (5 minutes) until exactly n of the ReplicaSet's pods that are not being deleted run on the node; then each of their claims must be allocated for that node and reserved for its pod. A timeout says each live pod's phase, node and conditions.",
                example: "Then replica set \"tester\" has 1 running pod on node 1",
            },
            Entry {
                pattern: "Then pod \"<name>\" is evicted by the taint eviction controller",
                description: "Wait (2 minutes) until the pod is being deleted with the condition DisruptionTarget=True, reason DeletionByTaintManager, that the taint eviction controller writes when a NoExecute taint (a node reported unreachable) outlasts the pod's toleration; a deletion without it fails. The pod's node and claims are noted while it is still there, for `the claim of pod ...` and `Then the driver lets the claims of pod ... go` once it is gone.",
                example: "Then pod \"tester-1\" is evicted by the taint eviction controller",
            },
        ],
    },
    Topic {
        title: "ResourceSlices",
        entries: &[
            Entry {
                pattern: "Then the slice of <driver> with device \"<d>\" on <node> has: (YAML doc string)",
                description: "The driver's slice on the node that holds that device (its name is generated) has every field of the doc string, as the API server kept it; lists must be as long as written.",
                example: "Then the slice of the driver with device \"gpu-0\" on node 0 has:",
            },
            Entry {
                pattern: "Then <driver> publishes exactly these devices: (table | node | device | attributes |)",
                description: "Waits (30 s) until the driver's slices are one per node the table names, each holding exactly the table's devices of that node with exactly their attributes (the table of `a driver with these devices`), and no other slice holds devices. Upstream checks so before a pod whose scheduling depends on the exact devices.",
                example: "Then the driver publishes exactly these devices:",
            },
            Entry {
                pattern: "Then <driver> publishes one slice per node with devices \"<d>\"[, ...]",
                description: "Each node has exactly one slice of the driver: owned by the Node (controller, no blockOwnerDeletion), pool = node, count 1, and these devices compared device by device (a device with attributes, capacity or taints is not a bare name).",
                example: "Then the driver publishes one slice per node with devices \"device-00\"",
            },
            Entry {
                pattern: "Then <driver> keeps publishing them for <duration>",
                description: "The node-local slices stay as they are the whole time.",
                example: "Then the driver keeps publishing them for 20s",
            },
            Entry {
                pattern: "When the slices of <driver> are noted / Then the slices of <driver> are unchanged",
                description: "Compare the driver's slices (names, UIDs, specs) with the noted ones.",
                example: "Then the slices of driver \"new\" are unchanged",
            },
            Entry {
                pattern: "Then the slices of <driver> stay unchanged for <duration>",
                description: "The driver's slices stay as noted for the whole duration (upstream's `Consistently` on the list).",
                example: "Then the slices of the driver stay unchanged for 1m",
            },
            Entry {
                pattern: "When the DRA service of <driver> starts|stops on <node>",
                description: "Start or stop a node's DRA service alone: its socket, server and the slices it publishes (stopped: left for the kubelet to wipe); registration stays, as upstream's DRA service beside its registrar. With the driver setting `with its DRA service started after registration` it first starts here.",
                example: "When the DRA service of the driver starts on node 0",
            },
            Entry {
                pattern: "When the DRA socket of <driver> on <node> is blocked|unblocked",
                description: "Blocked: the socket file stays where the kubelet found it, but every connection to it is closed as soon as it is accepted and the open ones are cut, as when a plugin hangs; neither connections nor calls are counted. Unblocked: connections reach the DRA service again (the kubelet reconnects with gRPC's backoff). Only the suite's own drivers.",
                example: "When the DRA socket of the driver on node 0 is blocked",
            },
            Entry {
                pattern: "Then the registration socket of <driver> on <node> answers",
                description: "GetInfo on the driver's registration socket, connected as a process on the node would (through the node's host; directly on simulated nodes), answers within 10 s with the driver's name. A driver's process outlives the kubelet: its socket answers while the kubelet is stopped. Only the suite's own drivers.",
                example: "Then the registration socket of the driver on node 0 answers",
            },
            Entry {
                pattern: "Then the outage was shorter than the kubelet's wiping delay",
                description: "After `is replaced by`: fails when the driver was gone as long as the kubelet's slice wiping delay (30s on a kubelet, `--wipe-delay` on simulated nodes).",
                example: "Then the outage was shorter than the kubelet's wiping delay",
            },
            Entry {
                pattern: "Then the slices of <driver> are removed",
                description: "IsGone: wait (2 minutes) until no slice of the driver is left.",
                example: "Then the slices of driver \"new\" are removed",
            },
            Entry {
                pattern: "Then the driver publishes pool \"<pool>\" for all nodes / When the slice of pool \"<pool>\" is deleted / Then the slice of pool \"<pool>\" is recreated with a new UID",
                description: "An all-nodes pool kept in place by the driver: exactly one slice of the pool, for all nodes, resourceSliceCount 1, with the driver's devices device by device (again after the re-creation).",
                example: "Then the slice of pool \"all-nodes-pool\" is recreated with a new UID",
            },
            Entry {
                pattern: "Then <driver> publishes pool \"<pool>\" in <n> slice(s) with <m> device(s)",
                description: "Wait (1 minute) until the pool is exactly n slices holding m devices; fails at once if they disagree on resourceSliceCount or generation, or name a device twice. A network pool is split at the API limit of 128 devices per slice (64 with taints), slices <driver>-0, <driver>-1, ...",
                example: "Then the driver publishes pool \"network\" in 10 slices with 1280 devices",
            },
            Entry {
                pattern: "Then a ResourceSlice controller publishes <n> maximum-size slice(s), rests for <duration> and shrinks them to one empty slice",
                description: "Upstream's ResourceSlice controller check in one step (the controller lives only as long as the step): a controller for a driver of its own publishes n slices of 128 devices with 32 attributes each, names and values of maximum length; each is 600 KiB to 1 MiB in protobuf (a table row `| slice size in protobuf | <min> to <max> KiB |` states other bounds); the driver has no slice beyond the n; the controller made exactly n creates (any further write fails at once) and then nothing for the duration; asked for one empty slice, it rewrites one of the n as that one and deletes the others (n creates, 1 update, n-1 deletes, as upstream's controller), and rests again. Its slices are deleted at the end, pass or fail.",
                example: "Then a ResourceSlice controller publishes 10 maximum-size slices, rests for 20s and shrinks them to one empty slice",
            },
        ],
    },
    Topic {
        title: "Pool status",
        entries: &[
            Entry {
                pattern: "When a pool status request for <driver>|driver name \"<name>\"[ with pool name \"<pool>\"][ and limit <n>] is created",
                description: "A ResourcePoolStatusRequest (resource.k8s.io/v1alpha3) for the driver's pools, or for any driver name; optionally only one pool, or at most n pools listed. It becomes \"the pool status request\" of the steps below (placeholders allowed); teardown deletes it.",
                example: "When a pool status request for the driver with pool name \"${node0}\" is created",
            },
            Entry {
                pattern: "Then the pool status request reports: (table | field | value |)",
                description: "Wait (15 s) for the status the control plane sets and check it: `pool count`, `pools` (names, in any order), `pools listed` (how many), `condition <Type>` (that condition's status). Values: the value, `none` (absent or empty), `set` (present; a list: not empty), `more than N`. While the status differs, a fresh request with the same spec is made, for up to a minute (as upstream); every check made on the request so far must hold on the fresh one.",
                example: "Then the pool status request reports:",
            },
            Entry {
                pattern: "Then pool \"<pool>\" in the pool status request has: / Then every pool in the pool status request has: (table | field | value |)",
                description: "The same for one listed pool (which must be listed), or for every one (at least one listed): `driver`, `generation`, `resource slice count`, `total devices`, `allocated devices`, `available devices`, `unavailable devices`, `node name`, `validation error`, `partition summary`, `shareable summary`, `fully available devices`, `partially available devices`, `shareable capacity` (each capacity as `<name> total=<q> consumed=<q> available=<q>`).",
                example: "Then pool \"network\" in the pool status request has:",
            },
            Entry {
                pattern: "Then pool \"<pool>\" in the pool status request has partition types: (table | attribute | type | total | allocatable |)",
                description: "The pool's partitionSummary holds exactly these entries, in any order; checked and re-requested as above.",
                example: "Then pool \"partitioned\" in the pool status request has partition types:",
            },
            Entry {
                pattern: "Then the pool status request stays unchanged for <duration> / Then <Kind> \"<name>\" stays unchanged for <duration>",
                description: "Once the request's status is set (30 s), a watch must see no change of it for the duration, and its resourceVersion must be the same when read again after (the request is a one-shot snapshot). Also for any object the step library finds by kind and name.",
                example: "Then the pool status request stays unchanged for 5s",
            },
        ],
    },
    Topic {
        title: "Manifests and API checks",
        entries: &[
            Entry {
                pattern: "Given|When the following objects are created:",
                description: "Create the objects of the YAML doc string (multi-document; namespaced ones go to the scenario's namespace; cluster-scoped ones are deleted at teardown).",
                example: "Given the following objects are created:",
            },
            Entry {
                pattern: "When <Kind> \"<name>\" is patched with: / When the status of <Kind> \"<name>\" is patched [as <identity>] with:",
                description: "JSON merge patch (YAML doc string) of an object, or of its status (as the admin unless said otherwise; retried for up to a minute while RBAC still forbids it). Objects are those the scenario created from manifests, and Pods, ResourceClaims and ResourceClaimTemplates of its namespace and DeviceClasses, ResourceSlices and DeviceTaintRules by name (so for all object steps below).",
                example: "When DeviceClass \"${namespace}-crud\" is patched with:",
            },
            Entry {
                pattern: "When <Kind> \"<name>\" is patched with a(n) JSON merge|strategic merge|JSON|apply patch: / When the status of <Kind> \"<name>\" is patched with a(n) ... patch:",
                description: "A patch of that type (YAML doc string; a JSON patch is a list of operations; any other patch gets the object's apiVersion, kind, name, namespace and UID filled in, as upstream's conformance helper does; an apply patch is forced, field manager dra-e2e), with strict field validation, of the object or its status.",
                example: "When ResourceClaim \"crud-claim\" is patched with an apply patch:",
            },
            Entry {
                pattern: "When <Kind> \"<name>\" is updated with: / When the status of <Kind> \"<name>\" is updated [as <identity>] with:",
                description: "Read the object (or its status), merge the YAML doc string in, write it back whole (PUT; as the admin unless said otherwise, retried for up to a minute while RBAC still forbids it); the write must give a new resourceVersion and return what was sent (as `has:` checks). A conflict (someone else wrote it meanwhile) reads and writes again, for up to 30 s, pausing from 50 ms to 1 s.",
                example: "When the status of ResourceClaim \"crud-claim\" is updated with:",
            },
            Entry {
                pattern: "Then the status of <Kind> \"<name>\" has:",
                description: "Like `has:`, read through the status subresource.",
                example: "Then the status of ResourceClaim \"crud-claim\" has:",
            },
            Entry {
                pattern: "Then listing <Kind> objects labelled \"<k=v>\" finds \"<name>\"[, ...]",
                description: "A list with that label selector (in the scenario's namespace when namespaced) holds exactly these objects.",
                example: "Then listing ResourceClaim objects labelled \"crud=${namespace}\" finds \"crud-claim\"",
            },
            Entry {
                pattern: "When <Kind> objects labelled \"<k=v>\" are deleted as a collection",
                description: "One delete-collection request; a watch opened before it must see every object it listed deleted (1 minute).",
                example: "When ResourceClaim objects labelled \"crud=${namespace}\" are deleted as a collection",
            },
            Entry {
                pattern: "Then patching the status of <Kind> \"<name>\" as <identity> fails with \"<text>\":",
                description: "Retried for up to a minute until the status patch fails with the text (RBAC takes a moment to apply).",
                example: "Then patching the status of ResourceClaim \"external-claim\" as the plugin on node 0 fails with \"cannot arbitrary-node:patch\":",
            },
            Entry {
                pattern: "Then updating the status of <Kind> \"<name>\" as <identity> is refused as invalid with \"<text>\":",
                description: "Reads the object as the admin, merges the YAML doc string into its status and writes it back whole (PUT, upstream's UpdateStatus) as the identity, until the API server refuses it as Invalid (422) with an error containing the text (RBAC and admission take a moment to apply).",
                example: "Then updating the status of ResourceClaim \"external-claim\" as the plugin on node 0 is refused as invalid with \"cannot arbitrary-node:update\":",
            },
            Entry {
                pattern: "Then <Kind> \"<name>\" has:",
                description: "Every field of the YAML doc string is in the object with that value; the object may have more fields, and a list more entries after those expected (its first entries must hold the expected ones, in order). `null` expects the field absent (or null). A failure names the first differing path.",
                example: "Then ResourceSlice \"${namespace}-crud\" has:",
            },
            Entry {
                pattern: "Then <Kind> \"<name>\" has \"<path>\" equal to:",
                description: "The field at the dotted path (e.g. `status.devices`) equals the YAML doc string exactly: nothing missing, nothing extra.",
                example: "Then ResourceClaim \"external-claim\" has \"status.devices\" equal to:",
            },
            Entry {
                pattern: "Then listing <Kind> objects finds \"<name>\"",
                description: "A list of that type (in the scenario's namespace when namespaced) contains the object.",
                example: "Then listing DeviceClass objects finds \"${namespace}-crud\"",
            },
            Entry {
                pattern: "When <Kind> \"<name>\" is deleted",
                description: "Delete the object and wait (1 minute) until it is gone.",
                example: "When ResourceClaimTemplate \"crud-template\" is deleted",
            },
            Entry {
                pattern: "Then <Kind> \"<name>\" no longer exists",
                description: "Wait (2 minutes) until the object is deleted by someone else: a controller, the kubelet.",
                example: "Then ResourceSlice \"${namespace}-node\" no longer exists",
            },
            Entry {
                pattern: "When <Kind> \"<name>\" is marked for deletion",
                description: "One delete request, not waiting for the object to go: a finalizer keeps it, terminating, for the steps after.",
                example: "When Pod \"tester-1\" is marked for deletion",
            },
            Entry {
                pattern: "Given a watch on <Kind> objects labelled \"<k=v>\"",
                description: "Open a watch (upstream's conformance helper opens an informer) before the objects exist: none may be listed yet. Kinds beyond the steps' own resolve through the preferred version of resource.k8s.io.",
                example: "Given a watch on DeviceClass objects labelled \"crud=${namespace}\"",
            },
            Entry {
                pattern: "Then the watch sees <Kind> \"<name>\" added|modified|deleted",
                description: "The watch's events since the check before, as upstream matches them: `added` is ADDED (then MODIFIED by others may follow), `modified` is one or more MODIFIED, `deleted` is any MODIFIED then DELETED; every event about this object, with the UID it was added with, resource versions never going back; the event must come within 10 s.",
                example: "Then the watch sees DeviceClass \"${namespace}-crud\" modified",
            },
            Entry {
                pattern: "Then the CRUD conformance test of <group/version> <resource> passes with:",
                description: "Upstream's CRUD conformance procedure (TestResource) for the resource discovery lists under that name. The YAML doc string is the test case: `initial` (the object; named `test`, a cluster-scoped one `test-<namespace>`), `update` and optionally `updateStatus` (merged into the object read back, written whole), `patches` and `statusPatches` (each `type: strategic-merge|apply|json-merge|json` and `data`, each applied alone to a deleted and re-created object) and `verifyContent` (every field sent must come back). After every call a cluster-wide and a namespace watch must hold exactly the object and have seen only upstream's events for it, resource versions never going back. The object is deleted at the end, pass or fail.",
                example: "Then the CRUD conformance test of resource.k8s.io/v1 deviceclasses passes with:",
            },
            Entry {
                pattern: "Then creating the following objects as <identity> fails with \"<text>\":|succeeds:",
                description: "Retried for up to a minute (admission and RBAC take a moment). <identity>: `the admin`, `the plugin on node N`, `the plugin on node \"name\"` (the driver's plugin identity with that node in its token), `service account \"name\"` (of the scenario's namespace, on no node).",
                example: "Then creating the following objects as the plugin on node 0 fails with \"may not modify\":",
            },
            Entry {
                pattern: "Then creating the following objects as <identity> is denied with \"<text>\":",
                description: "Tried once: the first request must fail with the text (for policies that must hold from the start; nothing is retried).",
                example: "Then creating the following objects as the plugin on node 0 is denied with \"may not modify\":",
            },
            Entry {
                pattern: "Then updating|deleting ResourceSlice \"<name>\" as <identity> fails with \"<text>\"|succeeds",
                description: "Permission checks of ResourceSlice writes, tried once. Updating is a PUT of the object as the admin reads it, with a label changed.",
                example: "Then deleting ResourceSlice \"s\" as the plugin on node \"n\" succeeds",
            },
            Entry {
                pattern: "Given|When the namespace is labelled \"<k=v>\"",
                description: "Label the scenario's namespace.",
                example: "When the namespace is labelled \"resource.kubernetes.io/admin-access=true\"",
            },
            Entry {
                pattern: "Given|Then resource quota \"<name>\" reports <n> used for \"<resource>\"",
                description: "Wait (1 minute) until the quota controller reports that usage (placeholders allowed in the resource name).",
                example: "Then resource quota \"object-count\" reports 1 used for \"count/resourceclaims.resource.k8s.io\"",
            },
            Entry {
                pattern: "Then resource quota \"<name>\" has status: (table | resource | hard | used |)",
                description: "Waits (60 s) until the quota's status has exactly these resources, hard and used (compared as quantities), and no others: upstream's comparison of the whole status.",
                example: "Then resource quota \"test-quota\" has status:",
            },
            Entry {
                pattern: "Then daemonset \"<name>\" runs a pod on node <n>",
                description: "A Running pod of the DaemonSet on the node, and a consistent DaemonSet status.",
                example: "Then daemonset \"monitor\" runs a pod on node 0",
            },
        ],
    },
];

/// The catalogue as a markdown document, `docs/steps.md`.
pub fn markdown() -> String {
    let mut out = String::from(
        "# Step catalogue\n\n\
         <!-- Generated by `make steps-doc` (`dra-e2e steps --markdown`) from steps/catalogue.rs; \
         edit that, not this. -->\n\n\
         `dra-e2e steps` prints this list; a test keeps every example in it matching exactly one \
         step. How to put the steps together: [writing-scenarios.md](writing-scenarios.md).\n",
    );
    for topic in CATALOGUE {
        out.push_str(&format!("\n## {}\n\n", topic.title));
        for e in topic.entries {
            out.push_str(&format!(
                "- `{}`  \n  {}  \n  e.g. `{}`\n",
                e.pattern,
                e.description,
                e.example.lines().next().unwrap_or_default()
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::steps::World;
    use cucumber::World as _;
    use cucumber::gherkin::{Feature, GherkinEnv};

    /// Every catalogue example is a step that matches exactly one definition.
    #[test]
    fn examples_match_exactly_one_step() {
        let mut text = String::from("Feature: catalogue\n  Scenario: examples\n");
        for topic in CATALOGUE {
            for e in topic.entries {
                text.push_str(&format!("    {}\n", e.example));
            }
        }
        let feature = Feature::parse(&text, GherkinEnv::default()).unwrap();
        let steps = World::collection();
        let mut problems = Vec::new();
        for step in &feature.scenarios[0].steps {
            match steps.find(step) {
                Ok(Some(_)) => {}
                Ok(None) => problems.push(format!("undefined: {}{}", step.keyword, step.value)),
                Err(_) => problems.push(format!("ambiguous: {}{}", step.keyword, step.value)),
            }
        }
        assert!(problems.is_empty(), "{problems:#?}");
    }
}
