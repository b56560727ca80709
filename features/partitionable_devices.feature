@DynamicResourceAllocation @FeatureGate:DRAPartitionableDevices
Feature: partitionable devices
  Devices of a pool can draw on shared counters; a device is allocatable only
  while enough of its counters are left.
  (upstream: [sig-node] [DRA] kubelet [Feature:DynamicResourceAllocation] [FeatureGate:DRAPartitionableDevices])

  Scenario: must consume and free up counters
    Given 1 ready node
    # As upstream's ToDriverResources: the node's pool is a slice of counters
    # and a slice of devices that consume them.
    And a driver with these slices per node:
      """
      sharedCounters:
      - name: counter-1
        counters:
          memory: { value: 6Gi }
      ---
      devices:
      - name: device-1
        consumesCounters:
        - counterSet: counter-1
          counters:
            memory: { value: 4Gi }
      - name: device-2
        consumesCounters:
        - counterSet: counter-1
          counters:
            memory: { value: 4Gi }
      """
    And a device class
    And an external claim "claim-1"
    And an external claim "claim-2"
    When pod "pod-1" using claim "claim-1" is created
    Then pod "pod-1" is running with env "user_a=b" in every container
    When pod "pod-2" using claim "claim-2" is created
    Then pod "pod-2" stays pending for 20s
    When pod "pod-1" is deleted
    Then pod "pod-2" is running with env "user_a=b" in every container
    And claim "claim-2" is allocated with results "my-request"
