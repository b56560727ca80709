@DynamicResourceAllocation @FeatureGate:DRAPartitionableDevices
Feature: partitionable devices
  Devices of a pool can draw on shared counters; a device is allocatable only
  while enough of its counters are left.
  (upstream: [sig-node] [DRA] kubelet [Feature:DynamicResourceAllocation] [FeatureGate:DRAPartitionableDevices])

  Scenario: must consume and free up counters
    Given 1 ready node
    And a driver with no devices
    And a device class
    # Counter set and devices live in separate slices of one pool.
    And the following objects are created:
      """
      apiVersion: resource.k8s.io/v1
      kind: ResourceSlice
      metadata:
        name: ${namespace}-counters
      spec:
        driver: ${driver}
        nodeName: ${node0}
        pool: { name: partitioned, generation: 1, resourceSliceCount: 2 }
        sharedCounters:
        - name: counter-1
          counters:
            memory: { value: 6Gi }
      ---
      apiVersion: resource.k8s.io/v1
      kind: ResourceSlice
      metadata:
        name: ${namespace}-devices
      spec:
        driver: ${driver}
        nodeName: ${node0}
        pool: { name: partitioned, generation: 1, resourceSliceCount: 2 }
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
    And an external claim "claim-1"
    And an external claim "claim-2"
    When pod "pod-1" using claim "claim-1" is created
    Then pod "pod-1" is running
    When pod "pod-2" using claim "claim-2" is created
    Then pod "pod-2" stays pending for 20s
    When pod "pod-1" is deleted
    Then pod "pod-2" is running
    And claim "claim-2" is allocated with results "my-request"
