@DriverConformance
Feature: driver conformance: every node
  Beyond KEP-5970: the driver on each node of the cluster, not only one.

  Background:
    Given 2 ready nodes
    And the driver under test

  Scenario: the driver registers and publishes on every node
    A DaemonSet driver that comes up on one node only fails here.
    Then the driver is registered on every node
    And the driver publishes devices on every node

  Scenario: a pod on each node gets that node's device
    Each node's plugin prepares the claims of its own pods.
    When pod "tester-1" with an inline claim is created
      | node selector | 0 |
    And pod "tester-2" with an inline claim is created
      | node selector | 1 |
    Then all pods are running with their devices
    And all pods run on different nodes

  @DeviceCount @serial
  Scenario: slices follow a device that goes away
    A device the driver no longer offers (a card pulled, a partition
    undone) must leave its slices, so that the scheduler stops allocating
    it; when it is back, so is it. The runner restarts the driver with one
    device fewer on every node (the profile's deviceCount says how to tell
    it), then with all of them again. Each pool must stay consistent
    meanwhile: a driver that rewrites several slices of a pool without a
    new pool generation shows the scheduler an invalid pool.
    Given the driver's devices are noted
    And the driver's slices are watched
    When the driver is restarted with one device fewer on every node
    Then the driver publishes one device fewer than noted
    When the driver is restarted with all its devices
    Then the driver publishes the devices noted
    And the driver's pools were consistent throughout
