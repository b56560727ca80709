@DynamicResourceAllocation @NodeOperations @OwnNodes
Feature: kubelet stops and restarts
  What the kubelet does with a driver's calls when it is stopped and started
  again around them: it works through what it missed, and retries on start
  what failed before it stopped. Only the runner's real nodes can stop a
  kubelet (through the node's process 1), so these scenarios are skipped
  elsewhere; @OwnNodes because a stopped kubelet is a node going away for
  every scenario that uses it: no other scenario uses the node meanwhile,
  the others run on the other nodes.
  (upstream: the node suite, test/e2e_node/dra_test.go, [sig-node] [DRA] [Feature:DynamicResourceAllocation] Resource Kubelet Plugin, Two resource Kubelet Plugins and ResourceSlice, all [Serial])

  Rule: one plugin

    Background:
      Given 1 ready node
      And a driver with 1 device per node
      And a device class
      And an external claim "external-claim"

    # The pods check their env and end, as upstream's do: they succeed only
    # when the claim's configuration reached their container.
    Scenario: must process pod created when kubelet is not running
      When the kubelet on node 0 is stopped
      And pod "tester-1" using claim "external-claim" is created
        | node selector  | 0                       |
        | command        | env \| grep -q user_a=b |
        | restart policy | Never                   |
      Then pod "tester-1" is pending
      When the kubelet on node 0 is started
      Then pod "tester-1" is completed

    Scenario: must retry NodePrepareResources after Kubelet restart
      When NodePrepareResources is made to fail on node 0
      And pod "tester-1" using claim "external-claim" is created
        | node selector  | 0                       |
        | command        | env \| grep -q user_a=b |
        | restart policy | Never                   |
      Then pod "tester-1" is pending
      And NodePrepareResources is called on node 0
      When the kubelet on node 0 is stopped
      And NodePrepareResources no longer fails on node 0
      And the kubelet on node 0 is started
      Then NodePrepareResources has been called again on node 0
      And pod "tester-1" is completed

    Scenario: must retry NodeUnprepareResources after Kubelet restart
      When NodeUnprepareResources is made to fail on node 0
      And pod "tester-1" using claim "external-claim" is created
        | node selector  | 0                       |
        | command        | env \| grep -q user_a=b |
        | restart policy | Never                   |
      # The kubelet calls it once the container has exited, and keeps the
      # pod out of its terminal phase until the call succeeds.
      Then NodeUnprepareResources is called on node 0
      When the kubelet on node 0 is stopped
      And NodeUnprepareResources no longer fails on node 0
      And the kubelet on node 0 is started
      Then NodeUnprepareResources has been called again on node 0
      And pod "tester-1" is completed
      And no plugin has prepared claims

    Scenario: must register after Kubelet restart
      Then NotifyRegistrationStatus is called on node 0
      When the kubelet on node 0 is restarted
      Then NotifyRegistrationStatus has been called again on node 0
      When pod "tester-1" using claim "external-claim" is created
      Then pod "tester-1" is running

    # Ours: a driver's process outlives the kubelet, so its sockets answer
    # while the kubelet is stopped and are the same ones when it is back.
    # The kubelet registers them once at its start and never again; a
    # socket bound anew meanwhile (a plugin behind the kubelet's streaming,
    # which a stop ends) is registered a second time.
    Scenario: a driver's sockets outlive a stopped kubelet: they answer meanwhile and are registered once more, and no more
      Then NotifyRegistrationStatus is called on node 0
      When the kubelet on node 0 is stopped
      Then the registration socket of the driver on node 0 answers
      When the kubelet on node 0 is started
      Then NotifyRegistrationStatus has been called again on node 0
      And NotifyRegistrationStatus is not called again on node 0 for 15s

    # GetInfo fails: the kubelet never gets to NotifyRegistrationStatus and
    # keeps trying until GetInfo answers.
    Scenario: must recover and register after registration failure
      Then NotifyRegistrationStatus is called on node 0
      And GetInfo is called on node 0
      When GetInfo is made to fail on node 0
      And the kubelet on node 0 is restarted
      Then GetInfo has been called again on node 0
      And NotifyRegistrationStatus is not called again on node 0 for 5s
      When GetInfo no longer fails on node 0
      Then NotifyRegistrationStatus has been called again on node 0

    # Added to upstream's node suite in 1.36; a 1.35 kubelet never called again after the failure.
    @KubeletMinVersion:1.36
    Scenario: must recover and register after NotifyRegistrationStatus failure
      Then NotifyRegistrationStatus is called on node 0
      When NotifyRegistrationStatus is made to fail on node 0
      And the kubelet on node 0 is restarted
      Then NotifyRegistrationStatus has been called again on node 0
      When NotifyRegistrationStatus no longer fails on node 0
      Then NotifyRegistrationStatus has been called again on node 0
      When pod "tester-1" using claim "external-claim" is created
      Then pod "tester-1" is running

    Scenario: must call NodeUnprepareResources for deleted pod after Kubelet restart
      When NodeUnprepareResources is made to fail on node 0
      And pod "tester-1" using claim "external-claim" is created
        | node selector  | 0                       |
        | command        | env \| grep -q user_a=b |
        | restart policy | Never                   |
      Then NodePrepareResources is called on node 0
      And NodeUnprepareResources is called on node 0
      When pod "tester-1" is force-deleted
      Then NodeUnprepareResources has been called again on node 0
      When the kubelet on node 0 is restarted
      Then NodeUnprepareResources has been called again on node 0
      When NodeUnprepareResources no longer fails on node 0
      Then NodeUnprepareResources has been called again on node 0
      And no plugin has prepared claims

    # Upstream's timeout: the calls are counted for retryTestTimeout (120 s)
    # after the kubelet is back.
    Scenario: must not call NodePrepareResources for deleted pod after Kubelet restart
      When NodePrepareResources is stalled on node 0
      And pod "tester-1" using claim "external-claim" is created
        | node selector | 0 |
      Then pod "tester-1" is pending
      And NodePrepareResources is called on node 0
      When the kubelet on node 0 is stopped
      And Pod "tester-1" is marked for deletion
      And NodePrepareResources is released on node 0
      And the kubelet on node 0 is started
      Then NodePrepareResources is not called again on node 0 for 120s

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

    Scenario: must run pod if NodePrepareResources is in progress for one plugin when Kubelet restarts
      When NodePrepareResources of driver "one" is stalled on node 0
      And pod "tester-1" using claim "external-claim" is created
        | node selector  | 0                                                        |
        | command        | env \| grep -q user_one=1 && env \| grep -q user_two=2 |
        | restart policy | Never                                                    |
      Then pod "tester-1" is pending
      And NodePrepareResources of driver "one" is called on node 0
      When the kubelet on node 0 is restarted
      And NodePrepareResources of driver "one" is released on node 0
      Then NodePrepareResources of driver "two" is called on node 0
      And pod "tester-1" is completed

    Scenario: must call NodeUnprepareResources again if it's in progress for one plugin when Kubelet restarts
      When NodeUnprepareResources of driver "two" is stalled on node 0
      And pod "tester-1" using claim "external-claim" is created
        | node selector  | 0                                                        |
        | command        | env \| grep -q user_one=1 && env \| grep -q user_two=2 |
        | restart policy | Never                                                    |
      Then NodePrepareResources of driver "one" is called on node 0
      And NodePrepareResources of driver "two" is called on node 0
      And NodeUnprepareResources of driver "two" is called on node 0
      When the kubelet on node 0 is restarted
      And NodeUnprepareResources of driver "two" is released on node 0
      Then NodeUnprepareResources of driver "two" has been called again on node 0
      And pod "tester-1" is completed

  Rule: no plugin

    # The kubelet deletes its node's slices when it starts, whichever driver
    # wrote them; a slice of another node stays.
    Scenario: must be removed on kubelet startup
      Given 1 ready node
      When the kubelet on node 0 is stopped
      And the following objects are created:
        """
        apiVersion: resource.k8s.io/v1
        kind: ResourceSlice
        metadata: { name: "${namespace}-node" }
        spec:
          driver: "${namespace}.example.com"
          nodeName: "${node0}"
          pool: { name: "${node0}", generation: 1, resourceSliceCount: 1 }
        ---
        apiVersion: resource.k8s.io/v1
        kind: ResourceSlice
        metadata: { name: "${namespace}-other" }
        spec:
          driver: "${namespace}.example.com"
          nodeName: "${node0}-other"
          pool: { name: "${node0}-other", generation: 1, resourceSliceCount: 1 }
        """
      Then ResourceSlice "${namespace}-node" stays unchanged for 5s
      And ResourceSlice "${namespace}-other" stays unchanged for 5s
      When the kubelet on node 0 is started
      Then ResourceSlice "${namespace}-node" no longer exists
      And ResourceSlice "${namespace}-other" stays unchanged for 5s
