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
      | device toleration | NoExecute |
    Then pod "tester-1" is running with env "user_a=b" in every container
    And pod "tester-1" stays running for 10s
    And the claim of pod "tester-1" is allocated

  @FeatureGate:DRADeviceTaintRules @API:resource.k8s.io/v1/devicetaintrules
  Scenario: DeviceTaintRule evicts pod
    Given a driver with a network pool of 10 tainted devices
    And a device class
    When pod "tester-1" with an inline claim is created
      | device toleration | NoSchedule |
    And pod "tester-1" is kept by finalizer "e2e-test/dont-delete-me"
    Then pod "tester-1" is running with env "user_a=b" in every container
    When a DeviceTaintRule for the devices of the driver with taint "test.example.com/evict=now:NoExecute" is created
    Then the taint of the DeviceTaintRule was added within a minute of now
    And pod "tester-1" is evicted by the device taint manager

  Rule: PodGroup claims
    (upstream sub-context: [FeatureGate:DRAWorkloadResourceClaims] [FeatureGate:GenericWorkload] [KubeletMinVersion:1.36])

    @FeatureGate:DRAWorkloadResourceClaims @FeatureGate:GenericWorkload @KubeletMinVersion:1.36
    Scenario: NoSchedule keeps pod with PodGroup claim pending
      Given a driver with a network pool of 10 tainted devices
      And a device class
      And a workload "tester-0" with a pod group with an inline claim
      When pod "tester-1" joins the pod group of workload "tester-0"
      Then pod "tester-1" is unschedulable

    @FeatureGate:DRAWorkloadResourceClaims @FeatureGate:GenericWorkload @KubeletMinVersion:1.36
    Scenario: NoSchedule can be tolerated for PodGroup claims
      Given a driver with a network pool of 10 tainted devices
      And a device class
      And a workload "tester-0" with a pod group with an inline claim
        | device toleration | NoSchedule |
      When pod "tester-1" joins the pod group of workload "tester-0"
      Then pod "tester-1" is running with env "user_a=b" in every container
      And pod "tester-1" uses the claims of the pod group of workload "tester-0"

    @FeatureGate:DRAWorkloadResourceClaims @FeatureGate:GenericWorkload @KubeletMinVersion:1.36 @FeatureGate:DRADeviceTaintRules @API:resource.k8s.io/v1/devicetaintrules
    Scenario: DeviceTaintRule evicts pod with PodGroup claim
      Given a driver with a network pool of 10 tainted devices
      And a device class
      And a workload "tester-0" with a pod group with an inline claim
        | device toleration | NoSchedule |
      When pod "tester-1" joins the pod group of workload "tester-0"
      And pod "tester-1" is kept by finalizer "e2e-test/dont-delete-me"
      Then pod "tester-1" is running with env "user_a=b" in every container
      And pod "tester-1" uses the claims of the pod group of workload "tester-0"
      When a DeviceTaintRule for the devices of the driver with taint "test.example.com/evict=now:NoExecute" is created
      Then the taint of the DeviceTaintRule was added within a minute of now
      And pod "tester-1" is evicted by the device taint manager
