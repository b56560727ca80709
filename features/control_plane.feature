@DynamicResourceAllocation
Feature: control plane
  API validation, quota and permission checks that need no kubelet.
  (upstream: [sig-node] [DRA] control plane)

  Background:
    Given 1 ready node

  Scenario: validate ResourceClaimTemplate and ResourceClaim for admin access
    Given a driver with a network pool of 10 devices, not registered with the kubelet
    And a device class
    Then creating the following objects as the admin fails with "admin access to devices requires the `resource.kubernetes.io/admin-access: true` label on the containing namespace":
      """
      apiVersion: resource.k8s.io/v1
      kind: ResourceClaim
      metadata: { name: admin-claim, namespace: ${namespace} }
      spec:
        devices:
          requests:
          - name: my-request
            exactly: { deviceClassName: ${class}, adminAccess: true }
      ---
      apiVersion: resource.k8s.io/v1
      kind: ResourceClaimTemplate
      metadata: { name: admin-template, namespace: ${namespace} }
      spec:
        spec:
          devices:
            requests:
            - name: my-request
              exactly: { deviceClassName: ${class}, adminAccess: true }
      """
    When the namespace is labelled "resource.kubernetes.io/admin-access=true"
    Then creating the following objects as the admin succeeds:
      """
      apiVersion: resource.k8s.io/v1
      kind: ResourceClaim
      metadata: { name: admin-claim, namespace: ${namespace} }
      spec:
        devices:
          requests:
          - name: my-request
            exactly: { deviceClassName: ${class}, adminAccess: true }
      ---
      apiVersion: resource.k8s.io/v1
      kind: ResourceClaimTemplate
      metadata: { name: admin-template, namespace: ${namespace} }
      spec:
        spec:
          devices:
            requests:
            - name: my-request
              exactly: { deviceClassName: ${class}, adminAccess: true }
      """

  Scenario: truncates the name of a generated resource claim
    Given a driver with a network pool of 10 devices, not registered with the kubelet
    And a device class
    When pod "ppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp" with an inline claim is created
      | pod claim name | ccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc |
    Then pod "ppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp" is scheduled
    And the claim of pod "ppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp" has a name shorter than 64 characters

  Scenario: supports count/resourceclaims.resource.k8s.io ResourceQuota
    Given a driver with a network pool of 10 devices, not registered with the kubelet
    And a device class
    And an external claim "claim-0"
    And the following objects are created:
      """
      apiVersion: v1
      kind: ResourceQuota
      metadata: { name: object-count, namespace: ${namespace} }
      spec:
        hard: { count/resourceclaims.resource.k8s.io: "1" }
      """
    # Upstream compares the whole status, hard as well as used.
    Then resource quota "object-count" has status:
      | resource                             | hard | used |
      | count/resourceclaims.resource.k8s.io | 1    | 1    |
    And creating the following objects as the admin fails with "exceeded quota: object-count, requested: count/resourceclaims.resource.k8s.io=1, used: count/resourceclaims.resource.k8s.io=1, limited: count/resourceclaims.resource.k8s.io=1":
      """
      apiVersion: resource.k8s.io/v1
      kind: ResourceClaim
      metadata: { generateName: claim-1-, namespace: ${namespace} }
      spec:
        devices:
          requests:
          - name: my-request
            exactly: { deviceClassName: ${class} }
      """

  Scenario: must apply per-node permission checks
    Given a driver with 1 device per node, not registered with the kubelet
    # A slice of a node no plugin runs on: only a plugin on that node, and
    # the admin, may write it. Denials hold from the first request.
    Then creating the following objects as the plugin on node 0 is denied with "this user running on node '${node0}' may not modify resourceslices on node 'dra-fictional-node'":
      """
      apiVersion: resource.k8s.io/v1
      kind: ResourceSlice
      metadata: { name: dra-fictional-node-slice }
      spec:
        driver: dra.example.com
        nodeName: dra-fictional-node
        pool: { name: some-pool, generation: 1, resourceSliceCount: 1 }
      """
    And creating the following objects as the plugin on node "dra-fictional-node" succeeds:
      """
      apiVersion: resource.k8s.io/v1
      kind: ResourceSlice
      metadata: { name: dra-fictional-node-slice }
      spec:
        driver: dra.example.com
        nodeName: dra-fictional-node
        pool: { name: some-pool, generation: 1, resourceSliceCount: 1 }
      """
    And deleting ResourceSlice "dra-fictional-node-slice" as the plugin on node "dra-fictional-node" succeeds
    And creating the following objects as the admin succeeds:
      """
      apiVersion: resource.k8s.io/v1
      kind: ResourceSlice
      metadata: { name: dra-fictional-node-slice }
      spec:
        driver: dra.example.com
        nodeName: dra-fictional-node
        pool: { name: some-pool, generation: 1, resourceSliceCount: 1 }
      """
    And updating ResourceSlice "dra-fictional-node-slice" as the plugin on node 0 fails with "this user running on node '${node0}' may not modify resourceslices on node 'dra-fictional-node'"
    And updating ResourceSlice "dra-fictional-node-slice" as the plugin on node "dra-fictional-node" succeeds
    And updating ResourceSlice "dra-fictional-node-slice" as the admin succeeds
    And deleting ResourceSlice "dra-fictional-node-slice" as the plugin on node 0 fails with "this user running on node '${node0}' may not modify resourceslices on node 'dra-fictional-node'"
    And deleting ResourceSlice "dra-fictional-node-slice" as the plugin on node "dra-fictional-node" succeeds
    # A slice of no node: only the admin may write it.
    And creating the following objects as the plugin on node 0 is denied with "this user running on node '${node0}' may not modify cluster resourceslices":
      """
      apiVersion: resource.k8s.io/v1
      kind: ResourceSlice
      metadata: { name: cluster-slice }
      spec:
        driver: another.example.com
        allNodes: true
        pool: { name: cluster-pool, generation: 1, resourceSliceCount: 1 }
      """
    And creating the following objects as the plugin on node "dra-fictional-node" is denied with "this user running on node 'dra-fictional-node' may not modify cluster resourceslices":
      """
      apiVersion: resource.k8s.io/v1
      kind: ResourceSlice
      metadata: { name: cluster-slice }
      spec:
        driver: another.example.com
        allNodes: true
        pool: { name: cluster-pool, generation: 1, resourceSliceCount: 1 }
      """
    And creating the following objects as the admin succeeds:
      """
      apiVersion: resource.k8s.io/v1
      kind: ResourceSlice
      metadata: { name: cluster-slice }
      spec:
        driver: another.example.com
        allNodes: true
        pool: { name: cluster-pool, generation: 1, resourceSliceCount: 1 }
      """
    And updating ResourceSlice "cluster-slice" as the plugin on node 0 fails with "this user running on node '${node0}' may not modify cluster resourceslices"
    And updating ResourceSlice "cluster-slice" as the plugin on node "dra-fictional-node" fails with "this user running on node 'dra-fictional-node' may not modify cluster resourceslices"
    And updating ResourceSlice "cluster-slice" as the admin succeeds
    And deleting ResourceSlice "cluster-slice" as the plugin on node 0 fails with "this user running on node '${node0}' may not modify cluster resourceslices"
    And deleting ResourceSlice "cluster-slice" as the plugin on node "dra-fictional-node" fails with "this user running on node 'dra-fictional-node' may not modify cluster resourceslices"
    And deleting ResourceSlice "cluster-slice" as the admin succeeds

  # The refusal needs DRAResourceClaimGranularStatusAuthorization (1.36), which upstream does not tag.
  @FeatureGate:DRAResourceClaimDeviceStatus @FeatureGate:DRAResourceClaimGranularStatusAuthorization
  Scenario: must be impossible for a node ServiceAccount to update the non-node ResourceClaim.Status.Devices once allocated
    Given a driver with a network pool of 10 devices, not registered with the kubelet
    And a device class
    # The plugin may write the device status of claims on its own node: the
    # harness grants it as upstream's plugin-permissions.yaml does.
    And the following objects are created:
      """
      apiVersion: resource.k8s.io/v1
      kind: ResourceClaim
      metadata: { name: external-claim }
      spec:
        devices:
          requests:
          - name: my-request
            exactly: { deviceClassName: "${class}" }
      """
    When pod "tester-1" using claim "external-claim" is created
    Then pod "tester-1" is scheduled
    And claim "external-claim" is allocated
    And updating the status of ResourceClaim "external-claim" as the plugin on node 0 is refused as invalid with "cannot arbitrary-node:update":
      """
      status:
        devices:
        - driver: "${driver}"
          pool: network
          device: device-0
          conditions:
          - { type: a, status: "True", reason: Testing, message: set by the test, lastTransitionTime: "2026-01-01T00:00:00Z" }
          data: { foo: bar }
          networkData:
            interfaceName: inf1
            ips: [10.9.8.0/24, 2001:db8::/64]
            hardwareAddress: bc:1c:b6:3e:b8:25
      """

  @FeatureGate:DRAResourceClaimDeviceStatus
  Scenario: must be possible for a node ServiceAccount to update the node ResourceClaim.Status.Devices once allocated
    Given a driver with 1 device per node, not registered with the kubelet
    And a device class
    # The plugin may write the device status of claims on its own node: the
    # harness grants it as upstream's plugin-permissions.yaml does.
    And the following objects are created:
      """
      apiVersion: resource.k8s.io/v1
      kind: ResourceClaim
      metadata: { name: external-claim }
      spec:
        devices:
          requests:
          - name: my-request
            exactly: { deviceClassName: "${class}" }
      """
    When pod "tester-1" using claim "external-claim" is created
    Then pod "tester-1" is scheduled
    And claim "external-claim" is allocated
    When the status of ResourceClaim "external-claim" is updated as the plugin on node 0 with:
      """
      status:
        devices:
        - driver: "${driver}"
          pool: "${node0}"
          device: device-00
          conditions:
          - { type: a, status: "True", reason: d, message: c, lastTransitionTime: "2026-01-01T00:00:00Z" }
          data: { foo: bar }
          networkData:
            interfaceName: inf1
            ips: [10.9.8.0/24, 2001:db8::/64]
            hardwareAddress: bc:1c:b6:3e:b8:25
      """
    Then ResourceClaim "external-claim" has "status.devices" equal to:
      """
      - driver: "${driver}"
        pool: "${node0}"
        device: device-00
        conditions:
        - { type: a, status: "True", reason: d, message: c, lastTransitionTime: "2026-01-01T00:00:00Z" }
        data: { foo: bar }
        networkData:
          interfaceName: inf1
          ips: [10.9.8.0/24, 2001:db8::/64]
          hardwareAddress: bc:1c:b6:3e:b8:25
      """
    When the status of ResourceClaim "external-claim" is updated as the plugin on node 0 with:
      """
      status:
        devices:
        - driver: "${driver}"
          pool: "${node0}"
          device: device-00
          conditions:
          - { type: e, status: "True", reason: h, message: g, lastTransitionTime: "2026-01-02T00:00:00Z" }
          data: { bar: foo }
          networkData:
            interfaceName: inf2
            ips: [10.9.8.1/24, 2001:db8::1/64]
            hardwareAddress: bc:1c:b6:3e:b8:26
      """
    Then ResourceClaim "external-claim" has "status.devices" equal to:
      """
      - driver: "${driver}"
        pool: "${node0}"
        device: device-00
        conditions:
        - { type: e, status: "True", reason: h, message: g, lastTransitionTime: "2026-01-02T00:00:00Z" }
        data: { bar: foo }
        networkData:
          interfaceName: inf2
          ips: [10.9.8.1/24, 2001:db8::1/64]
          hardwareAddress: bc:1c:b6:3e:b8:26
      """

  # The refusal needs DRAResourceClaimGranularStatusAuthorization (1.36), which upstream does not tag.
  @FeatureGate:DRAResourceClaimDeviceStatus @FeatureGate:DRAResourceClaimGranularStatusAuthorization
  Scenario: must be possible for a control-plane ServiceAccount to update the ResourceClaim.Status.Devices once allocated
    Given a driver with a network pool of 1 device, not registered with the kubelet
    And a device class
    # A controller's account may write claim status, but devices' status
    # only with the driver's arbitrary-node permission.
    And the following objects are created:
      """
      apiVersion: v1
      kind: ServiceAccount
      metadata: { name: claim-status-updater-sa }
      ---
      apiVersion: rbac.authorization.k8s.io/v1
      kind: ClusterRole
      metadata: { name: "${namespace}-claim-status-updater" }
      rules:
      - apiGroups: [resource.k8s.io]
        resources: [resourceclaims/status]
        verbs: [update, patch]
      - apiGroups: [resource.k8s.io]
        resources: [resourceclaims]
        verbs: [get]
      ---
      apiVersion: rbac.authorization.k8s.io/v1
      kind: ClusterRoleBinding
      metadata: { name: "${namespace}-claim-status-updater" }
      subjects:
      - { kind: ServiceAccount, name: claim-status-updater-sa, namespace: "${namespace}" }
      roleRef: { apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "${namespace}-claim-status-updater" }
      """
    And an external claim "external-claim"
    When pod "tester-1" using claim "external-claim" is created
    Then pod "tester-1" is scheduled
    And claim "external-claim" is allocated
    And updating the status of ResourceClaim "external-claim" as service account "claim-status-updater-sa" is refused as invalid with "is forbidden":
      """
      status:
        devices:
        - driver: "${driver}"
          pool: network
          device: device-0
          conditions:
          - { type: a, status: "True", reason: d, message: c, lastTransitionTime: "2026-01-01T00:00:00Z" }
          data: { foo: bar }
          networkData:
            interfaceName: inf1
            ips: [10.9.8.0/24, 2001:db8::/64]
            hardwareAddress: bc:1c:b6:3e:b8:25
      """
    When ClusterRole "${namespace}-claim-status-updater" is patched with:
      """
      rules:
      - apiGroups: [resource.k8s.io]
        resources: [resourceclaims/status]
        verbs: [update, patch]
      - apiGroups: [resource.k8s.io]
        resources: [resourceclaims]
        verbs: [get]
      - apiGroups: [resource.k8s.io]
        resources: [resourceclaims/driver]
        resourceNames: ["${driver}"]
        verbs: ["arbitrary-node:update", "arbitrary-node:patch"]
      """
    And the status of ResourceClaim "external-claim" is updated as service account "claim-status-updater-sa" with:
      """
      status:
        devices:
        - driver: "${driver}"
          pool: network
          device: device-0
          conditions:
          - { type: a, status: "True", reason: d, message: c, lastTransitionTime: "2026-01-01T00:00:00Z" }
          data: { foo: bar }
          networkData:
            interfaceName: inf1
            ips: [10.9.8.0/24, 2001:db8::/64]
            hardwareAddress: bc:1c:b6:3e:b8:25
      """
    Then ResourceClaim "external-claim" has "status.devices" equal to:
      """
      - driver: "${driver}"
        pool: network
        device: device-0
        conditions:
        - { type: a, status: "True", reason: d, message: c, lastTransitionTime: "2026-01-01T00:00:00Z" }
        data: { foo: bar }
        networkData:
          interfaceName: inf1
          ips: [10.9.8.0/24, 2001:db8::/64]
          hardwareAddress: bc:1c:b6:3e:b8:25
      """
    # Any driver's devices, with a rule that names none.
    When ClusterRole "${namespace}-claim-status-updater" is patched with:
      """
      rules:
      - apiGroups: [resource.k8s.io]
        resources: [resourceclaims/status]
        verbs: [update, patch]
      - apiGroups: [resource.k8s.io]
        resources: [resourceclaims]
        verbs: [get]
      - apiGroups: [resource.k8s.io]
        resources: [resourceclaims/driver]
        verbs: ["arbitrary-node:update", "arbitrary-node:patch"]
      """
    And the status of ResourceClaim "external-claim" is updated as service account "claim-status-updater-sa" with:
      """
      status:
        devices:
        - driver: "${driver}"
          pool: network
          device: device-0
          conditions:
          - { type: e, status: "True", reason: h, message: g, lastTransitionTime: "2026-01-02T00:00:00Z" }
          data: { bar: foo }
          networkData:
            interfaceName: inf2
            ips: [10.9.8.1/24, 2001:db8::1/64]
            hardwareAddress: bc:1c:b6:3e:b8:26
      """
    Then ResourceClaim "external-claim" has "status.devices" equal to:
      """
      - driver: "${driver}"
        pool: network
        device: device-0
        conditions:
        - { type: e, status: "True", reason: h, message: g, lastTransitionTime: "2026-01-02T00:00:00Z" }
        data: { bar: foo }
        networkData:
          interfaceName: inf2
          ips: [10.9.8.1/24, 2001:db8::1/64]
          hardwareAddress: bc:1c:b6:3e:b8:26
      """
