@DynamicResourceAllocation @FeatureGate:DRAExtendedResource @FaultExempt:DevicePluginReregistration
Feature: extended resources served by a device plugin and by DRA
  A node's extended resource may come from a device plugin (the kubelet lists
  it in the Node's allocatable) or from a DRA driver's devices through a
  device class with that extendedResourceName. The scheduler lets the device
  plugin serve a pod on a node that advertises the resource, and DRA on the
  others. Upstream's sample device plugin advertises two example.com/resource
  on the nodes it runs on; only one copy may run in the cluster at a time,
  and it needs a container runtime, so these scenarios are serial and run on
  real nodes (or kind) only.
  (upstream: [sig-node] [DRA] [FeatureGate:DRAExtendedResource] [Feature:DynamicResourceAllocation])

  Rule: one node with DRA devices
    Background:
      Given 1 ready node
      And a driver with a network pool of 10 devices

    # A regression test (kubernetes#133488): a node whose device plugin went
    # away still lists the resource, with 0 allocatable.
    @ContainerRuntime @serial @KubeletMinVersion:1.35
    Scenario: process extended resources after device plugin uninstall
      Given the sample device plugin is deployed on node 0
      And node 0 has 2 allocatable "example.com/resource"
      When DaemonSet objects labelled "k8s-app=sample-device-plugin" are deleted as a collection
      Then node 0 has 0 allocatable "example.com/resource"
      Given a device class serving extended resource "example.com/resource"
      When pod "tester-1" without claims is created
        | extended resource | example.com/resource=1 |
      Then pod "tester-1" is running
      And container "with-resource" of pod "tester-1" gets request "container-0-request-0" of the extended resource claim of pod "tester-1"

    @ContainerRuntime @serial @KubeletMinVersion:1.35
    Scenario: must prefer device plugin over DRA when both advertise the same resource on a node
      Given the sample device plugin is deployed on node 0
      And node 0 has 2 allocatable "example.com/resource"
      And a device class serving extended resource "example.com/resource"
      When pod "tester-1" without claims is created
        | extended resource | example.com/resource=1 |
      Then pod "tester-1" is running
      And pod "tester-1" has no extended resource claim

  # Upstream reserves one of two nodes for the device plugin: the driver
  # runs on the other.
  Rule: two nodes, DRA devices on one and the device plugin on the other
    @ContainerRuntime @serial @KubeletMinVersion:1.35
    Scenario: must run pods with extended resource on dra nodes and device plugin nodes
      Given 2 ready nodes
      And a driver with a network pool of 2 devices, on node 0
      And the sample device plugin is deployed on node 1
      And node 1 has 2 allocatable "example.com/resource"
      And a device class serving extended resource "example.com/resource"
      When 2 pods "tester" without claims are created
        | extended resource | example.com/resource=2 |
      Then all pods are running
      And the pod on node 1 has no extended resource claim
      And container "with-resource" of the pod on node 0 gets request "container-0-request-0" of its extended resource claim
