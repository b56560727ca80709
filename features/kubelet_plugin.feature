@DynamicResourceAllocation
Feature: one node's kubelet and its plugins
  The node suite's checks of what one kubelet does with the plugins
  registered with it: calls that fail and then succeed, a call that never
  returns, a pod deleted while its claim is still prepared, a plugin started
  again, two plugins serving one pod, and the ResourceSlices of a plugin
  that went away. Upstream assigns the pods to the node and writes the
  claims' allocations itself (its node suite has no scheduler); here the
  scheduler allocates the driver's devices and the pods select the node.
  Serial as upstream's: each scenario counts every call its node's kubelet
  makes.
  (upstream: the node suite, test/e2e_node/dra_test.go, [sig-node] [DRA] [Feature:DynamicResourceAllocation] Resource Kubelet Plugin, Two resource Kubelet Plugins and ResourceSlice, all [Serial])

  Rule: one plugin

    Background:
      Given 1 ready node
      And a driver with 1 device per node
      And a device class
      And an external claim "external-claim"

    Scenario: must register after plugin restart
      Given a second instance "new" of the driver, not started yet
      When the driver is replaced by driver "new"
      Then NotifyRegistrationStatus of driver "new" is called on node 0

    # Upstream's timeout: the pod is watched for podInPendingStateTimeout (60 s).
    Scenario: must keep pod in pending state if NodePrepareResources times out
      When NodePrepareResources is stalled on node 0
      And pod "tester-1" using claim "external-claim" is created
        | node selector | 0 |
      Then pod "tester-1" is pending
      And NodePrepareResources is called on node 0
      And pod "tester-1" stays pending for 60s
      When NodePrepareResources is released on node 0

    # The pod checks its env and ends, as upstream's does; it succeeds only
    # when the claim's configuration reached its container.
    Scenario: must run pod if NodePrepareResources fails and then succeeds
      When NodePrepareResources is made to fail on node 0
      And pod "tester-1" using claim "external-claim" is created
        | node selector  | 0                       |
        | command        | env \| grep -q user_a=b |
        | restart policy | Never                   |
      Then pod "tester-1" is pending
      And NodePrepareResources is called on node 0
      When NodePrepareResources no longer fails on node 0
      Then NodePrepareResources has been called again on node 0
      And pod "tester-1" is completed

    Scenario: must run pod if NodeUnprepareResources fails and then succeeds
      When NodeUnprepareResources is made to fail on node 0
      And pod "tester-1" using claim "external-claim" is created
        | node selector  | 0                       |
        | command        | env \| grep -q user_a=b |
        | restart policy | Never                   |
      Then NodePrepareResources is called on node 0
      And NodeUnprepareResources is called on node 0
      When NodeUnprepareResources no longer fails on node 0
      Then NodeUnprepareResources has been called again on node 0
      And pod "tester-1" is completed
      And no plugin has prepared claims

    Scenario: must call NodeUnprepareResources for deleted pod
      When NodeUnprepareResources is made to fail on node 0
      And pod "tester-1" using claim "external-claim" is created
        | node selector  | 0                       |
        | command        | env \| grep -q user_a=b |
        | restart policy | Never                   |
      Then NodePrepareResources is called on node 0
      And NodeUnprepareResources is called on node 0
      When Pod "tester-1" is marked for deletion
      Then NodeUnprepareResources has been called again on node 0
      When NodeUnprepareResources no longer fails on node 0
      Then NodeUnprepareResources has been called again on node 0
      And pod "tester-1" is gone
      And no plugin has prepared claims

    # Upstream counts its listener's accepts after each of two pods.
    @FaultExempt:KubeletRestartReconnects
    Scenario: must use one gRPC connection for all service calls
      Given an external claim "external-claim-2"
      When pod "drapod-1" using claim "external-claim" is created
        | node selector  | 0                       |
        | command        | env \| grep -q user_a=b |
        | restart policy | Never                   |
      Then NodePrepareResources is called on node 0
      And NodeUnprepareResources is called on node 0
      And pod "drapod-1" is completed
      And the kubelet opened 1 connection to the DRA socket of the driver on node 0
      When pod "drapod-2" using claim "external-claim-2" is created
        | node selector  | 0                       |
        | command        | env \| grep -q user_a=b |
        | restart policy | Never                   |
      Then NodePrepareResources has been called again on node 0
      And NodeUnprepareResources has been called again on node 0
      And pod "drapod-2" is completed
      And the kubelet opened 1 connection to the DRA socket of the driver on node 0

  Rule: two plugins

    Background:
      Given 1 ready node
      And a driver "one" with 1 device per node
      And a driver "two" with 1 device per node
      And a device class for driver "one"
      And a device class for driver "two"
      And an external claim "external-claim" with spec:
        """
        devices:
          requests:
          - name: one
            exactly: { deviceClassName: "${class:one}" }
          - name: two
            exactly: { deviceClassName: "${class:two}" }
          config:
          - opaque: { driver: "${driver:one}", parameters: { one: "1" } }
          - opaque: { driver: "${driver:two}", parameters: { two: "2" } }
        """
      Then driver "one" is registered on every node
      And driver "two" is registered on every node

    # Each driver's configuration reaches the container, as upstream's pod
    # greps the env of each driver.
    Scenario: must prepare and unprepare resources
      When pod "tester-1" using claim "external-claim" is created
        | node selector  | 0                                                        |
        | command        | env \| grep -q user_one=1 && env \| grep -q user_two=2 |
        | restart policy | Never                                                    |
      Then pod "tester-1" is completed
      And NodePrepareResources of driver "one" is called on node 0
      And NodePrepareResources of driver "two" is called on node 0
      And NodeUnprepareResources of driver "one" is called on node 0
      And NodeUnprepareResources of driver "two" is called on node 0

    # The kubelet's gauge counts the claims in use on its node, per driver
    # and across all (<any>): alone on the node, as upstream's.
    @KubeletMetrics @OwnNodes
    Scenario: must provide metrics
      When pod "tester-1" using claim "external-claim" is created
        | node selector | 0 |
      Then pod "tester-1" is running with env "user_one=1", "user_two=2" in every container
      And NodePrepareResources of driver "one" was called 1 time on node 0
      And NodePrepareResources of driver "two" was called 1 time on node 0
      And the kubelet on node 0 reports metric "dra_resource_claims_in_use":
        | driver_name   | value |
        | <any>         | 1     |
        | ${driver:one} | 1     |
        | ${driver:two} | 1     |
      When pod "tester-1" is deleted
      Then NodeUnprepareResources of driver "one" was called 1 time on node 0
      And NodeUnprepareResources of driver "two" was called 1 time on node 0
      And the kubelet on node 0 reports metric "dra_resource_claims_in_use":
        | driver_name | value |
        | <any>       | 0     |

    Scenario: must run pod if NodePrepareResources fails for one plugin and then succeeds
      When NodePrepareResources of driver "two" is made to fail on node 0
      And pod "tester-1" using claim "external-claim" is created
        | node selector  | 0                                                        |
        | command        | env \| grep -q user_one=1 && env \| grep -q user_two=2 |
        | restart policy | Never                                                    |
      Then pod "tester-1" is pending
      And NodePrepareResources of driver "two" is called on node 0
      When NodePrepareResources of driver "two" no longer fails on node 0
      Then NodePrepareResources of driver "two" has been called again on node 0
      And pod "tester-1" is completed

    Scenario: must run pod if NodeUnprepareResources fails for one plugin and then succeeds
      When NodeUnprepareResources of driver "two" is made to fail on node 0
      And pod "tester-1" using claim "external-claim" is created
        | node selector  | 0                                                        |
        | command        | env \| grep -q user_one=1 && env \| grep -q user_two=2 |
        | restart policy | Never                                                    |
      Then NodePrepareResources of driver "one" is called on node 0
      And NodePrepareResources of driver "two" is called on node 0
      And NodeUnprepareResources of driver "two" is called on node 0
      When NodeUnprepareResources of driver "two" no longer fails on node 0
      Then NodeUnprepareResources of driver "two" has been called again on node 0
      And pod "tester-1" is completed

  Rule: ResourceSlices of a plugin

    Scenario: must be removed after plugin unregistration
      Given 1 ready node
      And a driver with 1 device per node
      Then the driver publishes one slice per node with devices "device-00"
      And the driver keeps publishing them for 5s
      When the driver is torn down
      Then the slices of the driver are removed

  # Upstream starts a registrar and, apart from it, a DRA service (its own
  # socket, server and slices); here the driver's DRA service starts and
  # stops by its own steps while registration stays. Upstream's "1 common
  # socket" puts the DRA socket into the kubelet's plugin registry, beside
  # the registration socket, where the kubelet's plugin watcher finds it too.
  Rule: a DRA service apart from its registration

    Background:
      Given 1 ready node

    Scenario Outline: must be functional when plugin starts to listen on a service socket after registration <sockets>
      Given a driver with 1 device per node, with its DRA service started after registration<setting>
      And a device class
      And an external claim "external-claim"
      Then the driver is registered on every node
      When the DRA service of the driver starts on node 0
      And pod "tester-1" using claim "external-claim" is created
        | node selector  | 0                       |
        | command        | env \| grep -q user_a=b |
        | restart policy | Never                   |
      Then NodePrepareResources is called on node 0
      And pod "tester-1" is completed

      Examples:
        | sockets         | setting                                     |
        | 2 sockets       |                                             |
        | 1 common socket | , with its DRA socket in the plugin registry |

    # The kubelet notices the service's connection drop and wipes its
    # slices; the pod it prepared keeps running and is unprepared once the
    # service is back.
    Scenario Outline: must be functional after service reconnect <sockets>
      Given a driver with 1 device per node, with its DRA service started after registration<setting>
      And a device class
      And an external claim "external-claim"
      Then the driver is registered on every node
      When the DRA service of the driver starts on node 0
      And pod "tester-1" using claim "external-claim" is created
        | node selector | 0 |
      Then NodePrepareResources has succeeded on node 0
      When the DRA service of the driver stops on node 0
      Then pod "tester-1" is running
      And the slices of the driver are removed
      When the DRA service of the driver starts on node 0
      And pod "tester-1" is deleted
      Then NodeUnprepareResources is called on node 0

      Examples:
        | sockets         | setting                                     |
        | 2 sockets       |                                             |
        | 1 common socket | , with its DRA socket in the plugin registry |

    Scenario Outline: must be removed if plugin stops after registration <sockets>
      Given a driver with 1 device per node, with its DRA service started after registration<setting>
      Then the driver is registered on every node
      When the DRA service of the driver starts on node 0
      Then the driver publishes one slice per node with devices "device-00"
      And the driver keeps publishing them for 5s
      When the DRA service of the driver stops on node 0
      Then the slices of the driver are removed

      Examples:
        | sockets         | setting                                     |
        | 2 sockets       |                                             |
        | 1 common socket | , with its DRA socket in the plugin registry |

    # Upstream stops the service for 5 s, well within the kubelet's wiping
    # delay of 30 s; here for 2 s, within the simulated kubelet's 3 s too,
    # and the slices are checked to stay meanwhile.
    @FaultExempt:KubeletRestartWipesSlices
    Scenario Outline: must not be removed if plugin restarts quickly enough <sockets>
      Given a driver with 1 device per node, with its DRA service started after registration<setting>
      Then the driver is registered on every node
      When the DRA service of the driver starts on node 0
      Then the driver publishes one slice per node with devices "device-00"
      When the slices of the driver are noted
      And the DRA service of the driver stops on node 0
      Then the slices of the driver stay unchanged for 2s
      When the DRA service of the driver starts on node 0
      Then the slices of the driver stay unchanged for 1m

      Examples:
        | sockets         | setting                                     |
        | 2 sockets       |                                             |
        | 1 common socket | , with its DRA socket in the plugin registry |

    # Registered, but no DRA service ever answers: the kubelet removes a
    # slice written for the driver on its node.
    Scenario: must be removed if plugin is unresponsive after registration
      Given a driver with 1 device per node, with its DRA service started after registration
      Then the driver is registered on every node
      When the following objects are created:
        """
        apiVersion: resource.k8s.io/v1
        kind: ResourceSlice
        metadata: { name: "${namespace}-unresponsive" }
        spec:
          driver: "${driver}"
          nodeName: "${node0}"
          pool: { name: "${node0}", generation: 1, resourceSliceCount: 1 }
        """
      Then ResourceSlice "${namespace}-unresponsive" no longer exists

  # The suite's own: the socket stays where the kubelet found it, but no
  # connection to it gets through (a plugin that hangs).
  Rule: a blocked DRA socket

    @FaultExempt:KubeletRestartReconnects
    Scenario: a pod waits while the DRA socket is blocked and runs once it is unblocked
      Given 1 ready node
      And a driver with 1 device per node
      And a device class
      And an external claim "external-claim"
      When the DRA socket of the driver on node 0 is blocked
      And pod "tester-1" using claim "external-claim" is created
        | node selector | 0 |
      Then pod "tester-1" stays pending for 10s
      And NodePrepareResources was called 0 times on node 0
      When the DRA socket of the driver on node 0 is unblocked
      Then pod "tester-1" is running
      And NodePrepareResources was called 1 time on node 0
      And the kubelet opened 2 connections to the DRA socket of the driver on node 0
