@DynamicResourceAllocation @NodeOperations @serial
Feature: kubelet stops and restarts
  What the kubelet does with a driver's calls when it is stopped and started
  again around them: it works through what it missed, and retries on start
  what failed before it stopped. Only the runner's real nodes can stop a
  kubelet (through the node's process 1), so these scenarios are skipped
  elsewhere; @serial because a stopped kubelet is a node going away for
  every scenario that uses it.
  (upstream: the node suite, test/e2e_node/dra_test.go, [sig-node] [DRA] [NodeFeature:DynamicResourceAllocation] Resource Kubelet Plugin)

  Background:
    Given 1 ready node
    And a driver with 1 device per node
    And a device class
    And an external claim "external-claim"

  Scenario: must process pod created when kubelet is not running
    When the kubelet on node 0 is stopped
    And pod "tester-1" using claim "external-claim" is created
      | node selector | 0 |
    Then pod "tester-1" is pending
    When the kubelet on node 0 is started
    Then pod "tester-1" is running
    And every container of pod "tester-1" has its device

  Scenario: must retry NodePrepareResources after Kubelet restart
    When NodePrepareResources is made to fail on node 0
    And pod "tester-1" using claim "external-claim" is created
      | node selector | 0 |
    Then pod "tester-1" is pending
    And NodePrepareResources is called on node 0
    When the kubelet on node 0 is stopped
    And NodePrepareResources no longer fails on node 0
    And the kubelet on node 0 is started
    Then pod "tester-1" is running
    And NodePrepareResources has been called again on node 0
    And every container of pod "tester-1" has its device

  Scenario: must retry NodeUnprepareResources after Kubelet restart
    When NodeUnprepareResources is made to fail on node 0
    And pod "tester-1" using claim "external-claim" is created
      | node selector  | 0     |
      | command        | true  |
      | restart policy | Never |
    # The kubelet calls it once the container has exited, and keeps the
    # pod out of its terminal phase until the call succeeds.
    Then NodeUnprepareResources is called on node 0
    When the kubelet on node 0 is stopped
    And NodeUnprepareResources no longer fails on node 0
    And the kubelet on node 0 is started
    Then NodeUnprepareResources has been called again on node 0
    And pod "tester-1" is completed
    And no plugin has prepared claims
