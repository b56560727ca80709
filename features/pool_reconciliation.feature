@DynamicResourceAllocation
Feature: pool reconciliation
  A pool that the driver keeps in place is re-created when someone deletes it.
  (upstream: [sig-node] [DRA] kubelet [Feature:DynamicResourceAllocation], AllNodes pool)

  Scenario: reconciles ResourceSlices with ReconcilePoolWithName
    Given 1 ready node
    And a driver with an all-nodes pool "all-nodes-pool" of 1 device
    Then the driver publishes pool "all-nodes-pool" for all nodes
    When the slice of pool "all-nodes-pool" is deleted
    Then the slice of pool "all-nodes-pool" is recreated with a new UID
