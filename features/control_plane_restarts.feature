@serial
Feature: control plane restarts
  What runs rides out the local cluster's API server, scheduler and
  controller-manager restarting: the runner's requests are tried again
  while the API server is away, its watches start again, and what
  Kubernetes does is what it would have done without the restart. The
  local cluster only (on a kubeconfig cluster the restart step fails saying
  so), hence not tagged @DynamicResourceAllocation; select it by this file
  or with `--name restart`. Alone on the cluster (@serial): the others
  would ride the restart out too, but their timings would not be theirs.
  (not upstream's: the runner's own)

  Scenario: a claim is allocated and a pod runs across an API server restart
    Given 1 ready node
    And a driver with 1 device per node
    And a device class
    When pod "tester-1" with an inline claim is created
    And the kube-apiserver is restarted
    Then pod "tester-1" is running
    And the claim of pod "tester-1" is allocated
    When the kube-apiserver is restarted
    And pod "tester-1" is deleted
    Then the claim of pod "tester-1" is deleted

  Scenario: the scheduler and the controller-manager restarted between two pods
    Given 1 ready node
    And a driver with 2 devices per node
    And a device class
    When pod "tester-1" with an inline claim is created
    Then pod "tester-1" is running
    When the kube-scheduler is restarted
    And the kube-controller-manager is restarted
    And pod "tester-2" with an inline claim is created
    Then pod "tester-2" is running
    And the claim of pod "tester-2" is allocated
