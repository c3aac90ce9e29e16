//! The proto copies are the files `proto/README.md` names: each one's sha256 is in its row.

use sha2::{Digest, Sha256};

#[test]
fn every_proto_copy_has_the_sha256_its_readme_names() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("proto");
    let readme = std::fs::read_to_string(root.join("README.md")).expect("the README");
    for file in [
        "machine/machine.proto",
        "common/common.proto",
        "google/rpc/status.proto",
        "v1alpha1/state.proto",
        "v1alpha1/resource.proto",
    ] {
        let bytes = std::fs::read(root.join(file)).expect("the copy");
        let digest: String = Sha256::digest(&bytes)
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect();
        let row = readme
            .lines()
            .find(|line| line.starts_with(&format!("| `{file}` |")))
            .unwrap_or_else(|| panic!("README has no row for {file}"));
        assert!(
            row.contains(&digest),
            "{file}: sha256 {digest} is not its row's"
        );
    }
}
