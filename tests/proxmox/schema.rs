//! The schema judge (`capstan_testkit::pve_schema`) proved on hand-written parameters before it
//! is trusted on capstan's: property strings read as PVE reads them (aliases, key aliases,
//! default keys, format references read from `typetext`), with their enumerations, ranges and
//! named formats; and a wrong parameter planted in the lab is caught.

use capstan_testkit::pve_schema::{parse_property_string, schema};

const CONFIG: &str = "/nodes/{node}/qemu/{vmid}/config";

fn check(name: &str, value: &str) -> Result<(), String> {
    schema().check(CONFIG, "POST", name, value)
}

#[test]
fn the_judge_accepts_what_proxmox_accepts() {
    let valid = [
        ("net0", "virtio,bridge=vmbr0"),
        ("net0", "virtio=BC:24:11:0A:00:01,bridge=vmbr0,firewall=1"),
        ("net1", "model=virtio,bridge=vmbr1,tag=30,mtu=9000"),
        ("net2", "e1000,bridge=vmbr0,tag=4094,link_down=0,queues=4"),
        ("net3", "virtio,bridge=vmbr0,firewall=on"),
        (
            "scsi1",
            "local-lvm:32,ssd=1,discard=on,iothread=1,cache=none",
        ),
        ("scsi2", "file=ceph:100,serial=capstan-data1,backup=0"),
        ("scsi0", "local-lvm:vm-105-disk-0,iothread=1,size=50G"),
        ("ipconfig0", "ip=dhcp"),
        ("ipconfig0", "ip=192.168.1.50/24,gw=192.168.1.1"),
        ("ipconfig1", "ip=10.30.0.7/24"),
        ("ipconfig0", "ip6=auto"),
        ("hostpci0", "mapping=gpu-a40,pcie=1"),
        ("hostpci1", "0000:01:00.0,rombar=0"),
        ("tags", "capstan;cluster-prod;role-worker;team-storage"),
        ("sockets", "2"),
        ("balloon", "0"),
        ("cpu", "x86-64-v2-AES"),
        ("nameserver", "192.168.1.2 192.168.1.3"),
        ("searchdomain", "lab.example"),
        ("memory", "8192"),
    ];
    for (name, value) in valid {
        assert_eq!(check(name, value), Ok(()), "{name}: {value}");
    }
    assert_eq!(
        schema().check("/nodes/{node}/qemu/{vmid}/clone", "POST", "pool", "team-a"),
        Ok(())
    );
}

#[test]
fn the_judge_refuses_what_proxmox_refuses_in_its_words() {
    let invalid = [
        // An unknown key, a VLAN out of range, an MTU out of range, an unknown model.
        (
            "net1",
            "virtio,bridge=vmbr0,vlan=20",
            "invalid key in comma-separated list property: vlan",
        ),
        (
            "net1",
            "virtio,bridge=vmbr0,tag=4095",
            "net1.tag: value must have a maximum value of 4094",
        ),
        (
            "net1",
            "virtio,bridge=vmbr0,tag=0",
            "net1.tag: value must have a minimum value of 1",
        ),
        (
            "net1",
            "virtio,bridge=vmbr1,mtu=70000",
            "net1.mtu: value must have a maximum value of 65520",
        ),
        (
            "net0",
            "virtio3,bridge=vmbr0",
            "does not have a value in the enumeration",
        ),
        // A card needs its model; a MAC with the group bit; a key given twice (one through
        // its alias).
        (
            "net0",
            "bridge=vmbr0",
            "net0.model: property is missing and it is not optional",
        ),
        (
            "net0",
            "virtio=BD:24:11:0A:00:01,bridge=vmbr0",
            "valid unicast MAC address",
        ),
        (
            "net0",
            "virtio,e1000=BC:24:11:0A:00:01",
            "key alias 'model' is already defined",
        ),
        (
            "net0",
            "virtio,bridge=vmbr0,bridge=vmbr1",
            "duplicate key in comma-separated list property: bridge",
        ),
        ("net0", "virtio,bridge=vmbr 0", "invalid bridge ID"),
        // Disk options out of their enumerations, a non-boolean flag.
        (
            "scsi1",
            "local-lvm:32,cache=fast",
            "scsi1.cache: value 'fast' does not have a value in the enumeration",
        ),
        (
            "scsi1",
            "local-lvm:32,discard=yes",
            "scsi1.discard: value 'yes' does not have a value in the enumeration",
        ),
        (
            "scsi1",
            "local-lvm:32,ssd=maybe",
            "scsi1.ssd: type check ('boolean') failed - got 'maybe'",
        ),
        ("scsi1", "local-lvm:32,mount=/data", "invalid key"),
        // cloud-init addresses: a prefix PVE refuses, a gateway that is no address, an
        // unknown key (the format is a reference, read from its typetext).
        (
            "ipconfig0",
            "ip=192.168.1.50/4",
            "ipv4 network configuration",
        ),
        (
            "ipconfig0",
            "ip=192.168.1.50/24,gw=router",
            "valid IPv4 address",
        ),
        ("ipconfig0", "ip=dhcp,dns=1.1.1.1", "invalid key"),
        // PCI: a mapping id PVE refuses, an unknown driver.
        (
            "hostpci0",
            "mapping=9gpu",
            "invalid configuration ID '9gpu'",
        ),
        (
            "hostpci0",
            "mapping=gpu-a40,driver=nvidia",
            "value 'nvidia' does not have a value in the enumeration 'vfio, keep'",
        ),
        // Tags: one with a character pve-tag refuses.
        ("tags", "capstan;team storage!", "invalid characters in tag"),
        ("sockets", "0", "value must have a minimum value of 1"),
        (
            "flux-capacitor",
            "1",
            "not a parameter of the published schema",
        ),
    ];
    for (name, value, words) in invalid {
        let refused = check(name, value).expect_err(value);
        assert!(
            refused.contains(words),
            "{name}: {value}: {refused} (expected {words})"
        );
    }
}

#[test]
fn aliases_key_aliases_and_default_keys_are_read_as_pve_reads_them() {
    let net = schema()
        .parameter(CONFIG, "POST", "net0")
        .and_then(|p| p["format"].as_object())
        .expect("net[n] has its format inline");
    let parsed =
        parse_property_string(net, "virtio=BC:24:11:0A:00:01,bridge=vmbr1,tag=30").expect("parses");
    assert_eq!(parsed["model"], "virtio");
    assert_eq!(parsed["macaddr"], "BC:24:11:0A:00:01");
    assert_eq!(parsed["bridge"], "vmbr1");
    let bare = parse_property_string(net, "e1000,firewall=yes").expect("parses");
    assert_eq!(bare["model"], "e1000");
    assert_eq!(bare["firewall"], "1", "booleans read by parse_boolean");
    assert_eq!(
        parse_property_string(net, "virtio,e1000"),
        Err("duplicate key in comma-separated list property: model".into())
    );
}
