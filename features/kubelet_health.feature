@DynamicResourceAllocation @FeatureGate:ResourceHealthStatus @KubeletMinVersion:1.36
Feature: device health through one node's kubelet
  The node suite's checks of the kubelet's health streams: which health API
  it chooses, a plugin that stops (its devices become Unknown) and comes
  back, and several pods whose devices change health together. Upstream's
  baseline comes first in each: the device reported Healthy within 30 s;
  each change after it is seen within 60 s, Unknown within 2 minutes.
  (upstream: the node suite, test/e2e_node/dra_test.go, [sig-node] [DRA] [Feature:DynamicResourceAllocation] Resource Health [FeatureGate:ResourceHealthStatus] [Serial])

  Background:
    Given 1 ready node

  # A plugin serving both health APIs: a 1.37 kubelet takes v1.
  @KubeletMinVersion:1.37
  Scenario: should reflect device health changes in the Pod's status
    Given a driver with 1 device per node
    And a device class
    And an external claim "health-test-claim"
    When pod "tester-1" using claim "health-test-claim" is created
    Then NodePrepareResources is called on node 0
    And pod "tester-1" is running
    When the driver reports device "device-00" on node 0 as Healthy
    Then the devices of pod "tester-1" are reported Healthy within 30s
    And NodeWatchResources was called through the v1 API on node 0
    When the driver reports device "device-00" on node 0 as Unhealthy
    Then the devices of pod "tester-1" are reported Unhealthy within 60s
    When the driver reports device "device-00" on node 0 as Healthy
    Then the devices of pod "tester-1" are reported Healthy within 60s

  Scenario: should reflect device health changes for a plugin which only supports the v1alpha1 health API
    Given a driver with 1 device per node, serving the v1alpha1 health API
    And a device class
    And an external claim "health-v1alpha1-claim"
    When pod "tester-1" using claim "health-v1alpha1-claim" is created
    Then NodePrepareResources is called on node 0
    And pod "tester-1" is running
    When the driver reports device "device-00" on node 0 as Healthy
    Then the devices of pod "tester-1" are reported Healthy within 30s
    And NodeWatchResources was called through the v1alpha1 API on node 0
    When the driver reports device "device-00" on node 0 as Unhealthy
    Then the devices of pod "tester-1" are reported Unhealthy within 60s
    When the driver reports device "device-00" on node 0 as Healthy
    Then the devices of pod "tester-1" are reported Healthy within 60s

  @KubeletMinVersion:1.37
  Scenario: should reflect device health changes for a plugin which only supports the v1 health API
    Given a driver with 1 device per node, serving the v1 health API
    And a device class
    And an external claim "health-v1-claim"
    When pod "tester-1" using claim "health-v1-claim" is created
    Then NodePrepareResources is called on node 0
    And pod "tester-1" is running
    When the driver reports device "device-00" on node 0 as Healthy
    Then the devices of pod "tester-1" are reported Healthy within 30s
    And NodeWatchResources was called through the v1 API on node 0
    When the driver reports device "device-00" on node 0 as Unhealthy
    Then the devices of pod "tester-1" are reported Unhealthy within 60s
    When the driver reports device "device-00" on node 0 as Healthy
    Then the devices of pod "tester-1" are reported Healthy within 60s

  # The health stream and the calls share the kubelet's one connection.
  @FaultExempt:KubeletRestartReconnects
  Scenario: must reuse one gRPC connection for service and health-monitoring calls
    Given a driver with 2 devices per node
    And a device class
    And an external claim "health-test-claim-1"
    And an external claim "health-test-claim-2"
    When pod "health-test-pod-1" using claim "health-test-claim-1" is created
    Then NodePrepareResources is called on node 0
    And pod "health-test-pod-1" is running
    When the driver reports the device of claim "health-test-claim-1" on node 0 as Healthy with message "baseline"
    Then the devices of pod "health-test-pod-1" are reported Healthy within 30s
    And the kubelet opened 1 connection to the DRA socket of the driver on node 0
    When pod "health-test-pod-2" using claim "health-test-claim-2" is created
    Then NodePrepareResources has been called again on node 0
    And pod "health-test-pod-2" is running
    When the driver reports the device of claim "health-test-claim-2" on node 0 as Healthy with message "baseline"
    Then the devices of pod "health-test-pod-2" are reported Healthy within 30s
    And the kubelet opened 1 connection to the DRA socket of the driver on node 0

  # The plugin stops (its sockets go) and a new one starts in its place.
  Scenario: should update health to Unknown when plugin stops and recover upon restart
    Given a driver with 1 device per node
    And a device class
    And an external claim "unknown-test-claim"
    And a second instance "new" of the driver, not started yet
    When pod "tester-1" using claim "unknown-test-claim" is created
    Then NodePrepareResources is called on node 0
    And pod "tester-1" is running
    When the driver reports device "device-00" on node 0 as Healthy
    Then the devices of pod "tester-1" are reported Healthy within 30s
    When the driver is torn down
    Then the devices of pod "tester-1" are reported Unknown within 2m
    When driver "new" starts
    And driver "new" reports device "device-00" on node 0 as Healthy
    Then the devices of pod "tester-1" are reported Healthy within 60s

  Scenario: should automatically reconnect both DRA and Health API after connection drop
    Given a driver with 2 devices per node
    And a device class
    And an external claim "reconnect-test-claim"
    And an external claim "reconnect-test-claim-2"
    And a second instance "new" of the driver, not started yet
    When pod "tester-1" using claim "reconnect-test-claim" is created
    Then NodePrepareResources is called on node 0
    And pod "tester-1" is running
    When the driver reports the device of claim "reconnect-test-claim" on node 0 as Healthy with message "baseline"
    Then the devices of pod "tester-1" are reported Healthy within 30s
    When the driver is torn down
    Then the devices of pod "tester-1" are reported Unknown within 2m
    When driver "new" starts
    Then NotifyRegistrationStatus of driver "new" is called on node 0
    When pod "tester-2" using claim "reconnect-test-claim-2" is created
    Then NodePrepareResources of driver "new" is called on node 0
    And pod "tester-2" is running
    When driver "new" reports the device of claim "reconnect-test-claim-2" on node 0 as Healthy with message "baseline"
    Then the devices of pod "tester-2" are reported Healthy within 30s
    When driver "new" reports the device of claim "reconnect-test-claim-2" on node 0 as Unhealthy with message "after the reconnect"
    Then the devices of pod "tester-2" are reported Unhealthy within 60s

  @FaultExempt:KubeletRestartPreparesAgain
  Scenario: should handle concurrent DRA operations and health monitoring without connection issues
    Given a driver with 3 devices per node
    And a device class
    And an external claim "concurrent-claim-0"
    And an external claim "concurrent-claim-1"
    And an external claim "concurrent-claim-2"
    When pod "concurrent-pod-0" using claim "concurrent-claim-0" is created
    And pod "concurrent-pod-1" using claim "concurrent-claim-1" is created
    And pod "concurrent-pod-2" using claim "concurrent-claim-2" is created
    Then all pods are running
    And NodePrepareResources was called 3 times on node 0
    When the driver reports the device of claim "concurrent-claim-0" on node 0 as Healthy with message "all"
    And the driver reports the device of claim "concurrent-claim-1" on node 0 as Healthy with message "all"
    And the driver reports the device of claim "concurrent-claim-2" on node 0 as Healthy with message "all"
    Then the devices of pod "concurrent-pod-0" are reported Healthy within 60s
    And the devices of pod "concurrent-pod-1" are reported Healthy within 60s
    And the devices of pod "concurrent-pod-2" are reported Healthy within 60s
    When the driver reports the device of claim "concurrent-claim-0" on node 0 as Unhealthy with message "all"
    And the driver reports the device of claim "concurrent-claim-1" on node 0 as Unhealthy with message "all"
    And the driver reports the device of claim "concurrent-claim-2" on node 0 as Unhealthy with message "all"
    Then the devices of pod "concurrent-pod-0" are reported Unhealthy within 60s
    And the devices of pod "concurrent-pod-1" are reported Unhealthy within 60s
    And the devices of pod "concurrent-pod-2" are reported Unhealthy within 60s
