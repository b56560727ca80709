@DynamicResourceAllocation @FeatureGate:GenericWorkload @FeatureGate:DRAWorkloadResourceClaims @KubeletMinVersion:1.36
Feature: PodGroup claims
  A Workload's PodGroup can carry claims: every pod that joins the group uses
  the group's claims, reserved for the group rather than for the pod.
  (upstream: [sig-node] [DRA] kubelet [Feature:DynamicResourceAllocation] [FeatureGate:GenericWorkload] [FeatureGate:DRAWorkloadResourceClaims] [KubeletMinVersion:1.36])

  Background:
    Given 1 ready node
    And a driver with 1 device per node
    And a device class

  Scenario: allocates devices for PodGroups
    Given an external claim "external-claim"
    And a workload "tester-0" with a pod group using claim "external-claim"
    When pod "tester-1" joins the pod group of workload "tester-0"
    Then pod "tester-1" is running with env "user_a=b" in every container
    And pod "tester-1" uses the claims of the pod group of workload "tester-0"

  Scenario: generates claims from templates for PodGroups
    Given a workload "tester-0" with a pod group with an inline claim
    When pod "tester-1" joins the pod group of workload "tester-0"
    Then pod "tester-1" is running with env "user_a=b" in every container
    And pod "tester-1" uses the claims of the pod group of workload "tester-0"
