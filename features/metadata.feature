@DynamicResourceAllocation @ContainerRuntime
Feature: metadata
  Drivers that write device metadata (KEP-5304): at prepare, a JSON file per
  claim request, bind-mounted read-only through CDI at
  /var/run/kubernetes.io/dra-device-attributes/... into exactly the containers
  that get the request's devices. The containers read it; only a real
  container runtime mounts it.
  (upstream: [sig-node] [DRA] metadata [Feature:DynamicResourceAllocation])

  Scenario: must not race when multiple drivers write metadata for the same request
    Given 1 ready node
    And a driver "a" with 1 device per node, writing device metadata v1beta1
    And a driver "b" with 1 device per node, writing device metadata v1beta1
    And the following objects are created:
      """
      apiVersion: resource.k8s.io/v1
      kind: DeviceClass
      metadata: { name: "${namespace}-shared-class" }
      spec:
        selectors:
        - cel: { expression: 'device.driver == "${driver:a}" || device.driver == "${driver:b}"' }
      """
    And an external claim "multi-driver-claim" with spec:
      """
      devices:
        requests:
        - name: my-request
          exactly: { deviceClassName: "${namespace}-shared-class", allocationMode: ExactCount, count: 2 }
      """
    When pod "tester-1" using claim "multi-driver-claim" is created
    Then pod "tester-1" is running
    And container "with-resource" of pod "tester-1" reads the v1beta1 device metadata of request "my-request" of claim "multi-driver-claim" written by driver "a"
    And container "with-resource" of pod "tester-1" reads the v1beta1 device metadata of request "my-request" of claim "multi-driver-claim" written by driver "b"

  Rule: v1beta1
    Background:
      Given 1 ready node
      And a driver with 2 devices per node, writing device metadata v1beta1
      And a device class

    Scenario: must mount device metadata for resource claims
      Given an external claim "external-claim"
      When pod "tester-1" using claim "external-claim" is created
      Then pod "tester-1" is running
      And container "with-resource" of pod "tester-1" reads the v1beta1 device metadata of request "my-request" of claim "external-claim"

    Scenario: must map device metadata to the right containers
      Given an external claim "external-claim" with spec:
        """
        devices:
          requests:
          - name: req0
            exactly: { deviceClassName: "${class}" }
          - name: req1
            exactly: { deviceClassName: "${class}" }
        """
      When pod "tester-1" using claim "external-claim" is created
        | containers         | 2                   |
        | container 0 claims | resource-claim      |
        | container 1 claims | resource-claim/req1 |
      Then pod "tester-1" is running
      And container "with-resource" of pod "tester-1" reads the v1beta1 device metadata of request "req0" of claim "external-claim"
      And container "with-resource" of pod "tester-1" reads the v1beta1 device metadata of request "req1" of claim "external-claim"
      And container "with-resource-1" of pod "tester-1" reads the v1beta1 device metadata of request "req1" of claim "external-claim"
      But container "with-resource-1" of pod "tester-1" cannot read the device metadata of request "req0" of claim "external-claim"

    Scenario: must mount device metadata for resource claim templates
      When pod "tester-1" with an inline claim is created
      Then pod "tester-1" is running
      And container "with-resource" of pod "tester-1" reads the v1beta1 device metadata of request "my-request" of the claim of pod "tester-1"

  # Both versions are written, v1beta1 first: a reader takes v1beta1.
  Rule: v1alpha1+v1beta1
    Background:
      Given 1 ready node
      And a driver with 2 devices per node, writing device metadata v1beta1 and v1alpha1
      And a device class

    Scenario: must mount device metadata for resource claims
      Given an external claim "external-claim"
      When pod "tester-1" using claim "external-claim" is created
      Then pod "tester-1" is running
      And container "with-resource" of pod "tester-1" reads the v1beta1 device metadata of request "my-request" of claim "external-claim"

    Scenario: must map device metadata to the right containers
      Given an external claim "external-claim" with spec:
        """
        devices:
          requests:
          - name: req0
            exactly: { deviceClassName: "${class}" }
          - name: req1
            exactly: { deviceClassName: "${class}" }
        """
      When pod "tester-1" using claim "external-claim" is created
        | containers         | 2                   |
        | container 0 claims | resource-claim      |
        | container 1 claims | resource-claim/req1 |
      Then pod "tester-1" is running
      And container "with-resource" of pod "tester-1" reads the v1beta1 device metadata of request "req0" of claim "external-claim"
      And container "with-resource" of pod "tester-1" reads the v1beta1 device metadata of request "req1" of claim "external-claim"
      And container "with-resource-1" of pod "tester-1" reads the v1beta1 device metadata of request "req1" of claim "external-claim"
      But container "with-resource-1" of pod "tester-1" cannot read the device metadata of request "req0" of claim "external-claim"

    Scenario: must mount device metadata for resource claim templates
      When pod "tester-1" with an inline claim is created
      Then pod "tester-1" is running
      And container "with-resource" of pod "tester-1" reads the v1beta1 device metadata of request "my-request" of the claim of pod "tester-1"
