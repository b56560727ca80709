@DynamicResourceAllocation
Feature: ResourceSlices and pods that finish
  Node-local devices published by the driver on every node, and what happens to
  claims when their pods complete or restart.
  (upstream: [sig-node] [DRA] kubelet [Feature:DynamicResourceAllocation], 1-4 nodes, DriverResources(1))

  Background:
    Given 1 to 4 ready nodes
    And a driver with 1 device per node
    And a device class

  Scenario: must manage ResourceSlices
    Then the driver publishes one slice per node with devices "device-00"
    And the driver keeps publishing them for 20s

  Scenario: supports init containers with external claims
    Given an external claim "external-claim"
    When pod "tester-1" using claim "external-claim" is created
      | init container | yes |
    Then pod "tester-1" is running
    And init container "init" of pod "tester-1" has env "user_a=b"
    And every container of pod "tester-1" has env "user_a=b"

  Scenario: removes reservation from claim when pod is done
    Given an external claim "external-claim"
    When pod "tester-1" using claim "external-claim" is created
      | command | true |
    Then pod "tester-1" is completed
    And claim "external-claim" is not reserved

  Scenario: deletes generated claims when pod is done
    When pod "tester-1" with an inline claim is created
      | command | true |
    Then pod "tester-1" is completed
    And the claim of pod "tester-1" is deleted

  Scenario: does not delete generated claims when pod is restarting
    When pod "tester-1" with an inline claim is created
      | command        | sleep 1; exit 1 |
      | restart policy | Always          |
    Then pod "tester-1" has restarted at least 2 times
    And the claim of pod "tester-1" is allocated
