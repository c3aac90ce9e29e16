//! The endpoints of the simulated API with the parameters each accepts: names and types as
//! the Proxmox VE 9.1 schema gives them, written by hand (the fidelity test compares them with
//! the real schema).

use super::formats::{check_drive, check_hostpci, check_ipconfig, check_net};
use super::params::{
    Spec, Ty, check_content, check_content_list, check_dns_name, check_memory, check_node,
    check_pool, check_size, check_storage, check_tag_list, check_upload_tmpfile, check_urlencoded,
};

fn s(name: &'static str) -> Spec {
    Spec::new(name, Ty::Str)
}
fn int(name: &'static str) -> Spec {
    Spec::new(name, Ty::Int)
}
fn num(name: &'static str) -> Spec {
    Spec::new(name, Ty::Num)
}
fn b(name: &'static str) -> Spec {
    Spec::new(name, Ty::Bool)
}
fn node() -> Spec {
    s("node").required().check(check_node)
}
fn vmid() -> Spec {
    int("vmid").required().min(100).max(999_999_999)
}

/// Which handler serves an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Route {
    Version,
    ClusterResources,
    ClusterNextid,
    ClusterStatus,
    Nodes,
    NodeStatus,
    NodeQemu,
    Clone,
    ConfigGet,
    ConfigPost,
    ConfigPut,
    StatusCurrent,
    Start,
    Stop,
    Shutdown,
    Reboot,
    Destroy,
    Resize,
    AgentExec,
    AgentExecStatus,
    AgentNetwork,
    AgentPing,
    AgentFileWrite,
    AgentOsinfo,
    TaskStatus,
    TaskLog,
    NodeStorage,
    StorageStatus,
    StorageContent,
    StorageUpload,
    DeleteVolume,
    Pools,
    PoolsCreate,
    PoolsUpdate,
    NodeNetwork,
    PciMappings,
}

/// One endpoint: method, path template, handler and parameters.
#[derive(Debug, Clone)]
pub(super) struct Endpoint {
    pub method: &'static str,
    pub template: &'static str,
    pub route: Route,
    pub params: Vec<Spec>,
}

fn disks() -> Vec<String> {
    let mut disks = Vec::new();
    for (prefix, count) in [("ide", 4), ("scsi", 31), ("virtio", 16), ("sata", 6)] {
        disks.extend((0..count).map(|i| format!("{prefix}{i}")));
    }
    disks.push("efidisk0".into());
    disks.push("tpmstate0".into());
    disks
}

fn config_params(post: bool) -> Vec<Spec> {
    let mut params = vec![
        b("acpi"),
        s("affinity"),
        s("agent"),
        s("arch").choices(&["x86_64", "aarch64"]),
        s("args"),
        b("autostart"),
        int("balloon").min(0),
        s("bios").choices(&["seabios", "ovmf"]),
        s("boot"),
        s("bootdisk"),
        s("cdrom"),
        s("cicustom"),
        s("cipassword"),
        s("citype").choices(&["configdrive2", "nocloud", "opennebula"]),
        b("ciupgrade"),
        s("ciuser"),
        int("cores").min(1),
        s("cpu"),
        num("cpulimit").min(0).max(128),
        int("cpuunits").min(1).max(262_144),
        s("delete"),
        s("description").max_len(8192),
        s("digest").max_len(40),
        s("efidisk0"),
        b("force"),
        b("freeze"),
        s("hookscript"),
        s("hostpci").family(15).property(check_hostpci),
        s("hotplug"),
        s("hugepages").choices(&["any", "2", "1024"]),
        s("ide").family(3).property(check_drive),
        s("ipconfig").family(31).property(check_ipconfig),
        b("keephugepages"),
        b("kvm"),
        b("localtime"),
        s("lock").choices(&[
            "backup",
            "clone",
            "create",
            "migrate",
            "rollback",
            "snapshot",
            "snapshot-delete",
            "suspending",
            "suspended",
        ]),
        s("machine"),
        s("memory").check(check_memory),
        num("migrate_downtime").min(0),
        int("migrate_speed").min(0),
        s("name").check(check_dns_name),
        s("nameserver"),
        s("net").family(31).property(check_net),
        node(),
        b("numa"),
        s("numa").family(7),
        b("onboot"),
        s("ostype").choices(&[
            "other", "wxp", "w2k", "w2k3", "w2k8", "wvista", "win7", "win8", "win10", "win11",
            "l24", "l26", "solaris",
        ]),
        b("protection"),
        b("reboot"),
        s("revert"),
        s("rng0"),
        s("sata").family(5).property(check_drive),
        s("scsi").family(30).property(check_drive),
        s("scsihw").choices(&[
            "lsi",
            "lsi53c810",
            "virtio-scsi-pci",
            "virtio-scsi-single",
            "megasas",
            "pvscsi",
        ]),
        s("searchdomain"),
        s("serial").family(3),
        int("shares").min(0).max(50_000),
        b("skiplock"),
        s("smbios1").max_len(512),
        int("smp").min(1),
        int("sockets").min(1),
        s("sshkeys").check(check_urlencoded),
        s("startdate"),
        s("startup"),
        b("tablet"),
        s("tags").check(check_tag_list),
        b("tdf"),
        b("template"),
        s("tpmstate0"),
        s("unused").family(255),
        s("usb").family(13),
        int("vcpus").min(1),
        s("vga"),
        s("virtio").family(15).property(check_drive),
        s("vmgenid"),
        vmid(),
        s("vmstatestorage"),
        s("watchdog"),
    ];
    if post {
        params.push(int("background_delay").min(1).max(30));
    }
    params
}

