@FeatureGate:DRADeviceCompatibilityGroups
Feature: device compatibility groups
  Devices drawing on the same counter set may be allocated at the same time
  only when they share a compatibility group. One node, counter set `gpu`
  with mem=2, each device consumes 1 of it and declares one group, so the
  counters alone always leave room for a second device.
  (upstream: [sig-node] [DRA] [FeatureGate:DRADeviceCompatibilityGroups] device compatibility groups;
  like upstream's, not tagged @DynamicResourceAllocation)

  Background:
    Given 1 ready node

  Rule: incompatible devices

    Scenario: leave a pod requesting an incompatible device unschedulable
      # As upstream's ToDriverResources: a slice of the counter set and a
      # slice of the devices that consume it, both the node's pool.
      Given a driver with these slices per node:
        """
        sharedCounters:
        - name: gpu
          counters:
            mem: { value: "2" }
        ---
        devices:
        - name: gpu-mig
          consumesCounters:
          - counterSet: gpu
            counters:
              mem: { value: "1" }
            compatibilityGroups: [mig]
        - name: gpu-vgpu
          consumesCounters:
          - counterSet: gpu
            counters:
              mem: { value: "1" }
            compatibilityGroups: [vgpu]
        """
      And a device class
      # With the gate off the API server drops the groups without a word.
      Then the slice of the driver with device "gpu-mig" on node 0 has:
        """
        spec:
          devices:
          - consumesCounters:
            - compatibilityGroups: [mig]
          - consumesCounters:
            - compatibilityGroups: [vgpu]
        """
      Given an external claim "claim-1"
      And an external claim "claim-2"
      When pod "pod-1" using claim "claim-1" is created
      Then pod "pod-1" is running with env "user_a=b" in every container
      When pod "pod-2" using claim "claim-2" is created
      Then pod "pod-2" is unschedulable

  Rule: compatible devices

    Scenario: schedule two pods that share a compatibility group
      # As upstream's ToDriverResources: a slice of the counter set and a
      # slice of the devices that consume it, both the node's pool.
      Given a driver with these slices per node:
        """
        sharedCounters:
        - name: gpu
          counters:
            mem: { value: "2" }
        ---
        devices:
        - name: gpu-0
          consumesCounters:
          - counterSet: gpu
            counters:
              mem: { value: "1" }
            compatibilityGroups: [mig]
        - name: gpu-1
          consumesCounters:
          - counterSet: gpu
            counters:
              mem: { value: "1" }
            compatibilityGroups: [mig]
        """
      And a device class
      # With the gate off the API server drops the groups without a word.
      Then the slice of the driver with device "gpu-0" on node 0 has:
        """
        spec:
          devices:
          - consumesCounters:
            - compatibilityGroups: [mig]
          - consumesCounters:
            - compatibilityGroups: [mig]
        """
      Given an external claim "claim-1"
      And an external claim "claim-2"
      When pod "pod-1" using claim "claim-1" is created
      Then pod "pod-1" is running with env "user_a=b" in every container
      When pod "pod-2" using claim "claim-2" is created
      Then pod "pod-2" is running with env "user_a=b" in every container
