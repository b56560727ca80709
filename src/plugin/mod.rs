//! The kubelet plugin the runner hosts per (driver, node): registration and DRA
//! gRPC servers, test-driver semantics, call counting and failure injection.
