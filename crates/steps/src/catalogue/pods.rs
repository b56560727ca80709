//! The catalogue's topics on what a scenario asks of the cluster: claims,
//! pods, and workloads with device taint rules.
use super::{Entry, Topic};

/// Claims and their templates.
pub(super) const CLAIMS: Topic = Topic {
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
};

/// Pods: creating them, their state, their containers.
pub(super) const PODS: Topic = Topic {
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
};

/// Workloads and device taint rules.
pub(super) const WORKLOADS: Topic = Topic {
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
};
