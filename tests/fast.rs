//! The fast tier: every integration test that needs no root, no Go and no
//! control plane, in one binary, so that an edit links the tests once.
//! Plain `cargo test` runs it; `tests/tiers.rs` says what it left to
//! `make test` (tests/cluster.rs). Each module is a file beside this one.
mod common;

mod clean;
mod cli;
mod commands;
mod docs;
mod floors;
mod image_cli;
mod options;
#[path = "plugin_kubelet/main.rs"]
mod plugin_kubelet;
mod profile;
mod rolling_driver_manifests;
mod step_rule;
mod test_driver_manifests;
mod upstream_table;
