@DynamicResourceAllocation @FeatureGate:DRAExtendedResource
Feature: DRA-backed extended resources
  A device class can serve an extended resource: pods ask for it in their
  resource limits like a device-plugin resource, the scheduler makes a claim
  for them and maps each container's requests into the pod status, and the
  kubelet prepares that claim like any other.
  Explicit names come from the class's extendedResourceName; every class also
  serves deviceclass.resource.kubernetes.io/<class>.
  (upstream: [sig-node] [DRA] [FeatureGate:DRAExtendedResource] [Feature:DynamicResourceAllocation])

  Background:
    Given 1 ready node
    And a driver with a network pool of 10 devices

  @KubeletMinVersion:1.34
  Scenario: must run a pod with explicit extended resource with one container one resource
    Given a device class serving extended resource "${driver}/resource-0"
    # Upstream's pod: an init container asking for two of each, a sidecar, a
    # second init container, then the main container at index 3. The init
    # containers' scripts must find their devices for the pod to start.
    And the following objects are created:
      """
      apiVersion: v1
      kind: Pod
      metadata: { name: tester-1 }
      spec:
        restartPolicy: Never
        initContainers:
        - name: with-resource-init
          image: registry.k8s.io/e2e-test-images/busybox:1.37.0-1
          command: [sh, -c, "env|grep container_1_request_0=true"]
          resources: { requests: { ${driver}/resource-0: "2" }, limits: { ${driver}/resource-0: "2" } }
        - name: with-resource-sidecar
          image: registry.k8s.io/e2e-test-images/busybox:1.37.0-1
          restartPolicy: Always
          command: [sh, -c, "while true; do env; env|grep container_1_request_0=true; echo $?; sleep 5; done"]
          resources: { requests: { ${driver}/resource-0: "1" }, limits: { ${driver}/resource-0: "1" } }
        - name: with-resource-init-1
          image: registry.k8s.io/e2e-test-images/busybox:1.37.0-1
          command: [sh, -c, "env|grep container_3_request_0=true"]
          resources: { requests: { ${driver}/resource-0: "1" }, limits: { ${driver}/resource-0: "1" } }
        containers:
        - name: with-resource
          image: registry.k8s.io/e2e-test-images/busybox:1.37.0-1
          command: [sh, -c, "trap exit TERM; while true; do sleep 1; done"]
          resources: { requests: { ${driver}/resource-0: "1" }, limits: { ${driver}/resource-0: "1" } }
      """
    Then pod "tester-1" is running
    And pod "tester-1" has extended resource requests:
      | container             | resource             | request               |
      | with-resource         | ${driver}/resource-0 | container-3-request-0 |
      | with-resource-init    | ${driver}/resource-0 | container-1-request-0 |
      | with-resource-init    | ${driver}/resource-0 | container-3-request-0 |
      | with-resource-init-1  | ${driver}/resource-0 | container-3-request-0 |
      | with-resource-sidecar | ${driver}/resource-0 | container-1-request-0 |
    And the extended resource claim of pod "tester-1" is allocated
    And the extended resource claim of pod "tester-1" is reserved for pod "tester-1"
    And container "with-resource" of pod "tester-1" gets requests "container-3-request-0" of the extended resource claim of pod "tester-1"

  @KubeletMinVersion:1.35
  Scenario: must run a pod with implicit extended resource with one container one resource
    Given a device class
    # Upstream's pod: an init container asking for two of each, a sidecar, a
    # second init container, then the main container at index 3. The init
    # containers' scripts must find their devices for the pod to start.
    And the following objects are created:
      """
      apiVersion: v1
      kind: Pod
      metadata: { name: tester-1 }
      spec:
        restartPolicy: Never
        initContainers:
        - name: with-resource-init
          image: registry.k8s.io/e2e-test-images/busybox:1.37.0-1
          command: [sh, -c, "env|grep container_1_request_0=true"]
          resources: { requests: { deviceclass.resource.kubernetes.io/${class}: "2" }, limits: { deviceclass.resource.kubernetes.io/${class}: "2" } }
        - name: with-resource-sidecar
          image: registry.k8s.io/e2e-test-images/busybox:1.37.0-1
          restartPolicy: Always
          command: [sh, -c, "while true; do env; env|grep container_1_request_0=true; echo $?; sleep 5; done"]
          resources: { requests: { deviceclass.resource.kubernetes.io/${class}: "1" }, limits: { deviceclass.resource.kubernetes.io/${class}: "1" } }
        - name: with-resource-init-1
          image: registry.k8s.io/e2e-test-images/busybox:1.37.0-1
          command: [sh, -c, "env|grep container_3_request_0=true"]
          resources: { requests: { deviceclass.resource.kubernetes.io/${class}: "1" }, limits: { deviceclass.resource.kubernetes.io/${class}: "1" } }
        containers:
        - name: with-resource
          image: registry.k8s.io/e2e-test-images/busybox:1.37.0-1
          command: [sh, -c, "trap exit TERM; while true; do sleep 1; done"]
          resources: { requests: { deviceclass.resource.kubernetes.io/${class}: "1" }, limits: { deviceclass.resource.kubernetes.io/${class}: "1" } }
      """
    Then pod "tester-1" is running
    And pod "tester-1" has extended resource requests:
      | container             | resource                                    | request               |
      | with-resource         | deviceclass.resource.kubernetes.io/${class} | container-3-request-0 |
      | with-resource-init    | deviceclass.resource.kubernetes.io/${class} | container-1-request-0 |
      | with-resource-init    | deviceclass.resource.kubernetes.io/${class} | container-3-request-0 |
      | with-resource-init-1  | deviceclass.resource.kubernetes.io/${class} | container-3-request-0 |
      | with-resource-sidecar | deviceclass.resource.kubernetes.io/${class} | container-1-request-0 |
    And container "with-resource" of pod "tester-1" gets requests "container-3-request-0" of the extended resource claim of pod "tester-1"

  @KubeletMinVersion:1.35
  Scenario: must run a pod with both implicit and explicit extended resource with one container two resources
    Given a device class serving extended resource "${driver}/resource-0"
    # Upstream's pod: an init container asking for two of each, a sidecar, a
    # second init container, then the main container at index 3. The init
    # containers' scripts must find their devices for the pod to start.
    And the following objects are created:
      """
      apiVersion: v1
      kind: Pod
      metadata: { name: tester-1 }
      spec:
        restartPolicy: Never
        initContainers:
        - name: with-resource-init
          image: registry.k8s.io/e2e-test-images/busybox:1.37.0-1
          command: [sh, -c, "env|grep container_1_request_0=true"]
          resources: { requests: { deviceclass.resource.kubernetes.io/${class}: "2", ${driver}/resource-0: "2" }, limits: { deviceclass.resource.kubernetes.io/${class}: "2", ${driver}/resource-0: "2" } }
        - name: with-resource-sidecar
          image: registry.k8s.io/e2e-test-images/busybox:1.37.0-1
          restartPolicy: Always
          command: [sh, -c, "while true; do env; env|grep container_1_request_0=true; echo $?; sleep 5; done"]
          resources: { requests: { deviceclass.resource.kubernetes.io/${class}: "1", ${driver}/resource-0: "1" }, limits: { deviceclass.resource.kubernetes.io/${class}: "1", ${driver}/resource-0: "1" } }
        - name: with-resource-init-1
          image: registry.k8s.io/e2e-test-images/busybox:1.37.0-1
          command: [sh, -c, "env|grep container_3_request_0=true"]
          resources: { requests: { deviceclass.resource.kubernetes.io/${class}: "1", ${driver}/resource-0: "1" }, limits: { deviceclass.resource.kubernetes.io/${class}: "1", ${driver}/resource-0: "1" } }
        containers:
        - name: with-resource
          image: registry.k8s.io/e2e-test-images/busybox:1.37.0-1
          command: [sh, -c, "trap exit TERM; while true; do sleep 1; done"]
          resources: { requests: { deviceclass.resource.kubernetes.io/${class}: "1", ${driver}/resource-0: "1" }, limits: { deviceclass.resource.kubernetes.io/${class}: "1", ${driver}/resource-0: "1" } }
      """
    Then pod "tester-1" is running
    And pod "tester-1" has extended resource requests:
      | container             | resource                                    | request               |
      | with-resource         | deviceclass.resource.kubernetes.io/${class} | container-3-request-0 |
      | with-resource         | ${driver}/resource-0                        | container-3-request-1 |
      | with-resource-init    | deviceclass.resource.kubernetes.io/${class} | container-1-request-0 |
      | with-resource-init    | deviceclass.resource.kubernetes.io/${class} | container-3-request-0 |
      | with-resource-init    | ${driver}/resource-0                        | container-1-request-1 |
      | with-resource-init    | ${driver}/resource-0                        | container-3-request-1 |
      | with-resource-init-1  | deviceclass.resource.kubernetes.io/${class} | container-3-request-0 |
      | with-resource-init-1  | ${driver}/resource-0                        | container-3-request-1 |
      | with-resource-sidecar | deviceclass.resource.kubernetes.io/${class} | container-1-request-0 |
      | with-resource-sidecar | ${driver}/resource-0                        | container-1-request-1 |
    And container "with-resource" of pod "tester-1" gets requests "container-3-request-0", "container-3-request-1" of the extended resource claim of pod "tester-1"

  @KubeletMinVersion:1.34
  Scenario: must run a pod with explicit extended resource with one container three resources
    Given a device class serving extended resource "${driver}/resource-0"
    And device class "${class}-1" is created as a copy of the device class, serving extended resource "${driver}/resource-1"
    And device class "${class}-2" is created as a copy of the device class, serving extended resource "${driver}/resource-2"
    # Upstream's pod: an init container asking for two of each, a sidecar, a
    # second init container, then the main container at index 3. The init
    # containers' scripts must find their devices for the pod to start.
    And the following objects are created:
      """
      apiVersion: v1
      kind: Pod
      metadata: { name: tester-1 }
      spec:
        restartPolicy: Never
        initContainers:
        - name: with-resource-init
          image: registry.k8s.io/e2e-test-images/busybox:1.37.0-1
          command: [sh, -c, "env|grep container_1_request_0=true"]
          resources: { requests: { ${driver}/resource-0: "2", ${driver}/resource-1: "2", ${driver}/resource-2: "2" }, limits: { ${driver}/resource-0: "2", ${driver}/resource-1: "2", ${driver}/resource-2: "2" } }
        - name: with-resource-sidecar
          image: registry.k8s.io/e2e-test-images/busybox:1.37.0-1
          restartPolicy: Always
          command: [sh, -c, "while true; do env; env|grep container_1_request_0=true; echo $?; sleep 5; done"]
          resources: { requests: { ${driver}/resource-0: "1", ${driver}/resource-1: "1", ${driver}/resource-2: "1" }, limits: { ${driver}/resource-0: "1", ${driver}/resource-1: "1", ${driver}/resource-2: "1" } }
        - name: with-resource-init-1
          image: registry.k8s.io/e2e-test-images/busybox:1.37.0-1
          command: [sh, -c, "env|grep container_3_request_0=true"]
          resources: { requests: { ${driver}/resource-0: "1", ${driver}/resource-1: "1", ${driver}/resource-2: "1" }, limits: { ${driver}/resource-0: "1", ${driver}/resource-1: "1", ${driver}/resource-2: "1" } }
        containers:
        - name: with-resource
          image: registry.k8s.io/e2e-test-images/busybox:1.37.0-1
          command: [sh, -c, "trap exit TERM; while true; do sleep 1; done"]
          resources: { requests: { ${driver}/resource-0: "1", ${driver}/resource-1: "1", ${driver}/resource-2: "1" }, limits: { ${driver}/resource-0: "1", ${driver}/resource-1: "1", ${driver}/resource-2: "1" } }
      """
    Then pod "tester-1" is running
    And pod "tester-1" has extended resource requests:
      | container             | resource             | request               |
      | with-resource         | ${driver}/resource-0 | container-3-request-0 |
      | with-resource         | ${driver}/resource-1 | container-3-request-1 |
      | with-resource         | ${driver}/resource-2 | container-3-request-2 |
      | with-resource-init    | ${driver}/resource-0 | container-1-request-0 |
      | with-resource-init    | ${driver}/resource-0 | container-3-request-0 |
      | with-resource-init    | ${driver}/resource-1 | container-1-request-1 |
      | with-resource-init    | ${driver}/resource-1 | container-3-request-1 |
      | with-resource-init    | ${driver}/resource-2 | container-1-request-2 |
      | with-resource-init    | ${driver}/resource-2 | container-3-request-2 |
      | with-resource-init-1  | ${driver}/resource-0 | container-3-request-0 |
      | with-resource-init-1  | ${driver}/resource-1 | container-3-request-1 |
      | with-resource-init-1  | ${driver}/resource-2 | container-3-request-2 |
      | with-resource-sidecar | ${driver}/resource-0 | container-1-request-0 |
      | with-resource-sidecar | ${driver}/resource-1 | container-1-request-1 |
      | with-resource-sidecar | ${driver}/resource-2 | container-1-request-2 |
    And container "with-resource" of pod "tester-1" gets requests "container-3-request-0", "container-3-request-1", "container-3-request-2" of the extended resource claim of pod "tester-1"

  @KubeletMinVersion:1.35
  Scenario: must run a pod with extended resource with resource quota
    # As upstream: the quota exists before the class that serves the names it counts.
    Given the following objects are created:
      """
      apiVersion: v1
      kind: ResourceQuota
      metadata: { name: test-quota }
      spec:
        hard:
          count/resourceclaims.resource.k8s.io: "10"
          requests.${driver}/resource-0: "10"
          requests.deviceclass.resource.kubernetes.io/${class}: "10"
          ${class}.deviceclass.resource.k8s.io/devices: "10"
      """
    And a device class serving extended resource "${driver}/resource-0"
    And resource quota "test-quota" reports 0 used for "count/resourceclaims.resource.k8s.io"
    And resource quota "test-quota" reports 0 used for "requests.${driver}/resource-0"
    And resource quota "test-quota" reports 0 used for "requests.deviceclass.resource.kubernetes.io/${class}"
    And resource quota "test-quota" reports 0 used for "${class}.deviceclass.resource.k8s.io/devices"
    # Upstream's pod: every container asks for one device under each name.
    # The quota charges a device of the class to each of its names, however
    # it was asked for.
    And the following objects are created:
      """
      apiVersion: v1
      kind: Pod
      metadata: { name: tester-1 }
      spec:
        restartPolicy: Never
        initContainers:
        - name: with-resource-init
          image: registry.k8s.io/e2e-test-images/busybox:1.37.0-1
          command: [sh, -c, "env|grep request_0=true"]
          resources: { requests: { ${driver}/resource-0: "1", deviceclass.resource.kubernetes.io/${class}: "1" }, limits: { ${driver}/resource-0: "1", deviceclass.resource.kubernetes.io/${class}: "1" } }
        - name: with-resource-sidecar
          image: registry.k8s.io/e2e-test-images/busybox:1.37.0-1
          restartPolicy: Always
          command: [sh, -c, "env|grep container_1_request_0=true; sleep 1"]
          resources: { requests: { ${driver}/resource-0: "1", deviceclass.resource.kubernetes.io/${class}: "1" }, limits: { ${driver}/resource-0: "1", deviceclass.resource.kubernetes.io/${class}: "1" } }
        - name: with-resource-init-1
          image: registry.k8s.io/e2e-test-images/busybox:1.37.0-1
          command: [sh, -c, "env|grep request_0=true"]
          resources: { requests: { ${driver}/resource-0: "1", deviceclass.resource.kubernetes.io/${class}: "1" }, limits: { ${driver}/resource-0: "1", deviceclass.resource.kubernetes.io/${class}: "1" } }
        containers:
        - name: with-resource
          image: registry.k8s.io/e2e-test-images/busybox:1.37.0-1
          command: [sh, -c, "trap exit TERM; while true; do sleep 1; done"]
          resources: { requests: { ${driver}/resource-0: "1", deviceclass.resource.kubernetes.io/${class}: "1" }, limits: { ${driver}/resource-0: "1", deviceclass.resource.kubernetes.io/${class}: "1" } }
      """
    Then pod "tester-1" is running
    And container "with-resource" of pod "tester-1" gets requests "container-3-request-0", "container-3-request-1" of the extended resource claim of pod "tester-1"
    Given an external claim "external-claim"
    When pod "tester-2" using claim "external-claim" is created
    Then pod "tester-2" is running with env "user_a=b" in every container
    # The external claim's device, plus the four of the pod's claim: the
    # sidecar and the main container need one under each name, the other
    # init containers reuse theirs.
    And resource quota "test-quota" has status:
      | resource                                             | hard | used |
      | count/resourceclaims.resource.k8s.io                 | 10   | 2    |
      | requests.${driver}/resource-0                        | 10   | 5    |
      | requests.deviceclass.resource.kubernetes.io/${class} | 10   | 5    |
      | ${class}.deviceclass.resource.k8s.io/devices         | 10   | 5    |

  @KubeletMinVersion:1.34
  Scenario: must run a pod with explicit extended resource with three containers one resource each
    Given a device class serving extended resource "${driver}/resource-0"
    And device class "${class}-1" is created as a copy of the device class, serving extended resource "${driver}/resource-1"
    And device class "${class}-2" is created as a copy of the device class, serving extended resource "${driver}/resource-2"
    When pod "tester-1" without claims is created
      | containers                   | 3                      |
      | container 0 extended resources | ${driver}/resource-0=1 |
      | container 1 extended resources | ${driver}/resource-1=1 |
      | container 2 extended resources | ${driver}/resource-2=1 |
    Then pod "tester-1" is running
    And pod "tester-1" has extended resource requests:
      | container       | resource             | request               |
      | with-resource   | ${driver}/resource-0 | container-0-request-0 |
      | with-resource-1 | ${driver}/resource-1 | container-1-request-0 |
      | with-resource-2 | ${driver}/resource-2 | container-2-request-0 |
    And container "with-resource" of pod "tester-1" gets request "container-0-request-0" of the extended resource claim of pod "tester-1"
    And container "with-resource" of pod "tester-1" does not get request "container-1-request-0" of the extended resource claim of pod "tester-1"
    And container "with-resource-1" of pod "tester-1" gets request "container-1-request-0" of the extended resource claim of pod "tester-1"
    And container "with-resource-2" of pod "tester-1" gets request "container-2-request-0" of the extended resource claim of pod "tester-1"
    And container "with-resource-2" of pod "tester-1" does not get request "container-0-request-0" of the extended resource claim of pod "tester-1"

  @KubeletMinVersion:1.34
  Scenario: must run a pod with explicit extended resource with three containers multiple resources each
    Given a device class serving extended resource "${driver}/resource-0"
    And device class "${class}-1" is created as a copy of the device class, serving extended resource "${driver}/resource-1"
    And device class "${class}-2" is created as a copy of the device class, serving extended resource "${driver}/resource-2"
    And device class "${class}-3" is created as a copy of the device class, serving extended resource "${driver}/resource-3"
    And device class "${class}-4" is created as a copy of the device class, serving extended resource "${driver}/resource-4"
    And device class "${class}-5" is created as a copy of the device class, serving extended resource "${driver}/resource-5"
    When pod "tester-1" without claims is created
      | containers                     | 3                                                                    |
      | container 0 extended resources | ${driver}/resource-0=1                                               |
      | container 1 extended resources | ${driver}/resource-1=1, ${driver}/resource-2=1                       |
      | container 2 extended resources | ${driver}/resource-3=1, ${driver}/resource-4=1, ${driver}/resource-5=1 |
    Then pod "tester-1" is running
    And pod "tester-1" has extended resource requests:
      | container       | resource             | request               |
      | with-resource   | ${driver}/resource-0 | container-0-request-0 |
      | with-resource-1 | ${driver}/resource-1 | container-1-request-0 |
      | with-resource-1 | ${driver}/resource-2 | container-1-request-1 |
      | with-resource-2 | ${driver}/resource-3 | container-2-request-0 |
      | with-resource-2 | ${driver}/resource-4 | container-2-request-1 |
      | with-resource-2 | ${driver}/resource-5 | container-2-request-2 |
    And container "with-resource" of pod "tester-1" gets requests "container-0-request-0" of the extended resource claim of pod "tester-1"
    And container "with-resource-1" of pod "tester-1" gets requests "container-1-request-0", "container-1-request-1" of the extended resource claim of pod "tester-1"
    And container "with-resource-2" of pod "tester-1" gets requests "container-2-request-0", "container-2-request-1", "container-2-request-2" of the extended resource claim of pod "tester-1"

  @KubeletMinVersion:1.34
  Scenario: must accurately populate ExtendedResourceClaimStatus
    Given a device class serving extended resource "${driver}/resource-0"
    And device class "${class}-1" is created as a copy of the device class, serving extended resource "${driver}/resource-1"
    When pod "tester-1" without claims is created
      | extended resource | ${driver}/resource-0=2, ${driver}/resource-1=1 |
    Then pod "tester-1" is running
    And pod "tester-1" has extended resource requests in this order:
      | container     | resource             | request               |
      | with-resource | ${driver}/resource-0 | container-0-request-0 |
      | with-resource | ${driver}/resource-1 | container-0-request-1 |
    And the extended resource claim of pod "tester-1" is allocated with results "container-0-request-0", "container-0-request-0", "container-0-request-1"
    And container "with-resource" of pod "tester-1" gets requests "container-0-request-0", "container-0-request-1" of the extended resource claim of pod "tester-1"

  @KubeletMinVersion:1.34 @FaultExempt:KubeletRestartPreparesAgain
  Scenario Outline: must cleanup extended resource claims when pods <end>
    Given a device class serving extended resource "${driver}/resource-0"
    When pod "tester-1" without claims is created
      | extended resource | ${driver}/resource-0=1 |
      | command           | <command>              |
    # Not awaited running (it ends 2 s after it starts): its prepare shows its claim allocated.
    Then pod "tester-1" is <state>
    And NodePrepareResources was called 1 time on node 0
    And the extended resource claim of pod "tester-1" is deleted
    And NodeUnprepareResources was called 1 time on node 0

    Examples:
      | end      | command                                                                                   | state     |
      | complete | echo 'Pod started with extended resource'; sleep 2; echo 'Pod completed successfully'     | completed |
      | fail     | echo 'Pod started with extended resource'; sleep 2; echo 'Pod failing now'; exit 1        | failed    |

  @KubeletMinVersion:1.34
  Scenario: must prevent overcommitment of extended resources
    Given a device class serving extended resource "${driver}/resource-0"
    When pod "tester-1" without claims is created
      | extended resource | ${driver}/resource-0=10 |
    Then pod "tester-1" is running
    And container "with-resource" of pod "tester-1" gets request "container-0-request-0" of the extended resource claim of pod "tester-1"
    When pod "tester-2" without claims is created
      | extended resource | ${driver}/resource-0=10 |
    Then pod "tester-2" is unschedulable
    When pod "tester-1" is deleted
    Then pod "tester-2" is running
    And container "with-resource" of pod "tester-2" gets request "container-0-request-0" of the extended resource claim of pod "tester-2"

  @KubeletMinVersion:1.34
  Scenario: must run a pod with extended resource requesting zero
    Given a device class serving extended resource "${driver}/resource-0"
    When pod "tester-1" without claims is created
      | extended resource | ${driver}/resource-0=0 |
    Then pod "tester-1" is running
    And pod "tester-1" has no extended resource claim
    And NodePrepareResources was called 0 times on node 0

  @KubeletMinVersion:1.34
  Scenario: must process extended resource after Device Class creation
    Given a device class
    When pod "tester-1" without claims is created
      | extended resource | ${driver}/resource-0=1 |
    Then pod "tester-1" is unschedulable
    When device class "${class}-er" is created as a copy of the device class, serving extended resource "${driver}/resource-0"
    Then pod "tester-1" is running
    And container "with-resource" of pod "tester-1" gets request "container-0-request-0" of the extended resource claim of pod "tester-1"

  @KubeletMinVersion:1.34
  Scenario: must reject pod with invalid extended resource name
    Then creating the following objects as the admin fails with "must be a standard resource type or fully qualified":
      """
      apiVersion: v1
      kind: Pod
      metadata: { name: tester-1 }
      spec:
        restartPolicy: Never
        containers:
        - name: with-resource
          image: registry.k8s.io/pause:3.10
          resources:
            limits: { invalid_resource_name: "1" }
            requests: { invalid_resource_name: "1" }
      """
