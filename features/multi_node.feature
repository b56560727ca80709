@DynamicResourceAllocation
Feature: multiple nodes
  (upstream: [sig-node] [DRA] control plane / kubelet [Feature:DynamicResourceAllocation] on multiple nodes)

  Scenario Outline: keeps pod pending because of CEL runtime errors (<mode>)
    Given 2 to 8 ready nodes
    And a driver with these devices<registration>
      | node | device                | attributes               |
      | 0    | pre-defined-device-01 | healthy=true, exists=true |
      | 1    | pre-defined-device-02 | healthy=false            |
    And the driver publishes exactly these devices:
      | node | device                | attributes               |
      | 0    | pre-defined-device-01 | healthy=true, exists=true |
      | 1    | pre-defined-device-02 | healthy=false            |
    And a device class
    When pod "tester-1" with an inline claim is created
      | cel selector | device.attributes["${driver}"].exists |
    Then pod "tester-1" is unschedulable with a message containing "CEL runtime error"

    Examples:
      | mode          | registration                      |
      | control plane | , not registered with the kubelet |
      | kubelet       |                                   |

  Scenario Outline: uses all resources (<mode>)
    Given 2 to 8 ready nodes
    And a driver with 1 device per node<registration>
    And a device class
    When one pod per node with an inline claim is created
    Then all pods are <state>
    And all pods run on different nodes

    Examples:
      | mode          | registration                      | state     |
      | control plane | , not registered with the kubelet | scheduled |
      | kubelet       |                                   | running   |
