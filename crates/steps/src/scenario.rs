//! The scenario builder's steps side, in the spirit of upstream's
//! `builder.go` and `deploy.go`: every class, claim, template, pod, driver
//! and manifest object a scenario makes is created through the World
//! (`create`), and each creation leaves its typed cleanup on the scenario's
//! stack in the same call.
//!
//! The stack itself, what is read from it and its teardown in upstream's
//! order live in the harness ([`crate::harness::scenario`]), as upstream
//! keeps its `Builder` in a library package (`test/e2e/dra/utils`). Here is
//! what ties it to the steps: the stack names drivers as sentences do
//! ([`DriverRef`]).
use super::params::DriverRef;
use crate::harness::scenario::DriverLabel;

mod create;

/// What the scenario made, with each cleanup; drivers named as sentences
/// name them.
pub type Scenario = crate::harness::scenario::Scenario<DriverRef>;
/// One thing the scenario made, and so one cleanup.
pub type Created = crate::harness::scenario::Created<DriverRef>;

impl DriverLabel for DriverRef {
    fn is_the_driver(&self) -> bool {
        matches!(self, DriverRef::The)
    }
}
