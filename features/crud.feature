Feature: CRUD of the resource.k8s.io types
  Upstream's conformance procedure for each DRA API type, with no driver
  involved: discovery lists the resource; create, get, update (PUT) of the
  object and of its status, get of the status; each patch applied alone to
  a deleted and re-created object; list in the namespace and in all
  namespaces; delete-collection. After every call a cluster-wide watch (and
  a namespace watch for namespaced types) must hold exactly the object and
  must have seen only the events upstream expects for it, resource versions
  never going back. Upstream leaves the content check off for conformance;
  these scenarios turn it on (every field sent must come back).
  (upstream: [sig-node] [DRA] CRUD Tests)

  @conformance
  Scenario: resource.k8s.io/v1 DeviceClass
    Then the CRUD conformance test of resource.k8s.io/v1 deviceclasses passes with:
      """
      initial:
        spec:
          selectors:
          - cel: { expression: "false" }   # matches no devices
      update:
        spec:
          selectors:
          - cel: { expression: "1 == 0" }  # still matches no devices
      patches:
      - type: strategic-merge
        data: { spec: { selectors: [ { cel: { expression: "1 == 0" } } ] } }
      verifyContent: true
      """

  @conformance @API:resource.k8s.io/v1/devicetaintrules
  Scenario: resource.k8s.io/v1 DeviceTaintRule
    # No device selector selects no devices, so NoExecute evicts nothing.
    Then the CRUD conformance test of resource.k8s.io/v1 devicetaintrules passes with:
      """
      initial:
        spec:
          taint: { key: testing, effect: None }
      update:
        spec:
          taint: { effect: NoExecute }
      patches:
      - type: strategic-merge
        data: { spec: { taint: { effect: NoExecute } } }
      updateStatus:
        status:
          conditions:
          - type: Testing
            status: "True"
            lastTransitionTime: "2026-01-01T00:00:00Z"
            reason: E2E_test_running
            message: This condition can be ignored.
      statusPatches:
      - type: strategic-merge
        data:
          status:
            conditions:
            - type: Testing
              status: "True"
              lastTransitionTime: "2026-01-01T00:00:00Z"
              reason: E2E_test_running
              message: This condition can be ignored.
      verifyContent: true
      """

  @conformance
  Scenario: resource.k8s.io/v1 ResourceClaim
    # The spec is immutable: the update and the patches add a label. Every
    # patch type is sent, as upstream does to show them all.
    Then the CRUD conformance test of resource.k8s.io/v1 resourceclaims passes with:
      """
      initial:
        spec:
          devices:
            requests:
            - name: req-0
              exactly: { deviceClassName: dra.example.com }
      update:
        metadata: { labels: { test.dra.example.com: test } }
      updateStatus:
        status: { allocation: {} }   # "nothing allocated" is a valid allocation
      patches:
      - type: strategic-merge
        data: { metadata: { labels: { test.dra.example.com: test } } }
      - type: apply
        data: { metadata: { labels: { test.dra.example.com: test } } }
      - type: json-merge
        data: { metadata: { labels: { test.dra.example.com: test } } }
      - type: json
        data: [ { op: add, path: /metadata/labels/test.dra.example.com, value: test } ]
      statusPatches:
      - type: strategic-merge
        data: { status: { allocation: {} } }
      - type: apply
        data: { status: { allocation: {} } }
      - type: json-merge
        data: { status: { allocation: {} } }
      - type: json
        data: [ { op: add, path: /status/allocation, value: {} } ]
      verifyContent: true
      """

  @conformance
  Scenario: resource.k8s.io/v1 ResourceClaimTemplate
    Then the CRUD conformance test of resource.k8s.io/v1 resourceclaimtemplates passes with:
      """
      initial:
        spec:
          spec:
            devices:
              requests:
              - name: req-0
                exactly: { deviceClassName: dra.example.com }
      update:
        metadata: { labels: { test.dra.example.com: test } }
      patches:
      - type: strategic-merge
        data: { metadata: { labels: { test.dra.example.com: test } } }
      verifyContent: true
      """

  @conformance
  Scenario: resource.k8s.io/v1 ResourceSlice
    Then the CRUD conformance test of resource.k8s.io/v1 resourceslices passes with:
      """
      initial:
        spec:
          driver: dra.example.com
          pool: { name: cluster, generation: 1, resourceSliceCount: 1 }
          nodeName: no-such-node
          # The pool is empty: no devices.
      update:
        spec:
          devices:
          - name: device-0
      patches:
      - type: strategic-merge
        data: { spec: { devices: [ { name: device-0 } ] } }
      verifyContent: true
      """

  # Not conformance upstream: an alpha API. Its spec is immutable, so the
  # update and the patch add a label; upstream has no status test for it yet.
  @FeatureGate:DRAResourcePoolStatus
  Scenario: resource.k8s.io/v1alpha3 ResourcePoolStatusRequest
    Then the CRUD conformance test of resource.k8s.io/v1alpha3 resourcepoolstatusrequests passes with:
      """
      initial:
        spec: { driver: dra.example.com }
      update:
        metadata: { labels: { test.dra.example.com: test } }
      patches:
      - type: strategic-merge
        data: { metadata: { labels: { test.dra.example.com: test } } }
      verifyContent: true
      """
