//! A plugin whose calls the harness sees: the suite's own driver, whose
//! plugins the harness hosts, and a driver under test behind the
//! interposer, whose answers it passes on. Steps that count calls, read the
//! claims a plugin holds prepared or its CDI specs ask either one the same
//! way; what differs is only where the harness stands.
use std::sync::Arc;

use dra_e2e_conn::node_files::NodeFiles;
use dra_e2e_plugin::{Calls, Prepared};

use crate::driver::Driver;
use crate::under_test::interposed::Interposed;

pub trait ObservedPlugin {
    /// What the harness is on a node for this driver, for messages: "plugin"
    /// or "interposer".
    fn stand(&self) -> &'static str;
    /// Every call the kubelet made, per node and method.
    fn calls(&self) -> &Calls;
    /// The claims the driver holds prepared on `node`, as the harness saw
    /// them; `None` where it does not stand on `node`.
    fn prepared(&self, node: &str) -> Option<&Prepared>;
    /// The CDI spec directory the driver writes on `node`, where the
    /// harness reaches the node.
    fn cdi_files(&self, node: &str) -> Option<Arc<dyn NodeFiles>>;
}

impl ObservedPlugin for Driver {
    fn stand(&self) -> &'static str {
        "plugin"
    }
    fn calls(&self) -> &Calls {
        Driver::calls(self)
    }
    fn prepared(&self, node: &str) -> Option<&Prepared> {
        Driver::prepared(self, node)
    }
    fn cdi_files(&self, node: &str) -> Option<Arc<dyn NodeFiles>> {
        Driver::cdi_files(self, node)
    }
}

impl ObservedPlugin for Interposed {
    fn stand(&self) -> &'static str {
        "interposer"
    }
    fn calls(&self) -> &Calls {
        &self.calls
    }
    fn prepared(&self, node: &str) -> Option<&Prepared> {
        Interposed::prepared(self, node)
    }
    fn cdi_files(&self, node: &str) -> Option<Arc<dyn NodeFiles>> {
        Some(Interposed::cdi_files(self, node))
    }
}
