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
/// The kubelet's kubeconfig, present once the node has joined (kubeadm's preflight refuses a
/// second join when it exists).
pub const KUBELET_CONF: &str = "/etc/kubernetes/kubelet.conf";