/// Every endpoint the simulator serves.
pub(super) fn endpoints() -> Vec<Endpoint> {
    let e = |method, template, route, params| Endpoint {
        method,
        template,
        route,
        params,
    };
    let vm = |extra: Vec<Spec>| {
        let mut params = vec![node(), vmid()];
        params.extend(extra);
        params
    };
    vec![
        e("GET", "/version", Route::Version, vec![]),
        e(
            "GET",
            "/cluster/resources",
            Route::ClusterResources,
            vec![s("type").choices(&["vm", "storage", "node", "sdn"])],
        ),
        e(
            "GET",
            "/cluster/nextid",
            Route::ClusterNextid,
            vec![int("vmid").min(100).max(999_999_999)],
        ),
        e("GET", "/cluster/status", Route::ClusterStatus, vec![]),
        e("GET", "/nodes", Route::Nodes, vec![]),
        e(
            "GET",
            "/nodes/{node}/status",
            Route::NodeStatus,
            vec![node()],
        ),
        e(
            "GET",
            "/nodes/{node}/qemu",
            Route::NodeQemu,
            vec![node(), b("full")],
        ),
        e(
            "POST",
            "/nodes/{node}/qemu/{vmid}/clone",
            Route::Clone,
            vm(vec![
                int("bwlimit").min(0),
                s("description"),
                s("format").choices(&["raw", "qcow2", "vmdk"]),
                b("full"),
                s("name").check(check_dns_name),
                int("newid").required().min(100).max(999_999_999),
                s("pool").check(check_pool),
                s("snapname").max_len(40),
                s("storage").check(check_storage),
                s("target").check(check_node),
            ]),
        ),
        e(
            "GET",
            "/nodes/{node}/qemu/{vmid}/config",
            Route::ConfigGet,
            vm(vec![b("current"), s("snapshot").max_len(40)]),
        ),
        e(
            "POST",
            "/nodes/{node}/qemu/{vmid}/config",
            Route::ConfigPost,
            config_params(true),
        ),
        e(
            "PUT",
            "/nodes/{node}/qemu/{vmid}/config",
            Route::ConfigPut,
            config_params(false),
        ),
        e(
            "GET",
            "/nodes/{node}/qemu/{vmid}/status/current",
            Route::StatusCurrent,
            vm(vec![]),
        ),
        e(
            "POST",
            "/nodes/{node}/qemu/{vmid}/status/start",
            Route::Start,
            vm(vec![
                s("force-cpu"),
                s("machine"),
                s("migratedfrom").check(check_node),
                s("migration_network"),
                s("migration_type").choices(&["secure", "insecure"]),
                s("nets-host-mtu"),
                b("skiplock"),
                s("stateuri").max_len(128),
                s("targetstorage"),
                int("timeout").min(0),
                b("with-conntrack-state"),
            ]),
        ),
        e(
            "POST",
            "/nodes/{node}/qemu/{vmid}/status/stop",
            Route::Stop,
            vm(vec![
                b("keepActive"),
                s("migratedfrom").check(check_node),
                b("overrule-shutdown"),
                b("skiplock"),
                int("timeout").min(0),
            ]),
        ),
        e(
            "POST",
            "/nodes/{node}/qemu/{vmid}/status/shutdown",
            Route::Shutdown,
            vm(vec![
                b("forceStop"),
                b("keepActive"),
                b("skiplock"),
                int("timeout").min(0),
            ]),
        ),
        e(
            "POST",
            "/nodes/{node}/qemu/{vmid}/status/reboot",
            Route::Reboot,
            vm(vec![int("timeout").min(0)]),
        ),
        e(
            "DELETE",
            "/nodes/{node}/qemu/{vmid}",
            Route::Destroy,
            vm(vec![
                b("destroy-unreferenced-disks"),
                b("purge"),
                b("skiplock"),
            ]),
        ),
        e(
            "PUT",
            "/nodes/{node}/qemu/{vmid}/resize",
            Route::Resize,
            vm(vec![
                s("digest").max_len(40),
                Spec {
                    choices: Some(disks()),
                    ..s("disk").required()
                },
                s("size").required().check(check_size),
                b("skiplock"),
            ]),
        ),
        e(
            "POST",
            "/nodes/{node}/qemu/{vmid}/agent/exec",
            Route::AgentExec,
            vm(vec![
                Spec::new("command", Ty::Array).required(),
                s("input-data").max_len(65_536),
            ]),
        ),
        e(
            "GET",
            "/nodes/{node}/qemu/{vmid}/agent/exec-status",
            Route::AgentExecStatus,
            vm(vec![int("pid").required()]),
        ),
        e(
            "GET",
            "/nodes/{node}/qemu/{vmid}/agent/network-get-interfaces",
            Route::AgentNetwork,
            vm(vec![]),
        ),
        e(
            "POST",
            "/nodes/{node}/qemu/{vmid}/agent/ping",
            Route::AgentPing,
            vm(vec![]),
        ),
        e(
            "POST",
            "/nodes/{node}/qemu/{vmid}/agent/file-write",
            Route::AgentFileWrite,
            vm(vec![
                s("content").required().max_len(61_440),
                b("encode"),
                s("file").required(),
            ]),
        ),
        e(
            "GET",
            "/nodes/{node}/qemu/{vmid}/agent/get-osinfo",
            Route::AgentOsinfo,
            vm(vec![]),
        ),
        e(
            "GET",
            "/nodes/{node}/tasks/{upid}/status",
            Route::TaskStatus,
            vec![node(), s("upid").required()],
        ),
        e(
            "GET",
            "/nodes/{node}/tasks/{upid}/log",
            Route::TaskLog,
            vec![
                node(),
                s("upid").required(),
                b("download"),
                int("limit").min(0),
                int("start").min(0),
            ],
        ),
        e(
            "GET",
            "/nodes/{node}/storage",
            Route::NodeStorage,
            vec![
                node(),
                s("content").check(check_content_list),
                b("enabled"),
                b("format"),
                s("storage").check(check_storage),
                s("target").check(check_node),
            ],
        ),
        e(
            "GET",
            "/nodes/{node}/storage/{storage}/status",
            Route::StorageStatus,
            vec![node(), s("storage").required().check(check_storage)],
        ),
        e(
            "GET",
            "/nodes/{node}/storage/{storage}/content",
            Route::StorageContent,
            vec![
                node(),
                s("storage").required().check(check_storage),
                s("content").check(check_content),
                int("vmid").min(100).max(999_999_999),
            ],
        ),
        e(
            "POST",
            "/nodes/{node}/storage/{storage}/upload",
            Route::StorageUpload,
            vec![
                node(),
                s("storage").required().check(check_storage),
                s("content")
                    .required()
                    .choices(&["iso", "vztmpl", "import"]),
                s("filename").required().max_len(255),
                s("tmpfilename").check(check_upload_tmpfile),
            ],
        ),
        e(
            "DELETE",
            "/nodes/{node}/storage/{storage}/content/{volume}",
            Route::DeleteVolume,
            // The schema has `storage` optional: the volume may name it.
            vec![
                node(),
                s("storage").check(check_storage),
                s("volume").required(),
            ],
        ),
        e(
            "GET",
            "/nodes/{node}/network",
            Route::NodeNetwork,
            vec![
                node(),
                s("type").choices(&[
                    "bridge",
                    "bond",
                    "eth",
                    "alias",
                    "vlan",
                    "fabric",
                    "OVSBridge",
                    "OVSBond",
                    "OVSPort",
                    "OVSIntPort",
                    "vnet",
                    "any_bridge",
                    "any_local_bridge",
                    "include_sdn",
                ]),
            ],
        ),
        e(
            "GET",
            "/cluster/mapping/pci",
            Route::PciMappings,
            vec![s("check-node").check(check_node)],
        ),
        e(
            "POST",
            "/pools",
            Route::PoolsCreate,
            vec![s("poolid").required().check(check_pool), s("comment")],
        ),
        e(
            "PUT",
            "/pools",
            Route::PoolsUpdate,
            vec![
                s("poolid").required().check(check_pool),
                b("allow-move"),
                s("comment"),
                b("delete"),
                s("storage"),
                s("vms"),
            ],
        ),
        e(
            "GET",
            "/pools",
            Route::Pools,
            vec![
                s("poolid").check(check_pool),
                s("type").choices(&["qemu", "lxc", "storage"]),
            ],
        ),
    ]
}
