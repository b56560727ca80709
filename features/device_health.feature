@DynamicResourceAllocation @FeatureGate:ResourceHealthStatus @KubeletMinVersion:1.36
Feature: device health
  The kubelet watches each plugin's device health stream and shows the health
  of a pod's devices in its container statuses (allocatedResourcesStatus).
  (upstream: [sig-node] [DRA] kubelet [Feature:DynamicResourceAllocation] [FeatureGate:ResourceHealthStatus],
  test/e2e/dra/health.go; the messages are in device_health_messages.feature)

  Background:
    Given 1 ready node
    And a driver with 1 device per node
    And a device class
    And an external claim "health-test-claim"

  Scenario: must reflect device health changes in the pod status
    When pod "tester-1" using claim "health-test-claim" is created
    Then pod "tester-1" is running with env "user_a=b" in every container
    And NodeWatchResources is called on node 0
    And the health stream of the driver on node 0 went through the API of its kubelet's version
    When the driver reports device "device-00" on node 0 as Healthy
    Then the devices of pod "tester-1" are reported Healthy
    When the driver reports device "device-00" on node 0 as Unhealthy
    Then the devices of pod "tester-1" are reported Unhealthy
    When the driver reports device "device-00" on node 0 as Healthy
    Then the devices of pod "tester-1" are reported Healthy

  Scenario: devices nobody reported on are of unknown health
    When pod "tester-1" using claim "health-test-claim" is created
    Then pod "tester-1" is running
    And the devices of pod "tester-1" are reported Unknown

  # Drivers built before dra-health v1 offer only v1alpha1; the kubelet streams through it.
  @FaultExempt:KubeletRestartReconnects
  Scenario: must reflect device health changes in the pod status (v1alpha1)
    Given a driver "old" with 1 device per node, serving the v1alpha1 health API
    And a device class for driver "old"
    And an external claim "old-claim" for driver "old"
    When pod "tester-1" using claim "old-claim" is created
    Then pod "tester-1" is running with env "user_a=b" in every container
    And NodeWatchResources of driver "old" was called through the v1alpha1 API on node 0
    And no health stream of driver "old" was opened through the v1 API on node 0
    When driver "old" reports device "device-00" on node 0 as Healthy
    Then the devices of pod "tester-1" are reported Healthy
    When driver "old" reports device "device-00" on node 0 as Unhealthy
    Then the devices of pod "tester-1" are reported Unhealthy
    When driver "old" reports device "device-00" on node 0 as Healthy
    Then the devices of pod "tester-1" are reported Healthy
    And NodeWatchResources of driver "old" was called 1 time on node 0

  # The kubelet asks a plugin for health only when its registration offers
  # the service. A 1.36 kubelet opens the stream anyway (and gives up on the
  # answer Unimplemented): found by make e2e-skew on 2026-12-05.
  @KubeletMinVersion:1.37
  Scenario: a driver without device health is never asked for it
    Given a driver "plain" with 1 device per node, without device health
    And a device class for driver "plain"
    And an external claim "plain-claim" for driver "plain"
    When pod "tester-1" using claim "plain-claim" is created
    Then pod "tester-1" is running
    And NodeWatchResources of driver "plain" was called 0 times on node 0

  # A driver that dropped v1alpha1: kubelets from 1.37 on stream through v1.
  @KubeletMinVersion:1.37
  Scenario: must reflect device health changes in the pod status (v1 health API)
    Given a driver "new" with 1 device per node, serving the v1 health API
    And a device class for driver "new"
    And an external claim "new-claim" for driver "new"
    When pod "tester-1" using claim "new-claim" is created
    Then pod "tester-1" is running with env "user_a=b" in every container
    And NodeWatchResources of driver "new" was called through the v1 API on node 0
    And no health stream of driver "new" was opened through the v1alpha1 API on node 0
    When driver "new" reports device "device-00" on node 0 as Healthy
    Then the devices of pod "tester-1" are reported Healthy
    When driver "new" reports device "device-00" on node 0 as Unhealthy
    Then the devices of pod "tester-1" are reported Unhealthy
    When driver "new" reports device "device-00" on node 0 as Healthy
    Then the devices of pod "tester-1" are reported Healthy
