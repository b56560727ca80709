Feature: ResourceSlice controller
  A pool larger than one ResourceSlice may hold is published as several
  slices of at most 128 devices (64 when devices carry taints); each declares
  the pool's slice count, they share one generation, and every device is in
  exactly one of them. The scheduler sees the pool whole.
  (upstream: ResourceSlice Controller, "creates slices"; untagged there, as here)

  Background:
    Given 1 ready node

  # Slices as large as the API allows (128 devices of 32 attributes, names
  # and values of maximum length), through a controller that counts its
  # writes.
  Scenario: creates slices
    Then a ResourceSlice controller publishes 10 maximum-size slices, rests for 20s and shrinks them to one empty slice

  Scenario: splits a large pool into slices of at most 128 devices
    Given a driver with a network pool of 1280 devices, not registered with the kubelet
    Then the driver publishes pool "network" in 10 slices with 1280 devices

  Scenario: creates smaller slices for tainted devices
    Given a driver with a network pool of 100 tainted devices, not registered with the kubelet
    Then the driver publishes pool "network" in 2 slices with 100 devices

  @DynamicResourceAllocation
  Scenario: the scheduler uses a pool only while all its slices are there
    Given a driver with a network pool of 200 devices
    And a device class
    Then the driver publishes pool "network" in 2 slices with 200 devices
    When pod "tester-1" with an inline claim is created
    Then pod "tester-1" is running
    # 128 of the 200 devices are still published, but in an incomplete pool.
    When ResourceSlice "${driver}-1" is deleted
    And pod "tester-2" with an inline claim is created
    Then pod "tester-2" is unschedulable with a message containing "cannot allocate all claims"
