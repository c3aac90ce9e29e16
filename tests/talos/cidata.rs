//! `cidata` images judged by GNU xorriso (Debian's `xorriso`): the volume id, the three files
//! under their names, and their contents byte for byte.

use std::path::Path;
use std::process::Command;

use capstan_core::talos::{MachineRole, NodeFacts, StaticAddress, cidata_files, cidata_image};

use capstan_testkit::judge::{self, Judge};

pub(crate) fn xorriso(image: &Path, commands: &[&str]) -> String {
    let output = Command::new("xorriso")
        .arg("-indev")
        .arg(image)
        .args(commands)
        .output()
        .expect("xorriso runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "xorriso failed:\n{text}");
    // xorriso complains of any structure it finds odd, even when it reads on.
    for complaint in ["WARNING", "SORRY", "FAILURE", "MISHAP"] {
        assert!(
            !text.contains(complaint),
            "xorriso says {complaint}:\n{text}"
        );
    }
    text
}

pub(crate) fn node(static_address: Option<StaticAddress>) -> NodeFacts {
    NodeFacts {
        role: MachineRole::ControlPlane,
        hostname: "talos-prod-cp-1".into(),
        install_disk: "/dev/sda".into(),
        mac_address: "bc:24:11:12:34:56".parse().expect("a MAC address"),
        static_address,
        register_with_taints: Vec::new(),
        patches: Vec::new(),
        links: Vec::new(),
        volumes: Vec::new(),
    }
}

fn judged(facts: &NodeFacts) {
    if !judge::present(&[Judge::Xorriso]) {
        return;
    }
    // A config-sized user-data (a control plane's is tens of KiB) across several sectors.
    let config = format!("---\nversion: v1alpha1\n# {}\n", "x".repeat(30_000));
    let files = cidata_files(facts, "vm-101", &config).expect("files");
    let image = cidata_image(&files).expect("image");
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("cidata.iso");
    std::fs::write(&path, &image).expect("write image");

    let pvd = xorriso(&path, &["-pvd_info"]);
    assert!(pvd.contains("Volume Id    : cidata"), "{pvd}");

    let listing = xorriso(&path, &["-find", "/", "-type", "f"]);
    let mut found: Vec<&str> = listing
        .lines()
        .filter(|line| line.starts_with("'/"))
        .collect();
    found.sort_unstable();
    assert_eq!(
        found,
        ["'/meta-data'", "'/network-config'", "'/user-data'"],
        "{listing}"
    );

    let out = dir.path().join("out");
    xorriso(
        &path,
        &[
            "-osirrox",
            "on",
            "-extract",
            "/",
            out.to_str().expect("UTF-8 path"),
        ],
    );
    let read = |name: &str| std::fs::read_to_string(out.join(name)).expect("extracted file");
    assert_eq!(read("user-data"), files.user_data);
    assert_eq!(read("meta-data"), files.meta_data);
    assert_eq!(read("network-config"), files.network_config);
}

#[test]
fn xorriso_reads_a_dhcp_nodes_cidata_image_as_written() {
    judged(&node(None));
}

#[test]
fn xorriso_reads_a_static_nodes_cidata_image_as_written() {
    let fixed = StaticAddress {
        address: "10.20.0.50/24".parse().expect("net"),
        gateway: "10.20.0.1".parse().expect("ip"),
        nameservers: vec!["10.20.0.2".parse().expect("ip")],
        search_domain: None,
    };
    judged(&node(Some(fixed)));
}
