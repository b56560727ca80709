//! The catalogue's topics on the node side: the kubelet's calls to plugins,
//! device health, node-allocatable resources, device metadata and device
//! plugins.
use super::{Entry, Topic};

/// The kubelet's calls to the plugins.
pub(super) const PLUGIN_CALLS: Topic = Topic {
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
};

/// Device health.
pub(super) const DEVICE_HEALTH: Topic = Topic {
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
};

/// Node-allocatable resources.
pub(super) const NODE_ALLOCATABLE: Topic = Topic {
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
};

/// Device metadata.
pub(super) const DEVICE_METADATA: Topic = Topic {
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
};

/// Device plugins.
pub(super) const DEVICE_PLUGINS: Topic = Topic {
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
};
