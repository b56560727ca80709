@DynamicResourceAllocation @FeatureGate:DRAPrioritizedList
Feature: prioritized list
  A request can list alternatives (firstAvailable); the scheduler takes the
  first sub-request it can satisfy, and configs follow the chosen one.
  (upstream: [sig-node] [DRA] kubelet [Feature:DynamicResourceAllocation] [FeatureGate:DRAPrioritizedList])

  Background:
    Given 1 ready node
    And a driver "1" with these devices:
      | node | device     | attributes                                              |
      | 0    | device-1-1 | dra.example.com/version=1.0.0, dra.example.com/pcieRoot=bar |
      | 0    | device-1-2 | dra.example.com/version=2.0.0, dra.example.com/pcieRoot=foo |
    And a driver "2" with these devices:
      | node | device     | attributes                                              |
      | 0    | device-2-1 | dra.example.com/version=1.0.0, dra.example.com/pcieRoot=foo |
    And a device class for driver "1" with parameters {"driver":"1"}
    And a device class for driver "2" with parameters {"driver":"2"}

  Scenario: selects the first subrequest that can be satisfied
    Given an external claim "external-multiclaim" with spec:
      """
      devices:
        requests:
        - name: request-1
          firstAvailable:
          - { name: sub-request-1, deviceClassName: "${class:1}", allocationMode: ExactCount, count: 3 }
          - { name: sub-request-2, deviceClassName: "${class:1}", allocationMode: ExactCount, count: 2 }
          - { name: sub-request-3, deviceClassName: "${class:1}", allocationMode: ExactCount, count: 1 }
        config:
        - requests: [request-1]
          opaque: { driver: "${driver:1}", parameters: { a: b } }
      """
    When pod "tester-1" using claim "external-multiclaim" is created
    Then pod "tester-1" is running with env "user_a=b" in every container
    And claim "external-multiclaim" is allocated with results "request-1/sub-request-2", "request-1/sub-request-2"

  Scenario: uses the config for the selected subrequest
    Given an external claim "external-multiclaim" with spec:
      """
      devices:
        requests:
        - name: request-1
          firstAvailable:
          - { name: sub-request-1, deviceClassName: "${class:1}", allocationMode: ExactCount, count: 3 }
          - { name: sub-request-2, deviceClassName: "${class:1}", allocationMode: ExactCount, count: 2 }
        config:
        - requests: [request-1]
          opaque: { driver: "${driver:1}", parameters: { a: b } }
        - requests: [request-1/sub-request-1]
          opaque: { driver: "${driver:1}", parameters: { c: d } }
        - requests: [request-1/sub-request-2]
          opaque: { driver: "${driver:1}", parameters: { e: f } }
      """
    When pod "tester-1" using claim "external-multiclaim" is created
    Then pod "tester-1" is running
    And container "with-resource" of pod "tester-1" has exactly the driver env "admin_driver=1", "user_a=b", "user_e=f", "claim_external_multiclaim_request_1=true"

  Scenario: chooses the correct subrequest subject to constraints
    Given an external claim "external-multiclaim" with spec:
      """
      devices:
        requests:
        - name: request-1
          firstAvailable:
          - { name: sub-request-1, deviceClassName: "${class:1}", allocationMode: ExactCount, count: 1 }
          - { name: sub-request-2, deviceClassName: "${class:1}", allocationMode: ExactCount, count: 1 }
        - name: request-2
          exactly: { deviceClassName: "${class:2}", allocationMode: ExactCount, count: 1 }
        constraints:
        - requests: [request-1, request-2]
          matchAttribute: dra.example.com/version
        - requests: [request-1/sub-request-1, request-2]
          matchAttribute: dra.example.com/pcieRoot
        config:
        - opaque: { driver: "${driver:1}", parameters: { a: b } }
      """
    When pod "tester-1" using claim "external-multiclaim" is created
    Then pod "tester-1" is running with env "user_a=b" in every container
    And claim "external-multiclaim" is allocated with results "request-1/sub-request-2", "request-2"

  Scenario: filters config correctly for multiple devices
    Given an external claim "external-multiclaim" with spec:
      """
      devices:
        requests:
        - name: request-1
          firstAvailable:
          - { name: sub-request-1, deviceClassName: "${class:1}", allocationMode: ExactCount, count: 20 }
          - { name: sub-request-2, deviceClassName: "${class:1}", allocationMode: ExactCount, count: 1 }
        - name: request-2
          exactly: { deviceClassName: "${class:2}", allocationMode: ExactCount, count: 1 }
        config:
        - requests: [request-1]
          opaque: { driver: "${driver:1}", parameters: { a: b } }
        - requests: [request-1/sub-request-1]
          opaque: { driver: "${driver:1}", parameters: { c: d } }
        - requests: [request-1/sub-request-2]
          opaque: { driver: "${driver:1}", parameters: { e: f } }
        - requests: [request-2]
          opaque: { driver: "${driver:2}", parameters: { g: h } }
      """
    When pod "tester-1" using claim "external-multiclaim" is created
      | containers       | 2                                   |
      | container 0 claims | resource-claim/request-1          |
      | container 1 claims | resource-claim/request-2          |
    Then pod "tester-1" is running
    And claim "external-multiclaim" is allocated with results "request-1/sub-request-2", "request-2"
    And container "with-resource" of pod "tester-1" has exactly the driver env "admin_driver=1", "user_a=b", "user_e=f", "claim_external_multiclaim_request_1=true"
    And container "with-resource-1" of pod "tester-1" has exactly the driver env "admin_driver=2", "user_g=h", "claim_external_multiclaim_request_2=true"
