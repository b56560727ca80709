@DynamicResourceAllocation
Feature: multiple claims on a single node
  (upstream: [sig-node] [DRA] kubelet [Feature:DynamicResourceAllocation] on single node with multiple claims allocation)

  Scenario: requests an already allocated and a new claim for a pod
    Given 1 ready node
    And a driver with 2 devices per node
    And a device class
    And an external claim "external-claim"
    And an external claim "external-claim-2"
    When pod "tester-1" using claim "external-claim" is created
    Then pod "tester-1" is running with env "user_a=b" in every container
    When pod "tester-2" using claims "external-claim" and "external-claim-2" is created
    Then pod "tester-2" is running with env "user_a=b" in every container
    And every container of pod "tester-2" has env "claim_external_claim_my_request=true" and "claim_external_claim_2_my_request=true"
