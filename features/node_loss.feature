@DynamicResourceAllocation @OwnNodes
Feature: a node lost and back
  A node cut off from the control plane (a network partition; on the local
  cluster the node's traffic to the API server is dropped, on a real node by
  the kernel, on a simulated one by its client) is reported unreachable by
  the node lifecycle controller once its Lease goes unrenewed. DRA keeps
  what such a node holds: its pod stays bound and its claim allocated and
  reserved, even once the pod is deleted, because only the node's kubelet
  can stop the pod and unprepare the claim, and it is not asked meanwhile.
  Connected again, the kubelet does both, once, and the pod and its claim
  go. The scenario has its node to itself (@OwnNodes): scenarios on the
  other nodes go on meanwhile. Takes about a minute and a half: the
  controller waits 50 s before it calls a node unreachable.

  A workload's pod is not left there: with a short toleration of the
  unreachable taint the taint eviction controller evicts it, and its
  ReplicaSet makes a new pod, whose new claim is allocated and prepared on
  another node, while the evicted pod and its claim stay on the lost node
  until it is back. That second scenario owns the node it cuts off and
  shares a second one with the other scenarios for the new pod: of two
  nodes an owner may have only one (the other is left to scenarios that
  need two), so owning both would need four nodes and skip it on the
  README's two; a shared node takes a pod like any other scenario's. Its
  first pod is placed on the owned node by a node selector and then
  adopted by the ReplicaSet, whose template is the pod's without that
  selector.

  Scenario: a lost node keeps a deleted pod and its claim until it is back, then lets both go
    Given 1 ready node
    And a driver with 1 device per node
    And a device class
    When pod "tester-1" with an inline claim is created
    Then pod "tester-1" is running
    When node 0 is cut off from the control plane
    Then node 0 is reported unreachable
    When pod "tester-1" is deleted without waiting
    Then pod "tester-1" stays terminating for 10s
    And the claim of pod "tester-1" is reserved for pod "tester-1"
    And NodeUnprepareResources was called 0 times on node 0
    When node 0 is connected again
    Then the driver lets the claims of pod "tester-1" go
    And the claim of pod "tester-1" is deleted
    And NodeUnprepareResources was called 1 time on node 0

  Scenario: a pod its replica set makes again on another node gets a claim of its own there; the lost node lets the evicted pod and its claim go once back
    Given 1 ready node
    And 1 more ready node shared with other scenarios
    And a driver with 1 device per node
    And a device class
    When pod "tester-1" with an inline claim is created
      | node selector                     | 0  |
      | tolerates an unreachable node for | 5s |
    Then pod "tester-1" is running
    When replica set "tester" adopts pod "tester-1"
    And node 0 is cut off from the control plane
    Then node 0 is reported unreachable
    And pod "tester-1" is evicted by the taint eviction controller
    And replica set "tester" has 1 running pod on node 1
    And NodePrepareResources was called 1 time on node 1
    And pod "tester-1" stays terminating for 5s
    And the claim of pod "tester-1" is reserved for pod "tester-1"
    And NodeUnprepareResources was called 0 times on node 0
    When node 0 is connected again
    Then the driver lets the claims of pod "tester-1" go
    And the claim of pod "tester-1" is deleted
    And NodeUnprepareResources was called 1 time on node 0
    And replica set "tester" has 1 running pod on node 1
