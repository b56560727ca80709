@DynamicResourceAllocation @FeatureGate:ResourceHealthStatus @KubeletMinVersion:1.36
Feature: device health messages
  A plugin may explain a device's health in a message; the kubelet shows it
  beside the health in the pod's allocatedResourcesStatus.
  (upstream: [sig-node] [DRA] kubelet [Feature:DynamicResourceAllocation], "should report device health with custom messages")

  @FeatureGate:ResourceHealthStatusMessage
  Scenario: should report device health with custom messages
    Given 1 ready node
    And a driver with a network pool of 10 devices
    And a device class
    And an external claim "health-test-claim"
    When pod "tester-1" using claim "health-test-claim" is created
    Then pod "tester-1" is running
    When the driver reports the device of claim "health-test-claim" on the node of pod "tester-1" as Healthy with message "Device operating normally, temperature: 45°C"
    Then the devices of pod "tester-1" are reported Healthy with message "Device operating normally, temperature: 45°C" within 30s
    When the driver reports the device of claim "health-test-claim" on the node of pod "tester-1" as Unhealthy with message "ECC error count exceeded threshold (15 errors in last hour)"
    Then the devices of pod "tester-1" are reported Unhealthy with message "ECC error count exceeded threshold (15 errors in last hour)" within 30s
    When the driver reports the device of claim "health-test-claim" on the node of pod "tester-1" as Unhealthy with message "Critical: Memory corruption detected"
    Then the devices of pod "tester-1" are reported Unhealthy with message "Critical: Memory corruption detected" within 30s
    When the driver reports the device of claim "health-test-claim" on the node of pod "tester-1" as Healthy with message "Recovered after reset, all diagnostics passed"
    Then the devices of pod "tester-1" are reported Healthy with message "Recovered after reset, all diagnostics passed" within 30s
