@DriverConformance
Feature: driver conformance: KEP-5970's seven behaviours
  The minimum every DRA driver must do, as sig-node's driver conformance
  proposal (KEP-5970) lists it, checked on the driver under test: the
  suite's own, or the one `--profile FILE` or `--driver-name` and
  `--device-class` name. Every check reads what the cluster shows (the
  kubelet's plugins, slices, claims, events, the containers' environment),
  so the same scenario judges any driver alike.

  Background:
    Given 1 ready node
    And the driver under test

  Scenario: the kubelet registers the driver's plugin
    Behaviour 1, registration: the kubelet lists the driver's plugin among
    those it registered (its own view, for every driver).
    Then the kubelet lists the plugin of the driver as registered on every node

  Scenario: the driver publishes ResourceSlices with devices
    Behaviour 2, ResourceSlice publishing: the node's pool has at least one
    device and all the slices it says it has.
    Then the driver publishes devices on every node

  Scenario: a claim for the driver's class is allocated
    Behaviour 3, allocation: the scheduler allocates one of the driver's
    devices to a claim of its class and reserves it for the pod.
    Given an external claim "claim"
    When pod "tester-1" using claim "claim" is created
    Then claim "claim" is allocated
    And claim "claim" is reserved for pod "tester-1"

  Scenario: the driver prepares the claim of a pod
    Behaviour 4, NodePrepareResources: the pod gets past resource
    preparation without a failure.
    When pod "tester-1" with an inline claim is created
    Then pod "tester-1" runs without a "FailedPrepareDynamicResources" event

  Scenario: the pod runs with access to its device
    Behaviour 5, the pod runs: every container sees what the driver gives
    it (the profile's containerCheck: CDI environment, or a command). The
    device step waits for the pod to run itself, and where the runner sees
    the driver's answers it fails at once on a CDI device no spec defines,
    which would otherwise leave the pod pending to a timeout.
    When pod "tester-1" with an inline claim is created
    Then every container of pod "tester-1" has its device

  Scenario: the driver unprepares when the pod is deleted
    Behaviour 6, NodeUnprepareResources: deleting the pod completes, its
    claim goes, and the kubelet records no failed unprepare.
    When pod "tester-1" with an inline claim is created
    Then pod "tester-1" is running
    When pod "tester-1" is deleted and the driver lets its claims go
    Then the claim of pod "tester-1" is deleted
    And pod "tester-1" got no "FailedUnprepareDynamicResources" event

  Scenario: a device is used again after its pod is gone
    Behaviour 7, resource reuse: a second pod with a new claim of the same
    class starts once the first is gone.
    When pod "tester-1" with an inline claim is created
    Then pod "tester-1" is running
    When pod "tester-1" is deleted and the driver lets its claims go
    And pod "tester-2" with an inline claim is created
    Then pod "tester-2" is running
    And every container of pod "tester-2" has its device
