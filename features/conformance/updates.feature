@DriverConformance
Feature: driver conformance: updates of the driver
  Beyond KEP-5970: a driver is updated while pods use its devices. A
  driver whose DaemonSet updates by surging promises that no node goes
  without it meanwhile: its devices stay published and pods keep being
  served.

  Background:
    Given 1 ready node
    And the driver under test

  @DriverSurges @serial
  Scenario: a surging rollout of the driver keeps its slices and serves new pods
    During a rollout of the driver's DaemonSet with maxSurge, a node's new
    driver pod starts beside the old one, which goes once the new one is
    ready. Guards against slices that vanish meanwhile (an old pod that
    deletes them as it stops: the scheduler then finds no device and new
    pods stay pending), a pod created during the rollout that does not get
    its device, and a claim prepared before the rollout that the new pod
    cannot let go.
    Given the driver's slices are watched
    And an external claim "claim"
    When pod "tester-1" using claim "claim" is created
    Then every container of pod "tester-1" has its device
    When the driver's DaemonSet rollout starts
    And pod "tester-2" with an inline claim is created
    Then every container of pod "tester-2" has its device
    And the driver's DaemonSet rollout completes
    And pod "tester-1" is running
    When pod "tester-1" is deleted and the driver lets its claims go
    Then claim "claim" is not reserved
    And the driver's slices never vanished
    And the driver's pools were consistent throughout
