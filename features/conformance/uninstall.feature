@DriverConformance
Feature: driver conformance: uninstalling the driver
  Beyond KEP-5970: a driver taken off the cluster (helm uninstall, its
  manifests deleted) takes its ResourceSlices with it, or the scheduler
  goes on allocating devices that nobody serves. A node's kubelet wipes
  the driver's slices there some time after its plugin went away; a slice
  without a node name (a pool for selected nodes or all of them,
  network-attached devices) no kubelet ever wipes: the driver must remove
  it.

  Background:
    Given 1 ready node
    And the driver under test

  # Alone: every other scenario needs the driver while it is away.
  @DriverUninstalls @serial
  Scenario: uninstalling the driver leaves none of its slices
    After serving a pod, the driver is uninstalled: within 2 minutes (as
    long as upstream waits for a driver's slices after its teardown) none
    of its slices may be left. Installed again from the same manifests, it
    publishes the devices it had and serves a new pod.
    Given the driver's devices are noted
    When pod "tester-1" with an inline claim is created
    Then every container of pod "tester-1" has its device
    When pod "tester-1" is deleted and the driver lets its claims go
    And the driver is uninstalled
    Then none of the driver's ResourceSlices remain
    When the driver is installed again
    Then the driver is registered on every node
    And the driver publishes the devices noted
    When pod "tester-2" with an inline claim is created
    Then every container of pod "tester-2" has its device
