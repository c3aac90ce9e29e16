//! What the planner and the validator know of each distribution, in one description per
//! distribution ([`Capabilities`]): the rules read it instead of asking which distribution a
//! cluster runs. A new distribution is a variant of [`Distribution`] and an arm of
//! [`Distribution::capabilities`]; the compiler finds the rest.

use super::network::{Cni, NetworkDefaults};
use super::types::Distribution;
use super::values::KubeVersion;

/// A distribution's rules and words, as the planner and the validator read them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Its name in cluster files, spec hashes and VM descriptions (`kubeadm`, `k3s`).
    pub name: &'static str,
    /// How messages name the software (`kubeadm`, `K3s`).
    pub tool: &'static str,
    /// Whether a new Kubernetes version moves in place on the control plane (`kubeadm upgrade
    /// apply`); without, the machines' spec hash carries the version and they are replaced.
    pub upgrades_in_place: bool,
    /// Whether the control planes keep the cluster state in a stacked etcd, whose quorum wants
    /// an odd number of members and whose member leaves with its control plane; without, the
    /// servers share a datastore and any number of them (one or more) is valid.
    pub etcd_quorum: bool,
    /// Whether the admin kubeconfig a control plane writes names the node's own loopback at
    /// the endpoint's port (K3s's `https://127.0.0.1:6443`) rather than the endpoint: such a
    /// server is admitted too (capstan still dials the endpoint).
    pub admin_server_on_node_loopback: bool,
    /// Whether its machines must see all their memory at boot (Talos reads it once): a
    /// template with memory hotplug is no source for a clone.
    pub refuses_memory_hotplug: bool,
    /// Whether a new machine joins the cluster on its own as it boots (Talos, from its
    /// machine config), so its Node may exist before it was prepared: it is prepared anyway.
    pub joins_on_its_own: bool,
    /// What starts the first control plane, as reasons name it.
    pub init: &'static str,
    /// What undoes a node before its VM shuts down, as reasons name it.
    pub reset: &'static str,
    /// How a leaving control plane's etcd member goes, as reasons name it (with
    /// `etcd_quorum`): (alive, dead).
    pub etcd_leave: (&'static str, &'static str),
    /// Its network when the file says nothing, and the CNIs it installs.
    pub network: NetworkDefaults,
    /// What preparing a new machine does, around its version: (before, after).
    prepare: (&'static str, &'static str),
    /// Where its nodes' labels and taints come from.
    pub scheduling: super::scheduling::SchedulingWays,
    /// The folder under which alone it mounts a data disk (`machine.disks[].mount`), when it
    /// has one: Talos mounts user volumes only at `/var/mnt/<name>`.
    pub user_volumes_under: Option<&'static str>,
    /// How a node's static address and network cards reach it, as reasons and docs name it.
    pub network_config: &'static str,
    /// Whether a node's static address and cards are configured through Proxmox's cloud-init
    /// (`ipconfig<n>`, `nameserver`, `searchdomain`): its template needs a cloud-init drive and
    /// cloud-init. Without, the distribution's own config carries them (Talos).
    pub cloud_init_network: bool,
    /// The operating system's own client configuration capstan keeps for operators beside
    /// the kubeconfig, by the key of its record (Talos's `talosconfig`); none when the
    /// kubeconfig is all there is.
    pub os_client_config: Option<&'static str>,
}

impl Capabilities {
    /// What preparing a new machine for `version` does, as reasons name it.
    pub fn prepare(&self, version: KubeVersion) -> String {
        let (before, after) = self.prepare;
        format!("{before}{version}{after}")
    }
}

const KUBEADM: Capabilities = Capabilities {
    name: "kubeadm",
    tool: "kubeadm",
    upgrades_in_place: true,
    etcd_quorum: true,
    admin_server_on_node_loopback: false,
    refuses_memory_hotplug: false,
    joins_on_its_own: false,
    init: "kubeadm init",
    reset: "kubeadm reset",
    etcd_leave: (
        "its etcd member is removed through another control plane",
        "its etcd member is removed through another control plane",
    ),
    network: NetworkDefaults {
        pods: ([172, 16, 0, 0], 16),
        services: ([10, 96, 0, 0], 12),
        cni: Cni::Calico,
        cnis: &[
            (
                Cni::Calico,
                "IPIP, applied through the new cluster's API at bootstrap",
            ),
            (Cni::None, "no CNI: Flux installs one"),
        ],
    },
    prepare: ("install CRI-O and Kubernetes ", ""),
    os_client_config: None,
    scheduling: super::scheduling::SchedulingWays {
        control_planes_schedulable: false,
        registers_labels: true,
    },
    user_volumes_under: None,
    network_config: "Proxmox's cloud-init (ipconfig, nameserver, searchdomain)",
    cloud_init_network: true,
};

