@DynamicResourceAllocation @NodeOperations @OwnNodes
Feature: the container runtime stops and restarts
  A node's container runtime (containerd) goes away and comes back under
  pods that hold claims. A pod made while the runtime is down waits, and
  runs once it is back with its claim prepared (the kubelet may already ask
  for the claim while the runtime is down: it prepares before it makes the
  pod's sandbox); a pod already running keeps its prepared claim across a
  runtime restart, and the next pod gets its device through CDI from the
  restarted runtime. The driver's process does not live in the runtime's
  streams: its sockets keep answering, so the kubelet never registers it
  again. Only the runner's real
  nodes can stop their containerd (through the node's process 1); @OwnNodes
  because the node is away for every scenario on it: no other scenario uses
  it meanwhile, the others run on the other nodes.

  Background:
    Given 1 ready node
    And a driver with 2 devices per node
    And a device class
    And an external claim "external-claim"

  Scenario: a pod waits for a stopped container runtime and runs once it is back
    When containerd on node 0 is stopped
    And pod "tester-1" using claim "external-claim" is created
      | node selector | 0 |
    Then pod "tester-1" stays pending for 20s
    When containerd on node 0 is started
    Then pod "tester-1" is running
    And every container of pod "tester-1" has env "user_a=b"
    And the plugin on node 0 has prepared claim "external-claim"
    And NotifyRegistrationStatus was called 1 time on node 0

  Scenario: a running pod keeps its claim across a container runtime restart
    When pod "tester-1" using claim "external-claim" is created
      | node selector | 0 |
    Then pod "tester-1" is running
    When containerd on node 0 is restarted
    Then pod "tester-1" stays running for 10s
    And NodePrepareResources was called 1 time on node 0
    And NodeUnprepareResources was called 0 times on node 0
    And NotifyRegistrationStatus was called 1 time on node 0
    When pod "tester-2" with an inline claim is created
      | node selector | 0 |
    Then pod "tester-2" is running
    And every container of pod "tester-2" has its device
