//! The catalogue's topics on the API: ResourceSlices, pool status, and
//! manifests with the API checks made on any object.
use super::{Entry, Topic};

/// ResourceSlices.
pub(super) const RESOURCE_SLICES: Topic = Topic {
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
};

/// Pool status.
pub(super) const POOL_STATUS: Topic = Topic {
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
};

/// Manifests and API checks.
pub(super) const MANIFESTS: Topic = Topic {
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
};
