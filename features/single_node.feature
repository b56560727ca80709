@DynamicResourceAllocation
Feature: single node
  The basic claim and pod shapes on one node with one device, once checked by the
  control plane only (the driver is not registered with the kubelet, so pods are
  only scheduled) and once end to end through the kubelet (pods run and see the
  class and claim parameters in their env).
  (upstream: [sig-node] [DRA] control plane / kubelet [Feature:DynamicResourceAllocation] on single node)

  Scenario Outline: supports claim and class parameters (<mode>)
    Given 1 ready node
    And a driver with 1 device per node<registration>
    And a device class with parameters {"x":"y"}
    When pod "tester-1" with an inline claim is created
    Then pod "tester-1" is <state>

    Examples:
      | mode          | registration                      | state                                                            |
      | control plane | , not registered with the kubelet | scheduled                                                        |
      | kubelet       |                                   | running with env "admin_x=y" and "user_a=b" in every container |

  Scenario Outline: supports reusing resources (<mode>)
    Given 1 ready node
    And a driver with 1 device per node<registration>
    And a device class with parameters {"x":"y"}
    When 5 pods "tester" with an inline claim are created
    Then each pod in turn is <state> and then deleted

    Examples:
      | mode          | registration                      | state                                                            |
      | control plane | , not registered with the kubelet | scheduled                                                        |
      | kubelet       |                                   | running with env "admin_x=y" and "user_a=b" in every container |

  Scenario Outline: supports sharing a claim concurrently (<mode>)
    Given 1 ready node
    And a driver with 1 device per node<registration>
    And a device class with parameters {"x":"y"}
    And an external claim "external-claim"
    When 5 pods "tester" using claim "external-claim" are created
    Then all pods are <state>

    Examples:
      | mode          | registration                      | state                                                            |
      | control plane | , not registered with the kubelet | scheduled                                                        |
      | kubelet       |                                   | running with env "admin_x=y" and "user_a=b" in every container |

  Scenario Outline: retries pod scheduling after creating device class (<mode>)
    Given 1 ready node
    And a driver with 1 device per node<registration>
    And a device class with parameters {"x":"y"}
    When pod "tester-1" with an inline claim is created
      | device class | ${class}-b |
    Then pod "tester-1" is unschedulable
    When device class "${class}-b" is created as a copy of the device class
    Then pod "tester-1" is <state>

    Examples:
      | mode          | registration                      | state                                                            |
      | control plane | , not registered with the kubelet | scheduled                                                        |
      | kubelet       |                                   | running with env "admin_x=y" and "user_a=b" in every container |

  Scenario Outline: retries pod scheduling after updating device class (<mode>)
    Given 1 ready node
    And a driver with 1 device per node<registration>
    And a device class with parameters {"x":"y"}
    When the device class selector is changed to "false"
    And pod "tester-1" with an inline claim is created
    Then pod "tester-1" is unschedulable
    When the device class selector is restored
    Then pod "tester-1" is <state>

    Examples:
      | mode          | registration                      | state                                                            |
      | control plane | , not registered with the kubelet | scheduled                                                        |
      | kubelet       |                                   | running with env "admin_x=y" and "user_a=b" in every container |

  Scenario Outline: runs a pod without a generated resource claim (<mode>)
    Given 1 ready node
    And a driver with 1 device per node<registration>
    And a device class with parameters {"x":"y"}
    When pod "tester-1" with an inline claim is created
      | template | none |
    And the status of pod "tester-1" marks its claim as not needed
    Then pod "tester-1" is running

    Examples:
      | mode          | registration                      |
      | control plane | , not registered with the kubelet |
      | kubelet       |                                   |

  Scenario Outline: supports simple pod referencing inline resource claim (<mode>)
    Given 1 ready node
    And a driver with 1 device per node<registration>
    And a device class with parameters {"x":"y"}
    When pod "tester-1" with an inline claim is created
    Then pod "tester-1" is <state>

    Examples:
      | mode          | registration                      | state                                                            |
      | control plane | , not registered with the kubelet | scheduled                                                        |
      | kubelet       |                                   | running with env "admin_x=y" and "user_a=b" in every container |

  Scenario Outline: supports inline claim referenced by multiple containers (<mode>)
    Given 1 ready node
    And a driver with 1 device per node<registration>
    And a device class with parameters {"x":"y"}
    When pod "tester-1" with an inline claim is created
      | containers | 3 |
    Then pod "tester-1" is <state>

    Examples:
      | mode          | registration                      | state                                                            |
      | control plane | , not registered with the kubelet | scheduled                                                        |
      | kubelet       |                                   | running with env "admin_x=y" and "user_a=b" in every container |

  Scenario Outline: supports simple pod referencing external resource claim (<mode>)
    Given 1 ready node
    And a driver with 1 device per node<registration>
    And a device class with parameters {"x":"y"}
    And an external claim "external-claim"
    When pod "tester-1" using claim "external-claim" is created
    Then pod "tester-1" is <state>

    Examples:
      | mode          | registration                      | state                                                            |
      | control plane | , not registered with the kubelet | scheduled                                                        |
      | kubelet       |                                   | running with env "admin_x=y" and "user_a=b" in every container |

  Scenario Outline: supports external claim referenced by multiple pods (<mode>)
    Given 1 ready node
    And a driver with 1 device per node<registration>
    And a device class with parameters {"x":"y"}
    And an external claim "external-claim"
    When 3 pods "tester" using claim "external-claim" are created
    Then all pods are <state>

    Examples:
      | mode          | registration                      | state                                                            |
      | control plane | , not registered with the kubelet | scheduled                                                        |
      | kubelet       |                                   | running with env "admin_x=y" and "user_a=b" in every container |

  Scenario Outline: supports external claim referenced by multiple containers of multiple pods (<mode>)
    Given 1 ready node
    And a driver with 1 device per node<registration>
    And a device class with parameters {"x":"y"}
    And an external claim "external-claim"
    When 3 pods "tester" using claim "external-claim" are created
      | containers | 3 |
    Then all pods are <state>

    Examples:
      | mode          | registration                      | state                                                            |
      | control plane | , not registered with the kubelet | scheduled                                                        |
      | kubelet       |                                   | running with env "admin_x=y" and "user_a=b" in every container |

  Scenario Outline: supports init containers (<mode>)
    Given 1 ready node
    And a driver with 1 device per node<registration>
    And a device class with parameters {"x":"y"}
    When pod "tester-1" with an inline claim is created
      | init container | yes |
    Then pod "tester-1" is <state>

    Examples:
      | mode          | registration                      | state                                                            |
      | control plane | , not registered with the kubelet | scheduled                                                        |
      | kubelet       |                                   | running with env "admin_x=y" and "user_a=b" in every container |

  Scenario: supports init containers (kubelet env)
    Given 1 ready node
    And a driver with 1 device per node
    And a device class with parameters {"x":"y"}
    When pod "tester-1" with an inline claim is created
      | init container | yes |
    Then pod "tester-1" is running
    And init container "init" of pod "tester-1" has env "admin_x=y" and "user_a=b"

  Scenario Outline: must deallocate after use (<mode>)
    Given 1 ready node
    And a driver with 1 device per node<registration>
    And a device class with parameters {"x":"y"}
    And an external claim "external-claim"
    When pod "tester-1" using claim "external-claim" is created
    Then claim "external-claim" is allocated
    And pod "tester-1" is <state>
    When pod "tester-1" is deleted
    Then claim "external-claim" is deallocated

    Examples:
      | mode          | registration                      | state                                                            |
      | control plane | , not registered with the kubelet | scheduled                                                        |
      | kubelet       |                                   | running with env "admin_x=y" and "user_a=b" in every container |

  # Needs the sample device plugin, a real pod: only on a cluster with a container runtime.
  @ContainerRuntime @serial @FaultExempt:DevicePluginReregistration
  Scenario: supports extended resources together with ResourceClaim
    Given 1 ready node
    And a driver with 1 device per node
    And a device class with parameters {"x":"y"}
    And the sample device plugin is deployed on node 0
    And node 0 has 2 allocatable "example.com/resource"
    And an external claim "external-claim"
    When pod "tester-1" using claim "external-claim" is created
      | extended resource | example.com/resource=1 |
    Then pod "tester-1" is running
    And every container of pod "tester-1" has env "admin_x=y" and "user_a=b"
