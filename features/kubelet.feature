@DynamicResourceAllocation
Feature: kubelet
  The kubelet side of DRA on one node: plugin registration, NodePrepareResources
  and NodeUnprepareResources, and how claims reach containers.
  (upstream: [sig-node] [DRA] kubelet [Feature:DynamicResourceAllocation])

  Background:
    Given 1 ready node
    And a driver with a network pool of 10 devices
    And a device class

  Scenario: must map configs and devices to the right containers
    Given an external claim "all" with spec:
      """
      devices:
        requests:
        - name: req0
          exactly: { deviceClassName: ${class} }
        - name: req1
          exactly: { deviceClassName: ${class} }
        - name: req2
          exactly: { deviceClassName: ${class} }
        config:
        - opaque: { driver: ${driver}, parameters: { all_config0: "true" } }
        - requests: [req1]
          opaque: { driver: ${driver}, parameters: { all_config1: "true" } }
        - requests: [req2]
          opaque: { driver: ${driver}, parameters: { all_config2: "true" } }
      """
    And an external claim "container0" with spec:
      """
      devices:
        requests:
        - name: req0
          exactly: { deviceClassName: ${class} }
        - name: req1
          exactly: { deviceClassName: ${class} }
        - name: req2
          exactly: { deviceClassName: ${class} }
        config:
        - opaque: { driver: ${driver}, parameters: { container0_config0: "true" } }
        - requests: [req1]
          opaque: { driver: ${driver}, parameters: { container0_config1: "true" } }
        - requests: [req2]
          opaque: { driver: ${driver}, parameters: { container0_config2: "true" } }
      """
    And an external claim "container1" with spec:
      """
      devices:
        requests:
        - name: req0
          exactly: { deviceClassName: ${class} }
        - name: req1
          exactly: { deviceClassName: ${class} }
        - name: req2
          exactly: { deviceClassName: ${class} }
        config:
        - opaque: { driver: ${driver}, parameters: { container1_config0: "true" } }
        - requests: [req1]
          opaque: { driver: ${driver}, parameters: { container1_config1: "true" } }
        - requests: [req2]
          opaque: { driver: ${driver}, parameters: { container1_config2: "true" } }
      """
    When pod "tester-1" using claims "all", "container0" and "container1" is created
      | containers         | 2                     |
      | container 0 claims | all, container0       |
      | container 1 claims | all, container1/req1  |
    Then pod "tester-1" is running
    And container "with-resource" of pod "tester-1" has exactly the driver env "user_all_config0=true", "user_all_config1=true", "user_all_config2=true", "claim_all_req0=true", "claim_all_req1=true", "claim_all_req2=true", "user_container0_config0=true", "user_container0_config1=true", "user_container0_config2=true", "claim_container0_req0=true", "claim_container0_req1=true", "claim_container0_req2=true"
    And container "with-resource-1" of pod "tester-1" has exactly the driver env "user_all_config0=true", "user_all_config1=true", "user_all_config2=true", "claim_all_req0=true", "claim_all_req1=true", "claim_all_req2=true", "user_container1_config0=true", "user_container1_config1=true", "claim_container1_req1=true"

  Scenario: DaemonSet with admin access
    Given the namespace is labelled "resource.kubernetes.io/admin-access=true"
    And the following objects are created:
      """
      apiVersion: resource.k8s.io/v1
      kind: ResourceClaimTemplate
      metadata: { name: admin-template, namespace: ${namespace} }
      spec:
        spec:
          devices:
            requests:
            - name: my-request
              exactly: { deviceClassName: ${class}, adminAccess: true }
      ---
      apiVersion: apps/v1
      kind: DaemonSet
      metadata: { name: monitor, namespace: ${namespace} }
      spec:
        selector: { matchLabels: { app: monitor } }
        template:
          metadata: { labels: { app: monitor } }
          spec:
            nodeSelector: { kubernetes.io/hostname: ${node0} }
            resourceClaims:
            - { name: my-inline-claim, resourceClaimTemplateName: admin-template }
            containers:
            - name: with-resource
              image: registry.k8s.io/pause:3.10
              resources: { claims: [ { name: my-inline-claim } ] }
      """
    Then ResourceClaimTemplate "admin-template" has:
      """
      spec:
        spec:
          devices:
            requests:
            - name: my-request
              exactly: { adminAccess: true }
      """
    And daemonset "monitor" runs a pod on node 0
