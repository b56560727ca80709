@DynamicResourceAllocation @FeatureGate:DRAOptionalNodeOperations @KubeletMinVersion:1.37
Feature: optional node operations
  A driver's ResourceSlices may say that the kubelet need not call
  NodePrepareResources and/or NodeUnprepareResources for their devices
  (spec.skipNodeOperations); the scheduler copies that into the claim's
  allocation, and the kubelet skips the calls, and the plugin lookup with them.
  (upstream: [sig-node] [DRA] kubelet [Feature:DynamicResourceAllocation] [FeatureGate:DRAOptionalNodeOperations]; @KubeletMinVersion:1.37 is ours: a 1.36 kubelet has no such gate and prepares every claim, found by make e2e-skew on 2026-12-05)

  Background:
    Given 1 ready node

  Rule: with control-plane only driver (no node plugin)

    Scenario: bypasses node preparation when SkipNodeOperations is All
      Given a driver with 1 device per node, not registered with the kubelet, skipping node operations "*"
      And a device class
      And an external claim "external-claim"
      When pod "tester-1" using claim "external-claim" is created
      Then pod "tester-1" is running
      And NotifyRegistrationStatus was called 0 times on node 0
      And pod "tester-1" got no "FailedPrepareDynamicResources" event

    Scenario: fails node preparation when SkipNodeOperations is not set
      Given a driver with 1 device per node, not registered with the kubelet
      And a device class
      And an external claim "external-claim"
      When pod "tester-1" using claim "external-claim" is created
      Then pod "tester-1" is scheduled
      And NotifyRegistrationStatus was called 0 times on node 0
      And pod "tester-1" gets a "FailedPrepareDynamicResources" event containing "DRA driver ${driver} is not registered"

    Scenario: fails node preparation when SkipNodeOperations is UnprepareOnly
      Given a driver with 1 device per node, not registered with the kubelet, skipping node operations "NodeUnprepareResources"
      And a device class
      And an external claim "external-claim"
      When pod "tester-1" using claim "external-claim" is created
      Then pod "tester-1" is scheduled
      And NotifyRegistrationStatus was called 0 times on node 0
      And pod "tester-1" gets a "FailedPrepareDynamicResources" event containing "DRA driver ${driver} is not registered"

  Rule: with standard driver (node plugin running)

    Scenario: bypasses node preparation and unprepare when SkipNodeOperations is All
      Given a driver with 1 device per node, skipping node operations "*"
      And a device class
      And an external claim "external-claim"
      When pod "tester-1" using claim "external-claim" is created
      # Not upstream's TestPod: without a prepare call the driver's env never
      # reaches the container.
      Then pod "tester-1" is running
      And NodePrepareResources was called 0 times on node 0
      When pod "tester-1" is deleted
      Then NodeUnprepareResources was called 0 times on node 0

    @FaultExempt:KubeletRestartPreparesAgain
    Scenario: bypasses node unprepare when SkipNodeOperations is UnprepareOnly
      Given a driver with 1 device per node, skipping node operations "NodeUnprepareResources"
      And a device class
      And an external claim "external-claim"
      When pod "tester-1" using claim "external-claim" is created
      Then pod "tester-1" is running with env "user_a=b" in every container
      And NodePrepareResources was called 1 time on node 0
      When pod "tester-1" is deleted
      Then NodeUnprepareResources was called 0 times on node 0
      And the plugin on node 0 has prepared claim "external-claim"
      # As upstream, so that teardown finds the plugin with nothing prepared.
      When the plugin on node 0 unprepares claim "external-claim" by hand
      Then no plugin has prepared claims
