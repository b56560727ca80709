@DynamicResourceAllocation
Feature: driver lifecycle
  Drivers that start after their pods, and updates of a running driver.
  (upstream: [sig-node] [DRA] kubelet [Feature:DynamicResourceAllocation], driver set up inside each test)

  Scenario: runs pod after driver starts
    Given 1 to 4 ready nodes
    And a driver with 1 device per node, not started yet
    And a device class
    And an external claim "external-claim"
    When pod "tester-1" using claim "external-claim" is created
    Then pod "tester-1" is unschedulable
    When the driver starts
    Then pod "tester-1" is running
    And every container of pod "tester-1" has env "user_a=b"
    When pod "tester-1" is deleted
    Then no plugin has prepared claims

  @KubeletMinVersion:1.33 @FaultExempt:KubeletRestartWipesSlices
  Scenario: rolling update
    Given 1 ready node
    And a driver "old" with 1 device per node, in rolling-update mode
    And a device class for driver "old"
    And the slices of driver "old" are noted
    And a second instance "new" of driver "old"
    And an external claim "external-claim" for driver "old"
    When driver "old" is torn down
    And pod "tester-1" using claim "external-claim" is created
    Then pod "tester-1" is running with env "user_a=b" in every container
    And the slices of driver "new" are unchanged

  @KubeletMinVersion:1.33 @FaultExempt:KubeletRestartWipesSlices
  # The driver name (<namespace>-long-driver-name.k8s.io) is over 28 characters:
  # the registration socket falls back to a hashed name when the path gets too long.
  # Upstream's fixed gpu.dra-example-driver.sigs.k8s.io would be one name for every
  # concurrent scenario and run on a cluster, whose slices and sockets would then
  # mix; a name made from the scenario's namespace is as long and its own.
  Scenario: rolling update with long driver name
    Given 1 ready node
    And a driver "long-driver-name" with 1 device per node, in rolling-update mode
    And a device class for driver "long-driver-name"
    And the slices of driver "long-driver-name" are noted
    And a second instance "new" of driver "long-driver-name"
    And an external claim "external-claim" for driver "long-driver-name"
    When driver "long-driver-name" is torn down
    And pod "tester-1" using claim "external-claim" is created
    Then pod "tester-1" is running with env "user_a=b" in every container
    And the slices of driver "new" are unchanged

  @KubeletMinVersion:1.33 @FaultExempt:KubeletRestartWipesSlices
  Scenario: failed update
    Given 1 ready node
    And a driver "old" with 1 device per node, in rolling-update mode
    And a device class for driver "old"
    And the slices of driver "old" are noted
    And a second instance "new" of driver "old"
    And an external claim "external-claim" for driver "old"
    When driver "new" is torn down
    And pod "tester-1" using claim "external-claim" is created
    Then pod "tester-1" is running with env "user_a=b" in every container
    And the slices of driver "old" are unchanged

  # Upstream compares the slices only when the outage took at most 25 s and passes
  # without comparing them otherwise; here a longer outage fails the scenario, so
  # that a green run always compared them.
  @KubeletMinVersion:1.33 @slow @FaultExempt:KubeletRestartWipesSlices
  Scenario: sequential update with pods replacing each other
    Given 1 ready node
    And a driver "old" with 1 device per node
    And a device class for driver "old"
    And the slices of driver "old" are noted
    And a second instance "new" of driver "old", not started yet
    And an external claim "external-claim" for driver "old"
    When driver "old" is replaced by driver "new"
    And pod "tester-1" using claim "external-claim" is created
    Then pod "tester-1" is running with env "user_a=b" in every container
    And the outage was shorter than the kubelet's wiping delay
    And the slices of driver "new" are unchanged
    When all pods are deleted
    And driver "new" is torn down
    Then the slices of driver "new" are removed
