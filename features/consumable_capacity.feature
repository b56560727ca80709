@DynamicResourceAllocation @FeatureGate:DRAConsumableCapacity
Feature: consumable capacity
  A device that allows multiple allocations hands out parts of its capacity
  until none is left.
  (upstream: [sig-node] [DRA] kubelet [Feature:DynamicResourceAllocation] [FeatureGate:DRAConsumableCapacity])

  @KubeletMinVersion:1.34
  Scenario: must allow multiple allocations and consume capacity
    Given 1 ready node
    And a driver with no devices
    And a device class
    And the following objects are created:
      """
      apiVersion: resource.k8s.io/v1
      kind: ResourceSlice
      metadata:
        name: ${namespace}-shareable
      spec:
        driver: ${driver}
        nodeName: ${node0}
        pool: { name: shareable, generation: 1, resourceSliceCount: 1 }
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
    And an external claim "claim-1" with spec:
      """
      devices:
        requests:
        - name: my-request
          exactly: { deviceClassName: "${class}", capacity: { requests: { memory: 4Gi } } }
      """
    And an external claim "claim-2" with spec:
      """
      devices:
        requests:
        - name: my-request
          exactly: { deviceClassName: "${class}", capacity: { requests: { memory: 8Gi } } }
      """
    And an external claim "claim-3" with spec:
      """
      devices:
        requests:
        - name: my-request
          exactly: { deviceClassName: "${class}", capacity: { requests: { memory: 4Gi } } }
      """
    When pod "pod-1" using claim "claim-1" is created
    Then pod "pod-1" is running
    When pod "pod-2" using claim "claim-2" is created
    And pod "pod-3" using claim "claim-3" is created
    Then pod "pod-3" is running
    And pod "pod-2" stays pending for 20s
    When pod "pod-1" is deleted
    And pod "pod-3" is deleted
    Then pod "pod-2" is running
    And container "with-resource" of pod "pod-2" has exactly the driver env "claim_claim_2_my_request=true"
