//! The harness a scenario drives: one DRA driver in one scenario
//! ([`driver`]: its RBAC, plugins on every node, ResourceSlices and
//! teardown) and the run's driver under test from its profile
//! ([`under_test`]: installed, deployed or interposed). Both stand on the
//! cluster and plugin floors and know nothing of Gherkin; the steps call
//! them.
pub mod driver;
pub mod timing;
pub mod under_test;
