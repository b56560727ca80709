@DynamicResourceAllocation @FeatureGate:DRAResourcePoolStatus
Feature: resource pool status
  A ResourcePoolStatusRequest (resource.k8s.io/v1alpha3) asks the control
  plane for a one-time snapshot of a driver's pools: per pool its device
  counts, the node it is on, and summaries of partitionable and shareable
  devices. Once the status is set the request is never processed again; a
  fresh request gives fresh figures. Only the control plane takes part: the
  drivers do not register with a kubelet. As upstream does, each check waits
  15 s for the status and makes a fresh request, for up to a minute, while
  the snapshot differs from what is expected.
  (upstream: [sig-node] [DRA] control plane / control plane views [FeatureGate:DRAResourcePoolStatus])

  # upstream: one node, NetworkResources(10), no kubelet.
  Rule: control plane

    Background:
      Given 1 ready node
      And a driver with a network pool of 10 devices, not registered with the kubelet

    Scenario: should report pool status with correct device counts
      When a pool status request for the driver is created
      Then the pool status request reports:
        | pool count         | 1       |
        | pools              | network |
        | condition Complete | True    |
      And pool "network" in the pool status request has:
        | driver               | ${driver} |
        | generation           | 1         |
        | resource slice count | 1         |
        | total devices        | 10        |
        | allocated devices    | 0         |
        | available devices    | 10        |
        | unavailable devices  | 0         |
        | node name            | none      |
        | validation error     | none      |
        | partition summary    | none      |
        | shareable summary    | none      |

    Scenario: should reflect allocated devices after pod is scheduled
      Given a device class
      When pod "tester-1" with an inline claim is created
      # Without a kubelet plugin the pod cannot run: upstream checks that
      # it is scheduled, which allocates its claim.
      Then pod "tester-1" is scheduled
      When a pool status request for the driver is created
      Then the pool status request reports:
        | pool count         | 1       |
        | pools              | network |
        | condition Complete | True    |
      And pool "network" in the pool status request has:
        | driver               | ${driver}   |
        | generation           | 1           |
        | resource slice count | 1           |
        | total devices        | 10          |
        | allocated devices    | more than 0 |
        | available devices    | set         |
        | unavailable devices  | 0           |
        | node name            | none        |
        | validation error     | none        |
        | partition summary    | none        |
        | shareable summary    | none        |

  # upstream: a context per pool shape, each with one node and a driver
  # whose pool is selected by hostname (PartitionableResources,
  # ShareableResources), no kubelet.
  @FeatureGate:DRAPartitionableDevices @FeatureGate:DRAPartitionableDevicesType
  Rule: control plane views: partitionable typed view

    Scenario: should report partitionSummary for a partitionable pool
      Given 1 ready node
      And a driver with a shared pool "partitioned" of these slices, not registered with the kubelet:
        """
        sharedCounters:
        - name: gpu-0
          counters:
            memory: { value: "8" }
        ---
        partitionTypeAttribute: dra.e2e.example.com/profile
        devices:
        - name: full
          attributes:
            dra.e2e.example.com/profile: { string: Full }
          consumesCounters:
          - { counterSet: gpu-0, counters: { memory: { value: "8" } } }
        - name: half-a
          attributes:
            dra.e2e.example.com/profile: { string: Half }
          consumesCounters:
          - { counterSet: gpu-0, counters: { memory: { value: "4" } } }
        - name: half-b
          attributes:
            dra.e2e.example.com/profile: { string: Half }
          consumesCounters:
          - { counterSet: gpu-0, counters: { memory: { value: "4" } } }
        """
      When a pool status request for the driver is created
      Then the pool status request reports:
        | condition Complete | True |
      And pool "partitioned" in the pool status request has:
        | validation error | none |
      And pool "partitioned" in the pool status request has partition types:
        | attribute                   | type | total | allocatable |
        | dra.e2e.example.com/profile | Full | 1     | 1           |
        | dra.e2e.example.com/profile | Half | 2     | 2           |

  @FeatureGate:DRAPartitionableDevices
  Rule: control plane views: partitionable pool without a partition type

    Scenario: should report no partition summary when no partition type is declared
      Given 1 ready node
      And a driver with a shared pool "partitioned" of these slices, not registered with the kubelet:
        """
        sharedCounters:
        - name: gpu-0
          counters:
            memory: { value: "8" }
        ---
        devices:
        - name: full
          attributes:
            dra.e2e.example.com/profile: { string: Full }
          consumesCounters:
          - { counterSet: gpu-0, counters: { memory: { value: "8" } } }
        - name: half-a
          attributes:
            dra.e2e.example.com/profile: { string: Half }
          consumesCounters:
          - { counterSet: gpu-0, counters: { memory: { value: "4" } } }
        - name: half-b
          attributes:
            dra.e2e.example.com/profile: { string: Half }
          consumesCounters:
          - { counterSet: gpu-0, counters: { memory: { value: "4" } } }
        """
      When a pool status request for the driver is created
      Then the pool status request reports:
        | condition Complete | True |
      And pool "partitioned" in the pool status request has:
        | validation error  | none |
        | partition summary | none |

  @FeatureGate:DRAConsumableCapacity
  Rule: control plane views: shareable view

    Scenario: should report shareableSummary for a pool with shareable devices
      Given 1 ready node
      And a driver with a shared pool "shareable" of these slices, not registered with the kubelet:
        """
        devices:
        - name: shared-0
          allowMultipleAllocations: true
          capacity:
            memory: { value: "16" }
        - name: shared-1
          allowMultipleAllocations: true
          capacity:
            memory: { value: "16" }
        """
      When a pool status request for the driver is created
      Then the pool status request reports:
        | condition Complete | True |
      And pool "shareable" in the pool status request has:
        | validation error            | none   |
        | fully available devices     | 2      |
        | partially available devices | 0      |
        | shareable capacity          | memory total=32 consumed=0 available=32 |

  # upstream: exactly two nodes, DriverResources(1) (a pool per node, named
  # after it), no kubelet.
  Rule: control plane

    Background:
      Given 2 ready nodes
      And a driver with 1 device per node, not registered with the kubelet

    Scenario: should populate status for all matching pools
      When a pool status request for the driver is created
      Then the pool status request reports:
        | pools listed       | 2    |
        | pool count         | 2    |
        | condition Complete | True |

    Scenario: should filter by pool name
      When a pool status request for the driver is created
      Then the pool status request reports:
        | pools | ${node0}, ${node1} |
      When a pool status request for the driver with pool name "${node0}" is created
      Then the pool status request reports:
        | pool count | 1        |
        | pools      | ${node0} |

    Scenario: should truncate results when limit is reached
      When a pool status request for the driver with limit 1 is created
      Then the pool status request reports:
        | pools listed | 1 |
        | pool count   | 2 |

    Scenario: should return empty pools for unknown driver
      When a pool status request for driver name "nonexistent.driver.example.com" is created
      Then the pool status request reports:
        | pools      | none |
        | pool count | 0    |

    Scenario: should not reprocess after status is set
      When a pool status request for the driver is created
      Then the pool status request stays unchanged for 5s

    Scenario: should set NodeName when all slices share the same node
      When a pool status request for the driver is created
      Then the pool status request reports:
        | pool count         | set  |
        | condition Complete | True |
      And every pool in the pool status request has:
        | node name | set |

    Scenario: should clear NodeName when pool has slices on different nodes
      Given the following objects are created:
        """
        apiVersion: resource.k8s.io/v1
        kind: ResourceSlice
        metadata:
          name: ${driver}-mixed-node-0
        spec:
          driver: ${driver}
          nodeName: ${node0}
          pool: { name: mixed-node-pool, generation: 1, resourceSliceCount: 2 }
          devices:
          - name: device-0
        ---
        apiVersion: resource.k8s.io/v1
        kind: ResourceSlice
        metadata:
          name: ${driver}-mixed-node-1
        spec:
          driver: ${driver}
          nodeName: ${node1}
          pool: { name: mixed-node-pool, generation: 1, resourceSliceCount: 2 }
          devices:
          - name: device-1
        """
      When a pool status request for the driver with pool name "mixed-node-pool" is created
      Then the pool status request reports:
        | pool count         | 1               |
        | pools              | mixed-node-pool |
        | condition Complete | True            |
      And pool "mixed-node-pool" in the pool status request has:
        | node name | none |
