# @KubeletMinVersion:1.37 is ours, not upstream's: the API server refuses a
# slice with node-allocatable devices from a node that does not declare the
# feature, and a 1.36 kubelet does not (found by make e2e-skew, 2026-12-05).
@DynamicResourceAllocation @FeatureGate:DRANodeAllocatableResources @ContainerRuntime @KubeletMinVersion:1.37
Feature: Node Allocatable Resources [Feature:DynamicResourceAllocation] [FeatureGate:DRANodeAllocatableResources]
  Devices can stand for node CPU and memory (a mapping: so much per allocated
  device) or cost the node some on top (an overhead: per pod and per container
  that references the claim). The scheduler accounts for them and the kubelet
  inflates the pod's and the containers' cgroups and the containers'
  oom_score_adj by them. The values are read on the node, by exec into the
  pod's containers, so these scenarios need real nodes.
  (upstream: [sig-node] [DRA] Node Allocatable Resources, dra_node_allocatable_resources.go)

  # One row per case of upstream's table. Columns:
  #   devices: the devices the driver publishes on node 0, as upstream's (see the step catalogue):
  #            `<resource> <q> per device` is a mapping, `per pod` / `per container` an overhead.
  #   pod, c1, c2: resources as `cpu <request>/<limit>, memory <request>/<limit>`, or `none`;
  #            the pod row gives pod-level resources.
  #   unreferenced, c1 claims, c2 claims: the claims (cpu-mem-claim, cpu-mem-claim-2) the pod
  #            references for no container, and those each container uses.
  #   pod/c1/c2 cgroup: the resources the kubelet must have written into each cgroup
  #            (upstream's expectations, DRA share included), or `none`.
  #   c1/c2 oom: the memory request the kubelet scores a Burstable container by, DRA share
  #            included (ignored for Guaranteed and BestEffort pods).
  Scenario Outline: verifies cgroup inflation and container OOM adjustment with <case>
    Given 1 to 4 ready nodes
    And a driver with node-allocatable devices "<devices>", on node 0
    And a device class
    And an external claim "cpu-mem-claim"
    And an external claim "cpu-mem-claim-2"
    When pod "tester-1" with these containers is created:
      | container | resources | claims         |
      | pod       | <pod>     | <unreferenced> |
      | c1        | <c1>      | <c1 claims>    |
      | c2        | <c2>      | <c2 claims>    |
    Then pod "tester-1" is running
    And the cgroups of pod "tester-1" are:
      | cgroup | values       |
      | pod    | <pod cgroup> |
      | c1     | <c1 cgroup>  |
      | c2     | <c2 cgroup>  |
    And container "c1" of pod "tester-1" has the oom_score_adj of its QoS class for a memory request of "<c1 oom>"
    And container "c2" of pod "tester-1" has the oom_score_adj of its QoS class for a memory request of "<c2 oom>"

    Examples:
      | case                                                           | devices                                                                                                  | pod                     | unreferenced | c1                      | c1 claims     | c2                      | c2 claims       | pod cgroup                                                  | c1 cgroup                                                | c2 cgroup                                                | c1 oom | c2 oom |
      | pod-level resources specified, container-level limits omitted | device-01: memory 1000Mi per device, cpu 1 per device                                                    | cpu 2/4, memory 2Gi/4Gi | -            | none                    | cpu-mem-claim | none                    | cpu-mem-claim   | cpu request 2000m, cpu limit 4000m, memory limit 4096Mi     | cpu limit 4, memory limit 4Gi                            | cpu limit 4, memory limit 4Gi                            | 1024Mi | 1024Mi |
      | container-level requests and limits omitted (BestEffort)       | device-01: memory 1000Mi per device, cpu 1 per device                                                    | none                    | -            | none                    | cpu-mem-claim | none                    | cpu-mem-claim   | none                                                        | none                                                     | none                                                     | 0      | 0      |
      | direct mapping multiple claims                                 | device-01: memory 1000Mi per device, cpu 100m per device; device-02: memory 2000Mi per device, cpu 100m per device | none | -      | cpu 100m/200m, memory 1Gi/2Gi | cpu-mem-claim | cpu 100m/200m, memory 1Gi/2Gi | cpu-mem-claim-2 | cpu request 400m, cpu limit 600m, memory limit 7096Mi | cpu request 100m, cpu limit 300m, memory limit 3048Mi | cpu request 100m, cpu limit 300m, memory limit 4048Mi | 2024Mi | 3024Mi |
      # The cases below cannot run on the machines this suite is developed on. The scheduler
      # adds the DRA share to the pod's requests, and these pods then ask for more CPU than a
      # node of this 2-core machine has (`nproc` prints 2; the pod stays Pending with
      # "Insufficient cpu"): upstream's values assume a node with at least 4 CPUs. Uncomment a
      # row on such nodes. Requests with the DRA share:
      #   direct mappings 3000m; overhead mappings 2300m; combined direct and overhead
      #   mappings 3300m; single device with both mapping and overhead 3300m; unreferenced
      #   overhead claim 2100m; pod-level resources specified, container-level limits
      #   specified 2500m; container-level CPU/Memory limits omitted (Burstable) 3000m;
      #   Guaranteed QoS pod with direct mapping 3000m.
      # Guaranteed: upstream expects oom_score_adj -997, which the real nodes here cannot set:
      # their containerd runs with restrict_oom_score_adj (root lacks CAP_SYS_RESOURCE), so it
      # raises the score to containerd's own (0); the row would fail on its oom check here.
      # The two hugepages cases need hugepages-2Mi on the node (`grep HugePages_Total
      # /proc/meminfo` prints 0 here; upstream skips them then) and a step that reads the
      # hugetlb limits, which the suite does not have; they are not listed.
      #| direct mappings                                               | device-01: memory 1000Mi per device, cpu 1 per device | none | - | cpu 1/2, memory 1Gi/2Gi | cpu-mem-claim | cpu 1/2, memory 1Gi/2Gi | cpu-mem-claim | cpu request 3000m, cpu limit 5000m, memory limit 5096Mi | cpu request 1000m, cpu limit 3000m, memory limit 3048Mi | cpu request 1000m, cpu limit 3000m, memory limit 3048Mi | 1524Mi | 1524Mi |
      #| overhead mappings                                             | device-01: memory 100Mi per pod + 100Mi per container, cpu 100m per pod + 100m per container | none | - | cpu 1/2, memory 1Gi/2Gi | cpu-mem-claim | cpu 1/2, memory 1Gi/2Gi | cpu-mem-claim | cpu request 2300m, cpu limit 4300m, memory limit 4396Mi | cpu request 1000m, cpu limit 2200m, memory limit 2248Mi | cpu request 1000m, cpu limit 2200m, memory limit 2248Mi | 1174Mi | 1174Mi |
      #| combined direct and overhead mappings                         | device-direct-01: memory 1000Mi per device, cpu 1 per device; device-overhead-01: memory 100Mi per pod + 100Mi per container, cpu 100m per pod + 100m per container | none | - | cpu 1/2, memory 1Gi/2Gi | cpu-mem-claim, cpu-mem-claim-2 | cpu 1/2, memory 1Gi/2Gi | cpu-mem-claim, cpu-mem-claim-2 | cpu request 3300m, cpu limit 5300m, memory limit 5396Mi | cpu request 1000m, cpu limit 3200m, memory limit 3248Mi | cpu request 1000m, cpu limit 3200m, memory limit 3248Mi | 1674Mi | 1674Mi |
      #| single device with both mapping and overhead                  | device-mapping-overhead-01: memory 1000Mi per device + 100Mi per pod + 100Mi per container, cpu 1 per device + 100m per pod + 100m per container | none | - | cpu 1/2, memory 1Gi/2Gi | cpu-mem-claim | cpu 1/2, memory 1Gi/2Gi | cpu-mem-claim | cpu request 3300m, cpu limit 5300m, memory limit 5396Mi | cpu request 1000m, cpu limit 3200m, memory limit 3248Mi | cpu request 1000m, cpu limit 3200m, memory limit 3248Mi | 1674Mi | 1674Mi |
      #| unreferenced overhead claim                                   | device-01: memory 100Mi per pod + 100Mi per container, cpu 100m per pod + 100m per container | none | cpu-mem-claim | cpu 1/2, memory 1Gi/2Gi | - | cpu 1/2, memory 1Gi/2Gi | - | cpu request 2100m, cpu limit 4100m, memory limit 4196Mi | cpu request 1000m, cpu limit 2, memory limit 2Gi | cpu request 1000m, cpu limit 2, memory limit 2Gi | 1024Mi | 1024Mi |
      #| pod-level resources specified, container-level limits specified | device-01: memory 100Mi per pod + 100Mi per container, cpu 100m per pod + 100m per container | cpu 2500m/4, memory 2500Mi/4Gi | - | cpu 1/2, memory 1Gi/2Gi | cpu-mem-claim | cpu 1/2, memory 1Gi/2Gi | cpu-mem-claim | cpu request 2500m, cpu limit 4000m, memory limit 4096Mi | cpu request 1000m, cpu limit 2200m, memory limit 2248Mi | cpu request 1000m, cpu limit 2200m, memory limit 2248Mi | 1250Mi | 1250Mi |
      #| container-level CPU/Memory limits omitted (Burstable)         | device-01: memory 1000Mi per device, cpu 1 per device | none | - | cpu 1000m, memory 1Gi | cpu-mem-claim | cpu 1000m, memory 1Gi | cpu-mem-claim | cpu request 3000m | cpu request 1000m | cpu request 1000m | 1524Mi | 1524Mi |
      #| Guaranteed QoS pod with direct mapping                        | device-01: memory 1000Mi per device, cpu 1 per device | none | - | cpu 1/1, memory 1Gi/1Gi | cpu-mem-claim | cpu 1/1, memory 1Gi/1Gi | cpu-mem-claim | cpu request 3000m, cpu limit 3000m, memory limit 3048Mi | cpu request 1000m, cpu limit 2000m, memory limit 2024Mi | cpu request 1000m, cpu limit 2000m, memory limit 2024Mi | 0 | 0 |

  # Resize cases: the pod is created with the first resources, resized in place to the
  # second, and checked as upstream does afterwards: cgroups (DRA share included), the
  # pod's status.allocatedResources (DRA share included) and each container's
  # (without it; `(not checked)` where upstream does not check it), no container restarted.
  @FeatureGate:InPlacePodLevelResourcesVerticalScaling
  Scenario Outline: verifies cgroup settings and pod status after resize with <case>
    Given 1 to 4 ready nodes
    And a driver with node-allocatable devices "<devices>", on node 0
    And a device class
    And an external claim "cpu-mem-claim"
    When pod "tester-1" with these containers is created:
      | container | resources | claims        |
      | pod       | <pod>     | -             |
      | c1        | <c1>      | cpu-mem-claim |
    Then pod "tester-1" is running
    When pod "tester-1" is resized to:
      | container | resources |
      | pod       | <new pod> |
      | c1        | <new c1>  |
    Then the cgroups of pod "tester-1" are:
      | cgroup | values       |
      | pod    | <pod cgroup> |
      | c1     | <c1 cgroup>  |
    And pod "tester-1" has allocated resources:
      | allocation | resources       |
      | pod        | <pod allocated> |
      | c1         | <c1 allocated>  |

    Examples:
      | case                                                                   | devices                                                                                      | pod                     | c1                                  | new pod                 | new c1                                 | pod cgroup                                              | c1 cgroup                                                | pod allocated            | c1 allocated             |
      | direct mappings with resize                                            | device-01: memory 1000Mi per device, cpu 1 per device                                        | none                    | cpu 500m/1000m, memory 500Mi/1000Mi | none                    | cpu 500m/1500m, memory 1000Mi/2000Mi   | cpu request 1500m, cpu limit 2500m, memory limit 3000Mi | cpu request 500m, cpu limit 2500m, memory limit 3000Mi   | cpu 1500m, memory 2000Mi | cpu 500m, memory 1000Mi  |
      | overhead mappings with resize                                          | device-01: memory 100Mi per pod + 100Mi per container, cpu 100m per pod + 100m per container | none                    | cpu 1/2, memory 1Gi/2Gi             | none                    | cpu 1500m/2500m, memory 1500Mi/3000Mi  | cpu request 1700m, cpu limit 2700m, memory limit 3200Mi | cpu request 1500m, cpu limit 2700m, memory limit 3200Mi  | cpu 1700m, memory 1700Mi | cpu 1500m, memory 1500Mi |
      # The cases below cannot run here (checked on this machine's real nodes, cgroup v1):
      # - the two pod-level resizes to 3 CPUs: the API server refuses the resize, "pods
      #   \"tester-1\" is forbidden: node didn't have enough allocatable resources: cpu,
      #   requested: 3000, allocatable: 2000" (`nproc` prints 2).
      # - the container resize under pod-level limits: the kubelet never actuates it; the pod
      #   keeps PodResizeInProgress with "failed to update resources: runc did not terminate
      #   successfully: exit status 1: failed to write \"500000\": write
      #   /sys/fs/cgroup/cpu/<root>/kubepods/burstable/pod<uid>/<container>/cpu.cfs_quota_us:
      #   invalid argument": on cgroup v1 a child's CFS quota may not exceed its parent's
      #   (the pod's 400000), which cgroup v2 allows.
      #| pod-level resources resize with container level request/limit omitted | device-01: memory 1000Mi per device, cpu 1 per device                                        | cpu 2/4, memory 2Gi/4Gi | none                                | cpu 3/5, memory 3Gi/5Gi | none                                   | cpu request 3000m, cpu limit 5000m, memory limit 5120Mi | cpu limit 5, memory limit 5Gi                            | cpu 3, memory 3Gi        | (not checked)            |
      #| Pod level resize, container level request/limit present               | device-01: memory 1000Mi per device, cpu 1 per device                                        | cpu 2/4, memory 2Gi/4Gi | cpu 1/2, memory 1Gi/2Gi             | cpu 3/6, memory 3Gi/6Gi | cpu 1/2, memory 1Gi/2Gi                | cpu request 3000m, cpu limit 6000m, memory limit 6Gi    | cpu request 1000m, cpu limit 3000m, memory limit 3048Mi  | cpu 3, memory 3Gi        | cpu 1, memory 1Gi        |
      #| pod level resources present, container level resize                   | device-01: memory 1000Mi per device, cpu 1 per device                                        | cpu 2/4, memory 2Gi/4Gi | none                                | cpu 2/4, memory 2Gi/4Gi | cpu 1/2, memory 1Gi/2Gi                | cpu request 2000m, cpu limit 4000m, memory limit 4Gi    | cpu request 1000m, cpu limit 3000m, memory limit 3048Mi  | cpu 2, memory 2Gi        | cpu 1, memory 1Gi        |
