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
