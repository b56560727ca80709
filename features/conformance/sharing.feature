@DriverConformance
Feature: driver conformance: claims, pods and containers
  Beyond KEP-5970: how a driver serves the ways pods use claims. Each
  scenario says in its description what it guards against.

  Background:
    Given 1 ready node
    And the driver under test

  Scenario: one claim shared by two pods
    A claim reserved for two pods on one node is prepared for both: a driver
    that keys its state by pod instead of claim gives the second nothing.
    Given an external claim "shared"
    When 2 pods "tester" using claim "shared" are created
    Then all pods are running with their devices
    And claim "shared" is reserved for pod "tester-1"
    And claim "shared" is reserved for pod "tester-2"

  Scenario: one claim shared by two containers
    Every container that names the claim gets the device, not only the first.
    When pod "tester-1" with an inline claim is created
      | containers | 2 |
    Then every container of pod "tester-1" has its device

  Scenario: only the containers that use a claim get its device
    CDI edits go to the containers the kubelet names for the claim, and no
    other: a container without the claim has none of the driver's variables.
    When pod "tester-1" with an inline claim is created
      | containers                | 2               |
      | containers use the claims | no              |
      | container 0 claims        | my-inline-claim |
    Then container "with-resource" of pod "tester-1" has its device
    And container "with-resource-1" of pod "tester-1" has no device

  Scenario: an init container and the app container both get the device
    The claim is prepared before the init container starts and stays
    prepared for the containers after it.
    When pod "tester-1" with an inline claim is created
      | init container | prints its env |
    Then pod "tester-1" is running
    And init container "init" of pod "tester-1" has its device
    And every container of pod "tester-1" has its device

  Scenario: several claims in one pod
    The kubelet asks for all of a pod's claims in one call; the driver must
    prepare each of them.
    Given an external claim "first"
    And an external claim "second"
    When pod "tester-1" using claims "first" and "second" is created
    Then every container of pod "tester-1" has its device
    And claim "first" is reserved for pod "tester-1"
    And claim "second" is reserved for pod "tester-1"

  Scenario: two containers with a claim each
    Each container gets its own claim's device and nothing of the other's:
    a driver that keeps one set of container edits for all the claims of a
    call gives every container every claim.
    Given an external claim "first"
    And an external claim "second"
    When pod "tester-1" using claims "first" and "second" is created
      | containers                | 2      |
      | containers use the claims | no     |
      | container 0 claims        | first  |
      | container 1 claims        | second |
    Then every container of pod "tester-1" has its device

  @DriverCapability:MultipleDevicesPerClaim
  Scenario: a request for two devices
    A request with a count gets that many devices, and the driver prepares
    every one of them for the pod.
    Given an external claim "pair" with spec:
      """
      devices:
        requests:
        - name: two
          exactly: { deviceClassName: ${class}, allocationMode: ExactCount, count: 2 }
      """
    When pod "tester-1" using claim "pair" is created
    Then claim "pair" is allocated with results "two", "two"
    And every container of pod "tester-1" has its device

  @DriverCapability:MultipleDevicesPerClaim
  Scenario: a claim with two requests
    Two requests of one claim get a device each, both prepared.
    Given an external claim "both" with spec:
      """
      devices:
        requests:
        - name: first
          exactly: { deviceClassName: ${class} }
        - name: second
          exactly: { deviceClassName: ${class} }
      """
    When pod "tester-1" using claim "both" is created
    Then claim "both" is allocated with results "first", "second"
    And every container of pod "tester-1" has its device

  @DriverCapability:AdminAccess
  Scenario: admin access to a device
    A claim with admin access gets a device in an admin namespace, and the
    driver prepares it like any other.
    Given the namespace is labelled "resource.kubernetes.io/admin-access=true"
    And an external claim "admin" with admin access
    When pod "tester-1" using claim "admin" is created
    Then every container of pod "tester-1" has its device
