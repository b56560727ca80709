//! The catalogue's topics on nodes and drivers: the suite's own test
//! drivers a scenario starts, and the pack's steps that hold any driver
//! under test to what the conformance pack checks.
use super::{Entry, Topic};

/// Nodes, and the test drivers a scenario starts.
pub(super) const NODES_AND_DRIVERS: Topic = Topic {
    title: "Nodes and drivers",
    entries: &[
        Entry {
            pattern: "Given <min>[ to <max>] ready node(s)",
            description: "Use between min and max ready schedulable nodes (sorted by name), waiting up to 2 minutes for one that is away for a moment (its status late, a taint not yet lifted); the scenario is skipped when the cluster has fewer than min.",
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
};

/// The conformance pack's steps, for any driver.
pub(super) const DRIVER_UNDER_TEST: Topic = Topic {
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
};
