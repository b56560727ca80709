@DriverConformance
Feature: driver conformance: claims across their pods' lives
  Beyond KEP-5970: preparing and unpreparing as pods come, go, complete
  and are deleted at awkward moments, and slices that stay what they are.

  Background:
    Given 1 ready node
    And the driver under test

  Scenario: a claim from a template is allocated and deleted with its pod
    The claim the control plane makes from the pod's template is the one
    the driver prepares, and it goes when the pod goes.
    When pod "tester-1" with an inline claim is created
    Then the claim of pod "tester-1" is allocated
    And every container of pod "tester-1" has its device
    When pod "tester-1" is deleted and the driver lets its claims go
    Then the claim of pod "tester-1" is deleted

  Scenario: a standalone claim outlives its pod and serves the next
    A claim made on its own is unprepared when its pod goes and prepared
    again for the next pod that uses it.
    Given an external claim "claim"
    When pod "tester-1" using claim "claim" is created
    Then every container of pod "tester-1" has its device
    When pod "tester-1" is deleted and the driver lets its claims go
    Then claim "claim" is not reserved
    When pod "tester-2" using claim "claim" is created
    Then every container of pod "tester-2" has its device

  Scenario: a standalone claim is deallocated after use
    Once no pod uses the claim, its device is free again.
    Given an external claim "claim"
    When pod "tester-1" using claim "claim" is created
    Then pod "tester-1" is running
    When pod "tester-1" is deleted and the driver lets its claims go
    Then claim "claim" is deallocated
    And pod "tester-1" got no "FailedUnprepareDynamicResources" event

  Scenario: a pod deleted as soon as it is scheduled
    Deleting a pod as soon as it is scheduled leaves no claim prepared and
    no unprepare failure, and the claim serves the next pod. Whether a
    prepare is in flight then is up to timing; the next scenario makes
    sure of it.
    Given an external claim "claim"
    When pod "tester-1" using claim "claim" is created
    Then pod "tester-1" is scheduled
    When pod "tester-1" is deleted and the driver lets its claims go
    Then claim "claim" is not reserved
    And pod "tester-1" got no "FailedUnprepareDynamicResources" event
    When pod "tester-2" using claim "claim" is created
    Then every container of pod "tester-2" has its device

  # The runner holds the prepare back: its own driver, or another behind
  # the interposer; elsewhere skipped with the reason.
  @Interposed
  Scenario: a pod deleted while its claim is being prepared
    A pod deleted while NodePrepareResources for its claim is in flight:
    once the prepare finishes, the kubelet must still unprepare the claim,
    so nothing stays prepared, no CDI spec of the claim is left, no
    unprepare fails, and the claim serves the next pod.
    Given an external claim "claim"
    When NodePrepareResources is stalled on node 0
    And pod "tester-1" using claim "claim" is created
    Then NodePrepareResources is called on node 0
    When pod "tester-1" is deleted while its claims are being prepared
    And NodePrepareResources is released on node 0
    Then the driver lets the claims of pod "tester-1" go
    And claim "claim" is not reserved
    And pod "tester-1" got no "FailedUnprepareDynamicResources" event
    When pod "tester-2" using claim "claim" is created
    Then every container of pod "tester-2" has its device

  Scenario: a force-deleted pod's claim is still unprepared
    A pod deleted with a grace period of 0 is gone from the API at once;
    the kubelet must still unprepare its claim, and the claim serves the
    next pod.
    Given an external claim "claim"
    When pod "tester-1" using claim "claim" is created
    Then every container of pod "tester-1" has its device
    When pod "tester-1" is force-deleted
    Then claim "claim" is not reserved
    And pod "tester-1" got no "FailedUnprepareDynamicResources" event
    When pod "tester-2" using claim "claim" is created
    Then every container of pod "tester-2" has its device

  Scenario: a completed pod releases its claim
    A pod that ran to completion no longer reserves its claim.
    Given an external claim "claim"
    When pod "tester-1" using claim "claim" is created
      | command        | true  |
      | restart policy | Never |
    Then pod "tester-1" is completed
    And claim "claim" is not reserved

  Scenario: a completed pod's generated claim is deleted
    The claim made from a template goes once its pod completed.
    When pod "tester-1" with an inline claim is created
      | command        | true  |
      | restart policy | Never |
    Then pod "tester-1" is completed
    And the claim of pod "tester-1" is deleted

  Scenario: slices stay the same while pods come and go
    Preparing and unpreparing does not change what the driver publishes.
    Given the driver's devices are noted
    When pod "tester-1" with an inline claim is created
    Then every container of pod "tester-1" has its device
    When pod "tester-1" is deleted and the driver lets its claims go
    Then the driver publishes the devices noted

  # Alone: with a driver the run shares, other scenarios' pods would hold
  # some of the node's devices.
  @DevicesPerNode @serial
  Scenario: every device in use keeps the next pod pending until one is free
    With every device of the node allocated, a further claim cannot be
    satisfied; when one pod goes, its device serves the waiting pod.
    When pods "busy" with an inline claim take every device of node 0
    And pod "waiting" with an inline claim is created
      | node selector | 0 |
    Then pod "waiting" stays pending for 10s
    When pod "busy-1" is deleted and the driver lets its claims go
    Then pod "waiting" is running
    And every container of pod "waiting" has its device

  # Alone: with a driver the run shares, other scenarios' pods would hold
  # some of the node's devices.
  @DevicesPerNode @serial
  Scenario: every device of a node in use at once
    Each of the node's devices can be prepared at the same time, each for
    its own pod.
    When pods "busy" with an inline claim take every device of node 0
    Then all pods are running with their devices

  @DriverPods @serial
  Scenario: the driver's pod restarted while claims are prepared
    A driver restarted (a crash, an update) must keep what it prepared: the
    running pod keeps running, its later deletion unprepares cleanly, the
    slices come back with the same devices and new claims are prepared.
    Given an external claim "claim"
    And the driver's devices are noted
    When pod "tester-1" using claim "claim" is created
    Then every container of pod "tester-1" has its device
    When the driver's pod on node 0 is restarted
    Then the driver publishes the devices noted
    And the driver is registered on every node
    And pod "tester-1" stays running for 5s
    When pod "tester-1" is deleted and the driver lets its claims go
    Then claim "claim" is deallocated
    And pod "tester-1" got no "FailedUnprepareDynamicResources" event
    When pod "tester-2" with an inline claim is created
    Then every container of pod "tester-2" has its device

  @NodeOperations @serial
  Scenario: a restarted kubelet finds its claims prepared
    After its restart the kubelet asks the driver again for the claims of
    the node's running pods; the driver must answer as it did the first
    time (NVIDIA k8s-dra-driver-gpu#782), the pod keeps running, and its
    deletion later unprepares cleanly.
    Given an external claim "claim"
    When pod "tester-1" using claim "claim" is created
    Then every container of pod "tester-1" has its device
    When the kubelet on the node of pod "tester-1" is restarted
    Then pod "tester-1" stays running for 5s
    And every container of pod "tester-1" has its device
    When pod "tester-1" is deleted and the driver lets its claims go
    Then claim "claim" is deallocated
    And pod "tester-1" got no "FailedUnprepareDynamicResources" event

  @NodeOperations @serial
  Scenario: a rebooted node prepares its claims again and the containers find their devices
    A reboot empties /run, where drivers write CDI specs (/var/run/cdi),
    and keeps /var/lib, where the kubelet and drivers keep their checkpoints.
    The kubelet prepares the claims of the node's pods again; a driver that
    answers from its checkpoint without writing the CDI spec again leaves
    the containers unable to start (kubernetes#141433). Deleting the pod
    afterwards still unprepares cleanly.
    Given an external claim "claim"
    When pod "tester-1" using claim "claim" is created
      | restart policy | Always |
    Then every container of pod "tester-1" has its device
    When the node of pod "tester-1" is rebooted
    Then pod "tester-1" runs again after the reboot
    And every container of pod "tester-1" has its device
    When pod "tester-1" is deleted and the driver lets its claims go
    Then claim "claim" is deallocated
    And pod "tester-1" got no "FailedUnprepareDynamicResources" event
