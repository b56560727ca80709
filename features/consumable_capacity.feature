@DynamicResourceAllocation @FeatureGate:DRAConsumableCapacity
Feature: consumable capacity
  A device that allows multiple allocations hands out parts of its capacity
  until none is left.
  (upstream: [sig-node] [DRA] kubelet [Feature:DynamicResourceAllocation] [FeatureGate:DRAConsumableCapacity])

  @KubeletMinVersion:1.34
  Scenario: must allow multiple allocations and consume capacity
    Given 1 ready node
    # As upstream's ToDriverResources: a slice of (no) counters and a slice
    # with the one device that allows multiple allocations.
    And a driver with these slices per node:
      """
      sharedCounters: []
      ---
      devices:
      - name: consumable-device-1
        allowMultipleAllocations: true
        capacity:
          memory:
            value: 8Gi
            requestPolicy:
              default: 1Gi
              validRange: { min: 1Gi }
      """
    And a device class
    And an external claim "claim-1" with spec:
      """
      devices:
        requests:
        - name: my-request
          exactly: { deviceClassName: "${class}", capacity: { requests: { memory: 4Gi } } }
        config:
        - opaque: { driver: "${driver}", parameters: { a: b } }
      """
    And an external claim "claim-2" with spec:
      """
      devices:
        requests:
        - name: my-request
          exactly: { deviceClassName: "${class}", capacity: { requests: { memory: 8Gi } } }
        config:
        - opaque: { driver: "${driver}", parameters: { a: b } }
      """
    And an external claim "claim-3" with spec:
      """
      devices:
        requests:
        - name: my-request
          exactly: { deviceClassName: "${class}", capacity: { requests: { memory: 4Gi } } }
        config:
        - opaque: { driver: "${driver}", parameters: { a: b } }
      """
    When pod "pod-1" using claim "claim-1" is created
    Then pod "pod-1" is running with env "user_a=b" in every container
    When pod "pod-2" using claim "claim-2" is created
    And pod "pod-3" using claim "claim-3" is created
    Then pod "pod-3" is running with env "user_a=b" in every container
    And pod "pod-2" stays pending for 20s
    When pod "pod-1" is deleted
    And pod "pod-3" is deleted
    Then pod "pod-2" is running with env "user_a=b" in every container
