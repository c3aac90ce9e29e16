//! Files on a node that the node software reacts to: kubeadm's own, at the locations kubeadm
//! documents (`kubeadm init` phases), and the two scripts a reconciler writes there and runs.
//! The script names are the contract with capstan's kubeadm provider; the daemon crate's tests
//! run capstan's steps against this software, so a drift on either side fails there.

/// Installs CRI-O and the Kubernetes packages of a version (`bash prepare-node.sh VERSION`).
pub const PREPARE_SCRIPT: &str = "/etc/capstan/prepare-node.sh";
/// Renews the control plane's certificates (`kubeadm certs renew all`, static pods restarted).
pub const RENEW_SCRIPT: &str = "/etc/capstan/renew-certificates.sh";
/// kube-vip's static pod: the control plane that has it holds the endpoint address.
pub const KUBE_VIP_MANIFEST: &str = "/etc/kubernetes/manifests/kube-vip.yaml";
/// The admin kubeconfig `kubeadm init` writes.
pub const ADMIN_CONF: &str = "/etc/kubernetes/admin.conf";
/// K3s's install script, carried by a K3s template with the binary and its images (K3s's
/// air-gap install); run as `env INSTALL_K3S_SKIP_DOWNLOAD=true ... sh K3S_INSTALL_SCRIPT
/// server|agent FLAGS`.
pub const K3S_INSTALL_SCRIPT: &str = "/usr/local/bin/k3s-install.sh";
/// The `k3s` binary of K3s's air-gap install, where its install script looks for it.
pub const K3S_BINARY: &str = "/usr/local/bin/k3s";
/// What the install script leaves to remove a K3s server.
pub const K3S_UNINSTALL_SCRIPT: &str = "/usr/local/bin/k3s-uninstall.sh";
/// What the install script leaves to remove a K3s agent.
pub const K3S_AGENT_UNINSTALL_SCRIPT: &str = "/usr/local/bin/k3s-agent-uninstall.sh";
/// K3s's configuration file, read at every start of a server or an agent: `token:`,
/// `datastore-endpoint:`, `server:` (flag names without `--`).
pub const K3S_CONFIG: &str = "/etc/rancher/k3s/config.yaml";
/// The admin kubeconfig a K3s server writes (its server is `https://127.0.0.1:6443`).
pub const K3S_KUBECONFIG: &str = "/etc/rancher/k3s/k3s.yaml";

/// The kubelet's kubeconfig, present once the node has joined (kubeadm's preflight refuses a
/// second join when it exists).
pub const KUBELET_CONF: &str = "/etc/kubernetes/kubelet.conf";

/// The data disks capstan mounts on a kubeadm or K3s node, one line each: `SERIAL PATH FS`.
pub const DATA_DISKS_LIST: &str = "/etc/capstan/data-disks";
/// Formats (the first time) and mounts each disk of [`DATA_DISKS_LIST`], found by its serial
/// under `/dev/disk/by-id/` (`bash DATA_DISKS_SCRIPT`).
pub const DATA_DISKS_SCRIPT: &str = "/etc/capstan/mount-data-disks.sh";
/// cloud-init's program, on a template that carries it (`test -x`).
pub const CLOUD_INIT: &str = "/usr/bin/cloud-init";