const K3S: Capabilities = Capabilities {
    name: "k3s",
    tool: "K3s",
    upgrades_in_place: false,
    etcd_quorum: false,
    admin_server_on_node_loopback: true,
    refuses_memory_hotplug: false,
    joins_on_its_own: false,
    init: "start the K3s server",
    reset: "K3s uninstall",
    etcd_leave: ("", ""),
    // K3s's own defaults (`--cluster-cidr`, `--service-cidr`): what its clusters ran before
    // capstan rendered them.
    network: NetworkDefaults {
        pods: ([10, 42, 0, 0], 16),
        services: ([10, 43, 0, 0], 16),
        cni: Cni::Flannel,
        cnis: &[
            (Cni::Flannel, "built in"),
            (
                Cni::None,
                "`flannel-backend: none` and `disable-network-policy`: Flux installs one",
            ),
        ],
    },
    prepare: ("check that K3s ", " is in its template"),
    os_client_config: None,
    scheduling: super::scheduling::SchedulingWays {
        control_planes_schedulable: true,
        registers_labels: true,
    },
    user_volumes_under: None,
    network_config: "Proxmox's cloud-init (ipconfig, nameserver, searchdomain)",
    cloud_init_network: true,
};

const TALOS: Capabilities = Capabilities {
    name: "talos",
    tool: "Talos",
    upgrades_in_place: false,
    etcd_quorum: true,
    admin_server_on_node_loopback: false,
    refuses_memory_hotplug: true,
    joins_on_its_own: true,
    init: "bootstrap etcd through the Talos API",
    reset: "delete its config ISO if still there",
    etcd_leave: (
        "it leaves etcd through its Talos API (forfeiting leadership first)",
        "its etcd member is removed by id through a healthy control plane",
    ),
    // The ranges capstan's Talos configs always carried (Talos's own defaults).
    network: NetworkDefaults {
        pods: ([10, 244, 0, 0], 16),
        services: ([10, 96, 0, 0], 12),
        cni: Cni::Flannel,
        cnis: &[
            (Cni::Flannel, "built in"),
            (
                Cni::None,
                "`cluster.network.cni.name: none`: Flux installs one",
            ),
        ],
    },
    prepare: (
        "check that Talos runs its machine config for Kubernetes ",
        "",
    ),
    os_client_config: Some("talosconfig"),
    scheduling: super::scheduling::SchedulingWays {
        control_planes_schedulable: false,
        registers_labels: false,
    },
    user_volumes_under: Some("/var/mnt/"),
    network_config: "its machine config (NoCloud network-config, LinkConfig per card)",
    cloud_init_network: false,
};

impl Distribution {
    /// Every distribution, in declaration order.
    pub const ALL: [Distribution; 3] = [
        Distribution::Kubeadm,
        Distribution::K3s,
        Distribution::Talos,
    ];

    /// This distribution's rules and words.
    pub const fn capabilities(self) -> &'static Capabilities {
        match self {
            Distribution::Kubeadm => &KUBEADM,
            Distribution::K3s => &K3S,
            Distribution::Talos => &TALOS,
        }
    }

    /// Its name in cluster files, spec hashes and VM descriptions.
    pub const fn name(self) -> &'static str {
        self.capabilities().name
    }

    /// The distribution named `name` ([`Distribution::name`]), if any.
    pub fn from_name(name: &str) -> Option<Distribution> {
        Distribution::ALL.into_iter().find(|d| d.name() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_distribution_is_found_by_the_name_it_is_written_with() {
        for distribution in Distribution::ALL {
            let written = serde_json::to_value(distribution).expect("serialises");
            assert_eq!(written, distribution.name(), "the cluster file's spelling");
            assert_eq!(
                Distribution::from_name(distribution.name()),
                Some(distribution)
            );
        }
        assert_eq!(Distribution::from_name("talos"), Some(Distribution::Talos));
        assert_eq!(Distribution::from_name("rke2"), None);
    }

    #[test]
    fn only_kubeadm_moves_a_version_in_place_and_keeps_an_etcd_quorum_and_only_k3s_names_its_loopback()
     {
        let kubeadm = Distribution::Kubeadm.capabilities();
        let k3s = Distribution::K3s.capabilities();
        assert!(kubeadm.upgrades_in_place && kubeadm.etcd_quorum);
        assert!(!k3s.upgrades_in_place && !k3s.etcd_quorum);
        assert!(k3s.admin_server_on_node_loopback && !kubeadm.admin_server_on_node_loopback);
        let version: KubeVersion = "1.36.2".parse().expect("a version");
        assert_eq!(
            kubeadm.prepare(version),
            "install CRI-O and Kubernetes 1.36.2"
        );
        assert_eq!(
            k3s.prepare(version),
            "check that K3s 1.36.2 is in its template"
        );
    }
}
