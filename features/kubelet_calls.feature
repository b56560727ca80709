@DynamicResourceAllocation @Interposed
Feature: kubelet calls to any driver
  The kubelet side of DRA on one node that needs only the driver's calls
  counted, failed and stalled. These scenarios run on the suite's own driver
  and, through the interposer (--interpose), on the driver a profile names,
  with the same outcomes: what they check is what the kubelet does (pod
  status, events, claims), the counts only say it was the kubelet's call.
  (upstream: [sig-node] [DRA] kubelet [Feature:DynamicResourceAllocation])

  Background:
    Given 1 ready node
    And the driver under test

  Scenario: registers plugin
    Then the driver is registered on every node

  Scenario: must retry NodePrepareResources
    When NodePrepareResources is made to fail on node 0
    And pod "tester-1" with an inline claim is created
    Then NodePrepareResources is called on node 0
    When NodePrepareResources no longer fails on node 0
    Then pod "tester-1" is running
    And NodePrepareResources has been called again on node 0
    And every container of pod "tester-1" has its device

  Scenario: must not run a pod if a claim is not ready
    Given an external claim "external-claim"
    When pod "tester-1" using claim "external-claim" is created
      | node | 0 |
    Then pod "tester-1" stays pending for 20s
    And NodePrepareResources was called 0 times on node 0

  Scenario: must unprepare resources for force-deleted pod
    Given an external claim "external-claim"
    When pod "tester-1" using claim "external-claim" is created
      | grace period | 0 |
    Then pod "tester-1" is running
    And every container of pod "tester-1" has its device
    And the plugin on node 0 has prepared claim "external-claim"
    When pod "tester-1" is force-deleted
    Then no plugin has prepared claims

  Scenario: must call NodePrepareResources even if not used by any container
    When pod "tester-1" with an inline claim is created
      | containers use the claims | no |
    Then pod "tester-1" is running
    And the plugin on node 0 has prepared the claim of pod "tester-1"

  @KubeletMinVersion:1.34
  Scenario: blocks new pod after force-delete
    Given an external claim "external-claim"
    When pod "tester-1" using claim "external-claim" is created
      | node selector | 0 |
    Then pod "tester-1" is running
    And every container of pod "tester-1" has its device
    # Failed before the force-delete, where upstream fails it just after:
    # the kubelet cannot unprepare in between.
    When NodeUnprepareResources is made to fail on node 0
    And pod "tester-1" is force-deleted
    And claim "external-claim" is force-deleted
    Then claim "external-claim" is deleted
    And the plugin on node 0 has prepared only the old claim "external-claim"
    Given an external claim "external-claim"
    When pod "tester-1" using claim "external-claim" is created
      | node selector | 0 |
    Then pod "tester-1" gets a "FailedPrepareDynamicResources" event containing "old ResourceClaim with same name external-claim and different UID ${old uid:external-claim} still exists"
    When NodeUnprepareResources no longer fails on node 0
    Then pod "tester-1" is running
    And every container of pod "tester-1" has its device
    And the plugin on node 0 has prepared only the current claim "external-claim"

  # Beyond upstream: what a real driver meets in the field, which only the
  # interposer (or the suite's own driver) can make happen on demand.

  Scenario: a prepare whose answer was lost is retried
    The driver prepared the claim, but the kubelet got an error instead of
    the answer; it must ask again, and the driver must prepare the same
    claim a second time (preparing is idempotent).
    When NodePrepareResources is made to fail after the driver answers on node 0
    And pod "tester-1" with an inline claim is created
    Then pod "tester-1" gets a "FailedPrepareDynamicResources" event containing "injected error"
    And the plugin on node 0 has prepared the claim of pod "tester-1"
    When NodePrepareResources no longer fails on node 0
    Then pod "tester-1" is running
    And NodePrepareResources was called through the v1 API on node 0

  @FaultExempt:KubeletRestartPreparesAgain
  Scenario: a slow prepare delays the pod without failing it
    A driver that takes its time within the kubelet's deadline is waited
    for, not retried.
    When NodePrepareResources is delayed by 5s on node 0
    And pod "tester-1" with an inline claim is created
    Then pod "tester-1" runs without a "FailedPrepareDynamicResources" event
    And NodePrepareResources was called 1 time on node 0

  Scenario: a prepare whose connection broke is retried
    The driver prepared the claim, then the connection the call came on
    closed before the answer; the kubelet must reconnect and ask again.
    When NodePrepareResources has its connection cut after the driver answers on node 0
    And pod "tester-1" with an inline claim is created
    Then pod "tester-1" gets a "FailedPrepareDynamicResources" event containing "NodePrepareResources"
    And NodePrepareResources is called on node 0
    When NodePrepareResources is no longer cut on node 0
    Then pod "tester-1" is running
    And NodePrepareResources has been called again on node 0

  Scenario: an unprepare whose answer was lost is retried
    The driver unprepared the claim, but the kubelet got an error; it must
    ask again until it gets an answer.
    Given an external claim "claim"
    When pod "tester-1" using claim "claim" is created
    Then pod "tester-1" is running
    When NodeUnprepareResources is made to fail after the driver answers on node 0
    And pod "tester-1" is force-deleted
    Then NodeUnprepareResources is called on node 0
    When NodeUnprepareResources no longer fails on node 0
    Then NodeUnprepareResources has been called again on node 0
    And no plugin has prepared claims
