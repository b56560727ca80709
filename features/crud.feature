Feature: CRUD of the resource.k8s.io types
  Create, read, list, update (PUT), patch (JSON merge, strategic merge, JSON
  and apply), status read, update and patch, delete and delete-collection
  of each DRA API type, with no driver involved, as upstream's conformance
  helper does: the five resource.k8s.io/v1 types, and the alpha
  resource.k8s.io/v1alpha3 ResourcePoolStatusRequest. A watch opened before
  the object exists sees it added, modified by every write and deleted,
  one object, resource versions never going back.
  (upstream: [sig-node] [DRA] CRUD Tests)

  @conformance
  Scenario: resource.k8s.io/v1 DeviceClass
    Given a watch on DeviceClass objects labelled "crud=${namespace}"
    And the following objects are created:
      """
      apiVersion: resource.k8s.io/v1
      kind: DeviceClass
      metadata:
        name: ${namespace}-crud
        labels: { crud: "${namespace}" }
      spec:
        selectors:
        - cel: { expression: "false" }
      """
    Then the watch sees DeviceClass "${namespace}-crud" added
    And listing DeviceClass objects labelled "crud=${namespace}" finds "${namespace}-crud"
    When DeviceClass "${namespace}-crud" is updated with:
      """
      spec:
        selectors:
        - cel: { expression: "1 == 0" }
      """
    Then the watch sees DeviceClass "${namespace}-crud" modified
    And DeviceClass "${namespace}-crud" has:
      """
      metadata: { labels: { crud: "${namespace}" } }
      spec:
        selectors:
        - cel: { expression: "1 == 0" }
      """
    When DeviceClass "${namespace}-crud" is patched with a strategic merge patch:
      """
      spec:
        selectors:
        - cel: { expression: "2 == 0" }
      """
    Then the watch sees DeviceClass "${namespace}-crud" modified
    And DeviceClass "${namespace}-crud" has:
      """
      spec:
        selectors:
        - cel: { expression: "2 == 0" }
      """
    When DeviceClass objects labelled "crud=${namespace}" are deleted as a collection
    Then the watch sees DeviceClass "${namespace}-crud" deleted
    And creating the following objects as the admin succeeds:
      """
      apiVersion: resource.k8s.io/v1
      kind: DeviceClass
      metadata:
        name: ${namespace}-crud
      spec: {}
      """

  @conformance
  Scenario: resource.k8s.io/v1 ResourceClaim
    Given a watch on ResourceClaim objects labelled "crud=${namespace}"
    And the following objects are created:
      """
      apiVersion: resource.k8s.io/v1
      kind: ResourceClaim
      metadata:
        name: crud-claim
        labels: { crud: "${namespace}" }
      spec:
        devices:
          requests:
          - name: req-0
            exactly: { deviceClassName: dra.example.com }
      """
    Then the watch sees ResourceClaim "crud-claim" added
    And listing ResourceClaim objects labelled "crud=${namespace}" finds "crud-claim"
    And ResourceClaim "crud-claim" has:
      """
      spec:
        devices:
          requests:
          - name: req-0
            exactly: { deviceClassName: dra.example.com, allocationMode: ExactCount, count: 1 }
      """
    # The spec is immutable: updates and patches change labels.
    When ResourceClaim "crud-claim" is updated with:
      """
      metadata: { labels: { test.dra.example.com: update } }
      """
    Then the watch sees ResourceClaim "crud-claim" modified
    When ResourceClaim "crud-claim" is patched with a JSON merge patch:
      """
      metadata: { labels: { merge.dra.example.com: test } }
      """
    Then the watch sees ResourceClaim "crud-claim" modified
    When ResourceClaim "crud-claim" is patched with a strategic merge patch:
      """
      metadata: { labels: { strategic.dra.example.com: test } }
      """
    Then the watch sees ResourceClaim "crud-claim" modified
    When ResourceClaim "crud-claim" is patched with a JSON patch:
      """
      - { op: add, path: /metadata/labels/json.dra.example.com, value: test }
      """
    Then the watch sees ResourceClaim "crud-claim" modified
    When ResourceClaim "crud-claim" is patched with an apply patch:
      """
      metadata: { labels: { apply.dra.example.com: test } }
      """
    Then the watch sees ResourceClaim "crud-claim" modified
    And ResourceClaim "crud-claim" has:
      """
      metadata:
        labels:
          crud: "${namespace}"
          test.dra.example.com: update
          merge.dra.example.com: test
          strategic.dra.example.com: test
          json.dra.example.com: test
          apply.dra.example.com: test
      """
    # "Nothing allocated" is a valid allocation; each status write sets it
    # after the one before was taken back.
    When the status of ResourceClaim "crud-claim" is updated with:
      """
      status: { allocation: {} }
      """
    Then the watch sees ResourceClaim "crud-claim" modified
    And the status of ResourceClaim "crud-claim" has:
      """
      status: { allocation: { devices: {} } }
      """
    When the status of ResourceClaim "crud-claim" is patched with a JSON patch:
      """
      - { op: remove, path: /status/allocation }
      """
    Then the watch sees ResourceClaim "crud-claim" modified
    And the status of ResourceClaim "crud-claim" has:
      """
      status: { allocation: null }
      """
    When the status of ResourceClaim "crud-claim" is patched with a JSON merge patch:
      """
      status: { allocation: {} }
      """
    Then the watch sees ResourceClaim "crud-claim" modified
    And the status of ResourceClaim "crud-claim" has:
      """
      status: { allocation: { devices: {} } }
      """
    When the status of ResourceClaim "crud-claim" is patched with a JSON patch:
      """
      - { op: remove, path: /status/allocation }
      """
    Then the watch sees ResourceClaim "crud-claim" modified
    When the status of ResourceClaim "crud-claim" is patched with a strategic merge patch:
      """
      status: { allocation: {} }
      """
    Then the watch sees ResourceClaim "crud-claim" modified
    And the status of ResourceClaim "crud-claim" has:
      """
      status: { allocation: { devices: {} } }
      """
    When the status of ResourceClaim "crud-claim" is patched with a JSON patch:
      """
      - { op: remove, path: /status/allocation }
      """
    Then the watch sees ResourceClaim "crud-claim" modified
    When the status of ResourceClaim "crud-claim" is patched with an apply patch:
      """
      status: { allocation: {} }
      """
    Then the watch sees ResourceClaim "crud-claim" modified
    And the status of ResourceClaim "crud-claim" has:
      """
      status: { allocation: { devices: {} } }
      """
    When ResourceClaim objects labelled "crud=${namespace}" are deleted as a collection
    Then the watch sees ResourceClaim "crud-claim" deleted

  @conformance
  Scenario: resource.k8s.io/v1 ResourceClaimTemplate
    Given a watch on ResourceClaimTemplate objects labelled "crud=${namespace}"
    And the following objects are created:
      """
      apiVersion: resource.k8s.io/v1
      kind: ResourceClaimTemplate
      metadata:
        name: crud-template
        labels: { crud: "${namespace}" }
      spec:
        spec:
          devices:
            requests:
            - name: req-0
              exactly: { deviceClassName: dra.example.com }
      """
    Then the watch sees ResourceClaimTemplate "crud-template" added
    And listing ResourceClaimTemplate objects labelled "crud=${namespace}" finds "crud-template"
    When ResourceClaimTemplate "crud-template" is updated with:
      """
      metadata: { labels: { test.dra.example.com: update } }
      """
    Then the watch sees ResourceClaimTemplate "crud-template" modified
    When ResourceClaimTemplate "crud-template" is patched with a strategic merge patch:
      """
      metadata: { labels: { strategic.dra.example.com: test } }
      """
    Then the watch sees ResourceClaimTemplate "crud-template" modified
    And ResourceClaimTemplate "crud-template" has:
      """
      metadata:
        labels: { crud: "${namespace}", test.dra.example.com: update, strategic.dra.example.com: test }
      spec:
        spec:
          devices:
            requests:
            - name: req-0
      """
    When ResourceClaimTemplate objects labelled "crud=${namespace}" are deleted as a collection
    Then the watch sees ResourceClaimTemplate "crud-template" deleted

  @conformance
  Scenario: resource.k8s.io/v1 ResourceSlice
    Given a watch on ResourceSlice objects labelled "crud=${namespace}"
    And the following objects are created:
      """
      apiVersion: resource.k8s.io/v1
      kind: ResourceSlice
      metadata:
        name: ${namespace}-crud
        labels: { crud: "${namespace}" }
      spec:
        driver: dra.example.com
        nodeName: no-such-node
        pool: { name: cluster, generation: 1, resourceSliceCount: 1 }
      """
    Then the watch sees ResourceSlice "${namespace}-crud" added
    And listing ResourceSlice objects labelled "crud=${namespace}" finds "${namespace}-crud"
    When ResourceSlice "${namespace}-crud" is updated with:
      """
      spec:
        devices:
        - name: device-0
      """
    Then the watch sees ResourceSlice "${namespace}-crud" modified
    And ResourceSlice "${namespace}-crud" has:
      """
      spec:
        nodeName: no-such-node
        devices:
        - name: device-0
      """
    When ResourceSlice "${namespace}-crud" is patched with a strategic merge patch:
      """
      spec:
        devices:
        - name: device-1
      """
    Then the watch sees ResourceSlice "${namespace}-crud" modified
    And ResourceSlice "${namespace}-crud" has:
      """
      spec:
        devices:
        - name: device-1
      """
    When ResourceSlice objects labelled "crud=${namespace}" are deleted as a collection
    Then the watch sees ResourceSlice "${namespace}-crud" deleted

  @conformance
  Scenario: resource.k8s.io/v1 DeviceTaintRule
    Given a watch on DeviceTaintRule objects labelled "crud=${namespace}"
    And the following objects are created:
      """
      apiVersion: resource.k8s.io/v1
      kind: DeviceTaintRule
      metadata:
        name: ${namespace}-crud
        labels: { crud: "${namespace}" }
      spec:
        # An empty selector would match every device in the cluster, and
        # NoExecute below would then evict other scenarios' pods.
        deviceSelector: { driver: no-such-driver.example.com }
        taint: { key: testing, effect: None }
      """
    Then the watch sees DeviceTaintRule "${namespace}-crud" added
    And listing DeviceTaintRule objects labelled "crud=${namespace}" finds "${namespace}-crud"
    When DeviceTaintRule "${namespace}-crud" is updated with:
      """
      spec:
        taint: { key: testing, effect: NoExecute }
      """
    Then the watch sees DeviceTaintRule "${namespace}-crud" modified
    And DeviceTaintRule "${namespace}-crud" has:
      """
      spec:
        taint: { key: testing, effect: NoExecute }
      """
    When the status of DeviceTaintRule "${namespace}-crud" is updated with:
      """
      status:
        conditions:
        - type: Testing
          status: "True"
          reason: Testing
          message: set by an update
          lastTransitionTime: "2026-01-01T00:00:00Z"
      """
    Then the watch sees DeviceTaintRule "${namespace}-crud" modified
    And the status of DeviceTaintRule "${namespace}-crud" has:
      """
      status:
        conditions:
        - { type: Testing, status: "True", message: set by an update }
      """
    When the status of DeviceTaintRule "${namespace}-crud" is patched with a strategic merge patch:
      """
      status:
        conditions:
        - type: Testing
          status: "True"
          reason: Testing
          message: set by a patch
          lastTransitionTime: "2026-01-01T00:00:00Z"
      """
    Then the watch sees DeviceTaintRule "${namespace}-crud" modified
    And the status of DeviceTaintRule "${namespace}-crud" has:
      """
      status:
        conditions:
        - { type: Testing, status: "True", message: set by a patch }
      """
    When DeviceTaintRule objects labelled "crud=${namespace}" are deleted as a collection
    Then the watch sees DeviceTaintRule "${namespace}-crud" deleted

  # Not conformance upstream: an alpha API. Its spec is immutable, so the
  # update and the patch change labels; the status is the controller's.
  @FeatureGate:DRAResourcePoolStatus
  Scenario: resource.k8s.io/v1alpha3 ResourcePoolStatusRequest
    Given a watch on ResourcePoolStatusRequest objects labelled "crud=${namespace}"
    And the following objects are created:
      """
      apiVersion: resource.k8s.io/v1alpha3
      kind: ResourcePoolStatusRequest
      metadata:
        name: ${namespace}-crud
        labels: { crud: "${namespace}" }
      spec:
        driver: dra.example.com
      """
    Then the watch sees ResourcePoolStatusRequest "${namespace}-crud" added
    And listing ResourcePoolStatusRequest objects labelled "crud=${namespace}" finds "${namespace}-crud"
    And ResourcePoolStatusRequest "${namespace}-crud" has:
      """
      spec: { driver: dra.example.com }
      """
    When ResourcePoolStatusRequest "${namespace}-crud" is updated with:
      """
      metadata: { labels: { test.dra.example.com: test } }
      """
    Then the watch sees ResourcePoolStatusRequest "${namespace}-crud" modified
    When ResourcePoolStatusRequest "${namespace}-crud" is patched with a strategic merge patch:
      """
      metadata: { labels: { strategic.dra.example.com: test } }
      """
    Then the watch sees ResourcePoolStatusRequest "${namespace}-crud" modified
    And ResourcePoolStatusRequest "${namespace}-crud" has:
      """
      metadata:
        labels: { crud: "${namespace}", test.dra.example.com: test, strategic.dra.example.com: test }
      spec: { driver: dra.example.com }
      """
    When ResourcePoolStatusRequest objects labelled "crud=${namespace}" are deleted as a collection
    Then the watch sees ResourcePoolStatusRequest "${namespace}-crud" deleted
