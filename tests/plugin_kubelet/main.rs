//! The node plugin as a kubelet sees it: real gRPC over real unix sockets in a
//! temp dir, this test acting as the kubelet.
//! One test binary, one module per area.
mod calls;
mod health;
mod lifecycle;
mod prepare;
mod registration;
mod support;
