@DynamicResourceAllocation @Interposed
Feature: a driver's instances, updates and device health behind the interposer
  A driver built on the kubelet plugin helper may run as several instances
  on one node: during a surge rollout of its DaemonSet (maxSurge: 1) the new
  pod registers beside the old one, each with its own sockets, and the old
  one goes. A restarted driver pod registers again. The kubelet must see all
  of this as it would without the interposer, and a pod with a claim must
  run throughout. The device health a driver reports reaches the pod's
  status; behind the interposer a scenario can report it for a real driver.
  These run on the suite's own driver too, where they can (its instances
  are hosted by the runner: the DaemonSet scenarios are skipped for it).

  Background:
    Given 1 ready node
    And the driver under test

  @DriverPods
  Scenario: a rollout of the driver's DaemonSet in the middle of a scenario
    When pod "tester-1" with an inline claim is created
    Then pod "tester-1" is running
    And every container of pod "tester-1" has its device
    When the driver's DaemonSet is rolled out
    And pod "tester-2" with an inline claim is created
    Then pod "tester-2" runs without a "FailedPrepareDynamicResources" event
    And every container of pod "tester-2" has its device
    # The new instance unprepares the old one's claim. Upstream's test
    # driver keeps its claims in memory and leaves the CDI spec of a claim
    # it does not know behind, which the conformance pack's own deletion
    # step reports (docs/driver-conformance.md); here only the rollout is
    # the point.
    When pod "tester-1" is deleted
    Then pod "tester-2" is running

  @DriverPods
  Scenario: a driver pod restarted behind the interposer registers again
    When the driver's pod on node 0 is restarted
    Then NotifyRegistrationStatus is called on node 0
    When pod "tester-1" with an inline claim is created
    Then pod "tester-1" runs without a "FailedPrepareDynamicResources" event
    And every container of pod "tester-1" has its device

  @FeatureGate:ResourceHealthStatus @KubeletMinVersion:1.36 @DriverCapability:DeviceHealth
  Scenario: device health reported for the driver reaches the pod status
    Given an external claim "health-claim"
    When pod "tester-1" using claim "health-claim" is created
    Then pod "tester-1" is running
    # The kubelet opens the health stream when the driver registers, not
    # per pod: what it shows of the report is the check.
    When the driver reports the device of claim "health-claim" on node 0 as Unhealthy with message "injected by the scenario"
    Then the devices of pod "tester-1" are reported Unhealthy with message "injected by the scenario"
    When the driver reports the device of claim "health-claim" on node 0 as Healthy with message ""
    Then the devices of pod "tester-1" are reported Healthy

  # The kubelet opens the stream when the driver registers, and opens it
  # again every few seconds while it fails.
  @FeatureGate:ResourceHealthStatus @KubeletMinVersion:1.36 @DriverCapability:DeviceHealth @DriverPods
  Scenario: a health stream that fails as it opens is opened again once it no longer fails
    When NodeWatchResources is made to fail on node 0
    And the driver's pod on node 0 is restarted
    Then NodeWatchResources is called on node 0
    Given an external claim "health-claim"
    When pod "tester-1" using claim "health-claim" is created
    Then pod "tester-1" is running
    When the driver reports the device of claim "health-claim" on node 0 as Unhealthy with message "after the failure"
    And NodeWatchResources no longer fails on node 0
    Then NodeWatchResources has been called again on node 0
    And the devices of pod "tester-1" are reported Unhealthy with message "after the failure"
