@DynamicResourceAllocation @FeatureGate:DRADeviceTaints
Feature: device taints
  Devices can carry taints; a claim request gets such a device only when it
  tolerates the taint.
  (upstream: [sig-node] [DRA] kubelet [Feature:DynamicResourceAllocation] [FeatureGate:DRADeviceTaints])

  Background:
    Given 1 ready node

  Scenario: NoSchedule keeps pod pending
    Given a driver with a network pool of 10 tainted devices
    And a device class
    When pod "tester-1" with an inline claim is created
    Then pod "tester-1" is unschedulable
    And NodePrepareResources was called 0 times on node 0

  Scenario: NoSchedule can be tolerated
    Given a driver with a network pool of 10 tainted devices
    And a device class
    When pod "tester-1" with an inline claim is created
      | device toleration | NoSchedule |
    Then pod "tester-1" is running
    And every container of pod "tester-1" has env "user_a=b"

  Scenario: NoSchedule is tolerated only by a matching toleration
    Given a driver with a network pool of 10 devices tainted example.com/taint=tainted:NoSchedule
    And a device class
    When pod "tester-1" with an inline claim is created
      | device toleration | example.com/taint=other:NoSchedule |
    And pod "tester-2" with an inline claim is created
      | device toleration | example.com/taint=tainted:NoSchedule |
    Then pod "tester-2" is running
    And pod "tester-1" is unschedulable

  Scenario: NoExecute keeps pod pending
    Given a driver with a network pool of 10 devices tainted example.com/taint=tainted:NoExecute
    And a device class
    When pod "tester-1" with an inline claim is created
    Then pod "tester-1" is unschedulable

  Scenario: NoExecute can be tolerated
    Given a driver with a network pool of 10 devices tainted example.com/taint=tainted:NoExecute
    And a device class
    When pod "tester-1" with an inline claim is created
      | device toleration | example.com/taint:NoExecute |
    Then pod "tester-1" is running
    And pod "tester-1" stays running for 10s
    And the claim of pod "tester-1" is allocated
