@DynamicResourceAllocation
Feature: multiple drivers
  One pod with claims of two drivers, whichever gRPC API versions their plugins serve.
  (upstream: [sig-node] [DRA] kubelet [Feature:DynamicResourceAllocation] with multiple drivers)

  Scenario Outline: work using <apis>
    Given 1 to 4 ready nodes
    And a driver with 2 devices per node, serving the <apis>
    And a driver "other" with 2 devices per node, serving the <apis>
    And a device class
    And a device class for driver "other"
    And an external claim "external-claim"
    And an external claim "external-claim-2"
    And an external claim "external-claim-other" for driver "other"
    And an external claim "external-claim-other-2" for driver "other"
    # As upstream's: the pod has all four claims, its container uses the first.
    When pod "tester-1" using claims "external-claim", "external-claim-2", "external-claim-other" and "external-claim-other-2" is created
      | container 0 claims | external-claim |
    Then pod "tester-1" is running
    And every container of pod "tester-1" has env "user_a=b"
    And NodePrepareResources of the driver was called through the <api> API on the node of pod "tester-1"
    And NodePrepareResources of driver "other" was called through the <api> API on the node of pod "tester-1"

    Examples:
      | apis                  | api     |
      | v1beta1 API           | v1beta1 |

    @KubeletMinVersion:1.34
    Examples:
      | apis                  | api     |
      | v1 API                | v1      |
      | v1beta1 and v1 APIs   | v1beta1 |
