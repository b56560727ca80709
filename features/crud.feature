Feature: CRUD of the resource.k8s.io/v1 types
  Create, read, list, update, patch and delete each DRA API type, with no
  driver involved.
  (upstream: [sig-node] [DRA] CRUD Tests)

  @conformance
  Scenario: resource.k8s.io/v1 DeviceClass
    Given the following objects are created:
      """
      apiVersion: resource.k8s.io/v1
      kind: DeviceClass
      metadata:
        name: ${namespace}-crud
      spec:
        selectors:
        - cel: { expression: "false" }
      """
    Then listing DeviceClass objects finds "${namespace}-crud"
    When DeviceClass "${namespace}-crud" is patched with:
      """
      metadata: { labels: { crud: patched } }
      spec:
        selectors:
        - cel: { expression: "1 == 0" }
      """
    Then DeviceClass "${namespace}-crud" has:
      """
      metadata: { labels: { crud: patched } }
      spec:
        selectors:
        - cel: { expression: "1 == 0" }
      """
    When DeviceClass "${namespace}-crud" is deleted
    Then creating the following objects as the admin succeeds:
      """
      apiVersion: resource.k8s.io/v1
      kind: DeviceClass
      metadata:
        name: ${namespace}-crud
      spec: {}
      """

  @conformance
  Scenario: resource.k8s.io/v1 ResourceClaim
    Given the following objects are created:
      """
      apiVersion: resource.k8s.io/v1
      kind: ResourceClaim
      metadata:
        name: crud-claim
      spec:
        devices:
          requests:
          - name: req-0
            exactly: { deviceClassName: dra.example.com }
      """
    Then listing ResourceClaim objects finds "crud-claim"
    When ResourceClaim "crud-claim" is patched with:
      """
      metadata: { labels: { crud: patched } }
      """
    Then ResourceClaim "crud-claim" has:
      """
      metadata: { labels: { crud: patched } }
      spec:
        devices:
          requests:
          - name: req-0
            exactly: { deviceClassName: dra.example.com, allocationMode: ExactCount, count: 1 }
      """
    When the status of ResourceClaim "crud-claim" is patched with:
      """
      status:
        allocation:
          devices: { results: [] }
      """
    Then ResourceClaim "crud-claim" has:
      """
      status:
        allocation:
          devices: {}
      """
    When ResourceClaim "crud-claim" is deleted

  @conformance
  Scenario: resource.k8s.io/v1 ResourceClaimTemplate
    Given the following objects are created:
      """
      apiVersion: resource.k8s.io/v1
      kind: ResourceClaimTemplate
      metadata:
        name: crud-template
      spec:
        spec:
          devices:
            requests:
            - name: req-0
              exactly: { deviceClassName: dra.example.com }
      """
    Then listing ResourceClaimTemplate objects finds "crud-template"
    When ResourceClaimTemplate "crud-template" is patched with:
      """
      metadata: { labels: { crud: patched } }
      """
    Then ResourceClaimTemplate "crud-template" has:
      """
      metadata: { labels: { crud: patched } }
      spec:
        spec:
          devices:
            requests:
            - name: req-0
      """
    When ResourceClaimTemplate "crud-template" is deleted

  @conformance
  Scenario: resource.k8s.io/v1 ResourceSlice
    Given the following objects are created:
      """
      apiVersion: resource.k8s.io/v1
      kind: ResourceSlice
      metadata:
        name: ${namespace}-crud
      spec:
        driver: dra.example.com
        nodeName: no-such-node
        pool: { name: cluster, generation: 1, resourceSliceCount: 1 }
      """
    Then listing ResourceSlice objects finds "${namespace}-crud"
    When ResourceSlice "${namespace}-crud" is patched with:
      """
      spec:
        devices:
        - name: device-0
      """
    Then ResourceSlice "${namespace}-crud" has:
      """
      spec:
        nodeName: no-such-node
        devices:
        - name: device-0
      """
    When ResourceSlice "${namespace}-crud" is deleted

  @conformance
  Scenario: resource.k8s.io/v1 DeviceTaintRule
    Given the following objects are created:
      """
      apiVersion: resource.k8s.io/v1
      kind: DeviceTaintRule
      metadata:
        name: ${namespace}-crud
      spec:
        # An empty selector would match every device in the cluster, and
        # NoExecute below would then evict other scenarios' pods.
        deviceSelector: { driver: no-such-driver.example.com }
        taint: { key: testing, effect: None }
      """
    Then listing DeviceTaintRule objects finds "${namespace}-crud"
    When DeviceTaintRule "${namespace}-crud" is patched with:
      """
      spec:
        taint: { key: testing, effect: NoExecute }
      """
    Then DeviceTaintRule "${namespace}-crud" has:
      """
      spec:
        taint: { key: testing, effect: NoExecute }
      """
    When the status of DeviceTaintRule "${namespace}-crud" is patched with:
      """
      status:
        conditions:
        - type: Testing
          status: "True"
          reason: Testing
          message: set by the CRUD test
          lastTransitionTime: "2026-01-01T00:00:00Z"
      """
    Then DeviceTaintRule "${namespace}-crud" has:
      """
      status:
        conditions:
        - type: Testing
          status: "True"
      """
    When DeviceTaintRule "${namespace}-crud" is deleted
