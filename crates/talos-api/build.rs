//! Generates the Talos API from the copied protos with protox, a protobuf compiler in Rust
//! that also carries Google's well-known types, so the build needs no `protoc`. The server
//! side (with default methods answering Unimplemented) is generated only for feature `server`.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("proto");
    let protos = ["machine/machine.proto", "v1alpha1/state.proto"];
    for file in [
        "machine/machine.proto",
        "common/common.proto",
        "google/rpc/status.proto",
        "v1alpha1/state.proto",
        "v1alpha1/resource.proto",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(file).display());
    }
    let descriptors = protox::compile(protos, [&root])?;
    let server = std::env::var_os("CARGO_FEATURE_SERVER").is_some();
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(server)
        .generate_default_stubs(server)
        // No `connect(url)` helper: the daemon dials with its own rustls connector.
        .build_transport(false)
        .include_file("talos_api.rs")
        .emit_rerun_if_changed(false)
        .compile_fds(descriptors)?;
    Ok(())
}
