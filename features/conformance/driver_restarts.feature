@DriverConformance
Feature: driver conformance: what a driver's restart must leave in place
  Beyond KEP-5970, from vendors' bug reports: a restarted driver must keep
  what the kubelet relies on for claims it prepared before, the CDI specs
  its running pods' containers are created from and the claims it must
  still unprepare.

  Background:
    Given 1 ready node
    And the driver under test

  @DriverPods @serial
  Scenario: containers restarted after the driver's restart find their devices
    A container that exits is created again by the kubelet from the CDI
    devices of its pod's claims, without preparing them again: a driver
    that removed or rewrote its CDI specs when it started ("cleaning up
    stale specs"), or lost them, leaves the container unable to start.
    Given an external claim "claim"
    When pod "tester-1" using claim "claim" is created
      | restart policy | Always |
    Then every container of pod "tester-1" has its device
    When the driver's pod on node 0 is restarted
    And the containers of pod "tester-1" are restarted
    Then every container of pod "tester-1" has its device

  @DriverPods @serial
  Scenario: a claim prepared before the driver's restart is unprepared by the restarted driver
    The kubelet unprepares a claim through whichever process of the driver
    runs when the pod goes: a driver that keeps its prepared claims only in
    memory answers success for a claim it no longer knows and leaves its
    CDI spec behind (seen where the runner sees the driver's answers, with
    --interpose).
    Given an external claim "claim"
    When pod "tester-1" using claim "claim" is created
    Then every container of pod "tester-1" has its device
    When the driver's pod on node 0 is restarted
    And pod "tester-1" is deleted and the driver lets its claims go
    Then claim "claim" is deallocated
    And pod "tester-1" got no "FailedUnprepareDynamicResources" event
