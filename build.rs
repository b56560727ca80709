//! Generates the kubelet gRPC APIs from `proto/` with protox (pure Rust), so
//! building needs no `protoc`.
use std::path::Path;

const PROTOS: &[&str] = &[
    "pluginregistration/v1/api.proto",
    "dra/v1/api.proto",
    "dra/v1beta1/api.proto",
    "dra/v1alpha4/api.proto",
    "dra-health/v1alpha1/api.proto",
    "dra-health/v1/api.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The proto crate builds with this script; `proto/` sits at the top.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let root = root.as_path();
    println!("cargo:rerun-if-changed={}", root.display());
    let fds = protox::compile(PROTOS.iter().map(|p| root.join(p)), [root])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(fds)?;
    Ok(())
}
