@DynamicResourceAllocation
Feature: older resource.k8s.io API versions
  Templates and claims written through resource.k8s.io/v1beta1 and v1beta2
  work like v1 ones, and read back through the same version.
  (upstream: [sig-node] [DRA] kubelet [Feature:DynamicResourceAllocation] with v1beta1 API / with v1beta2 API)

  Background:
    Given 1 ready node
    And a driver with 1 device per node
    And a device class with parameters {"x":"y"}

  Scenario: supports simple ResourceClaim (v1beta1)
    Given the following objects are created:
      """
      apiVersion: resource.k8s.io/v1beta1
      kind: ResourceClaimTemplate
      metadata:
        name: old-template
      spec:
        spec:
          devices:
            requests:
            - { name: my-request, deviceClassName: "${class}" }
            config:
            - opaque: { driver: "${driver}", parameters: { a: b } }
      """
    When pod "tester-1" with an inline claim is created
      | template | old-template |
    Then pod "tester-1" is running
    And every container of pod "tester-1" has env "admin_x=y" and "user_a=b"

  Scenario: supports simple ResourceClaim (v1beta2)
    Given the following objects are created:
      """
      apiVersion: resource.k8s.io/v1beta2
      kind: ResourceClaimTemplate
      metadata:
        name: old-template
      spec:
        spec:
          devices:
            requests:
            - name: my-request
              exactly: { deviceClassName: "${class}" }
            config:
            - opaque: { driver: "${driver}", parameters: { a: b } }
      """
    When pod "tester-1" with an inline claim is created
      | template | old-template |
    Then pod "tester-1" is running
    And every container of pod "tester-1" has env "admin_x=y" and "user_a=b"

  @FeatureGate:DRAPrioritizedList
  Scenario: supports requests with alternatives (v1beta1)
    Given the following objects are created:
      """
      apiVersion: resource.k8s.io/v1beta1
      kind: ResourceClaim
      metadata:
        name: external-claim
      spec:
        devices:
          requests:
          - name: request-1
            firstAvailable:
            - { name: sub-request-1, deviceClassName: "${class}", allocationMode: ExactCount, count: 2 }
            - { name: sub-request-2, deviceClassName: "${class}", allocationMode: ExactCount, count: 1 }
          config:
          - opaque: { driver: "${driver}", parameters: { a: b } }
      """
    When pod "tester-1" using claim "external-claim" is created
    Then pod "tester-1" is running with env "admin_x=y" and "user_a=b" in every container
    And ResourceClaim "external-claim" has:
      """
      apiVersion: resource.k8s.io/v1beta1
      status:
        allocation:
          devices:
            results:
            - { request: request-1/sub-request-2, driver: "${driver}" }
      """

  @FeatureGate:DRAPrioritizedList
  Scenario: supports requests with alternatives (v1beta2)
    Given the following objects are created:
      """
      apiVersion: resource.k8s.io/v1beta2
      kind: ResourceClaim
      metadata:
        name: external-claim
      spec:
        devices:
          requests:
          - name: request-1
            firstAvailable:
            - { name: sub-request-1, deviceClassName: "${class}", allocationMode: ExactCount, count: 2 }
            - { name: sub-request-2, deviceClassName: "${class}", allocationMode: ExactCount, count: 1 }
          config:
          - opaque: { driver: "${driver}", parameters: { a: b } }
      """
    When pod "tester-1" using claim "external-claim" is created
    Then pod "tester-1" is running with env "admin_x=y" and "user_a=b" in every container
    And ResourceClaim "external-claim" has:
      """
      apiVersion: resource.k8s.io/v1beta2
      status:
        allocation:
          devices:
            results:
            - { request: request-1/sub-request-2, driver: "${driver}" }
      """
