//! The cluster network as third parties see it: the stock `kubectl` reading every Node's
//! `spec.podCIDR`, the `kubernetes` Service's ClusterIP and the pods' addresses, and a CNI
//! installed as Flux would (its agent's DaemonSet applied with the kubeconfig Flux holds).

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use capstan::plan::ActionKind;
use capstan::status::{FleetStatus, reasons};

use crate::world::{World, kubectl_with, ready};

/// A CNI's node agent as Flux would apply it (Cilium's shape: a host-network DaemonSet that
/// writes its configuration into the host's `/etc/cni/net.d`).
pub const FLUX_CNI: &str = "apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: cilium
  namespace: kube-system
spec:
  selector:
    matchLabels: {k8s-app: cilium}
  template:
    metadata:
      labels: {k8s-app: cilium}
    spec:
      hostNetwork: true
      tolerations: [{operator: Exists}]
      containers: [{name: cilium-agent, image: quay.io/cilium/cilium:v1.18.2}]
      volumes: [{name: etc-cni-netd, hostPath: {path: /etc/cni/net.d}}]
";

/// `cluster`'s file with `fields` (YAML flow entries, `pods: 10.60.0.0/16, cni: none`) added
/// to its `network:` (a file of [`crate::fleet::ClusterYaml`] or alike, whose network is one
/// flow mapping starting `network: {nodes: `).
pub fn with_network(cluster: &str, fields: &str) -> String {
    let changed = cluster.replacen(
        "network: {nodes: ",
        &format!("network: {{{fields}, nodes: "),
        1,
    );
    assert_ne!(
        changed, cluster,
        "the file has a one-line network: {cluster}"
    );
    changed
}

/// Whether `cidr` (`10.60.3.0/24`) lies inside `range` (`10.60.0.0/16`), IPv4.
pub fn is_inside(cidr: &str, range: &str) -> bool {
    let parse = |text: &str| -> Option<(u32, u32)> {
        let (address, prefix) = text.trim().split_once('/').unwrap_or((text.trim(), "32"));
        Some((
            u32::from(address.parse::<Ipv4Addr>().ok()?),
            prefix.parse().ok()?,
        ))
    };
    let (Some((inner, inner_prefix)), Some((outer, outer_prefix))) = (parse(cidr), parse(range))
    else {
        return false;
    };
    let mask = |prefix: u32| u32::MAX.checked_shl(32 - prefix).unwrap_or(0);
    inner_prefix >= outer_prefix && inner & mask(outer_prefix) == outer & mask(outer_prefix)
}

/// Asserts, with the stock kubectl, that `nodes` Nodes each hold a distinct `spec.podCIDR`
/// inside `pods`, that the `kubernetes` Service is at `api_service`, and that every pod not
/// on the host's network has an address inside `pods`.
pub fn assert_network_shown(kubeconfig: &Path, nodes: usize, pods: &str, api_service: &str) {
    let listed = kubectl_with(
        kubeconfig,
        &[
            "get",
            "nodes",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name} {.spec.podCIDR}{\"\\n\"}{end}",
        ],
    );
    let ranges: Vec<&str> = listed
        .lines()
        .filter_map(|line| line.split_whitespace().nth(1))
        .collect();
    assert_eq!(ranges.len(), nodes, "every Node has a pod range:\n{listed}");
    for range in &ranges {
        assert!(is_inside(range, pods), "{range} inside {pods}:\n{listed}");
    }
    let mut distinct = ranges.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), ranges.len(), "all distinct:\n{listed}");
    let service = kubectl_with(
        kubeconfig,
        &[
            "get",
            "service",
            "kubernetes",
            "-n",
            "default",
            "-o",
            "jsonpath={.spec.clusterIP}",
        ],
    );
    assert_eq!(
        service.trim(),
        api_service,
        "the kubernetes Service's ClusterIP"
    );
    let pods_listed = kubectl_with(
        kubeconfig,
        &[
            "get",
            "pods",
            "-A",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name} {.spec.hostNetwork} {.status.podIP}{\"\\n\"}{end}",
        ],
    );
    for line in pods_listed.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if let [_, ip] = words.as_slice() {
            assert!(is_inside(ip, pods), "a pod's address inside {pods}: {line}");
        }
    }
}

/// With Flux's kubeconfig of `cluster` (three nodes, declared on pods 10.60.0.0/16 and
/// services 10.70.0.0/16): runs two pods and asserts the network kubectl shows
/// ([`assert_network_shown`]). Returns the kubeconfig file.
pub fn assert_declared_ranges_shown(world: &World, cluster: &str) -> PathBuf {
    let kubeconfig = world.flux_kubeconfig_file(cluster);
    kubectl_with(
        &kubeconfig,
        &[
            "create",
            "deployment",
            "web",
            "--image=nginx",
            "--replicas=2",
        ],
    );
    assert_network_shown(&kubeconfig, 3, "10.60.0.0/16", "10.70.0.1");
    kubeconfig
}

/// The `Ready` condition of `cluster` as `reason: message`.
pub fn ready_condition(status: &FleetStatus, cluster: &str) -> Option<String> {
    let condition = status.clusters.get(cluster)?.conditions.first()?;
    Some(format!("{}: {}", condition.reason, condition.message))
}

/// The first half of a `cni: none` cluster's life, the same on every distribution: its
/// kubeconfig reaches Flux's Secret while no node is Ready, the status says that `nodes` nodes
/// wait for a CNI, and a worker whose agent goes silent meanwhile is neither fenced nor
/// replaced over 3× `remediation.after` (the file's must be 2 s, the lab's agent timeout
/// short). Returns Flux's kubeconfig as a file.
pub async fn assert_waits_for_a_cni_unharmed(
    world: &World,
    cluster: &str,
    nodes: usize,
) -> PathBuf {
    world
        .wait_for("the kubeconfig delivered", |s| {
            s.clusters
                .get(cluster)
                .and_then(|c| c.flux_kubeconfig_fingerprint.as_ref())
                .is_some()
        })
        .await;
    assert!(
        world.nodes_of(cluster).iter().all(|n| !n.ready),
        "no node Ready yet: {:?}",
        world.nodes_of(cluster)
    );
    let waiting = format!("{nodes} nodes report");
    let status = world
        .wait_for("the nodes waiting for a CNI", |s| {
            ready_condition(s, cluster).is_some_and(|c| c.contains(&waiting))
        })
        .await;
    assert_eq!(
        ready_condition(&status, cluster),
        Some(format!(
            "{}: waiting for a CNI: {nodes} nodes report NetworkPluginNotReady (Flux installs it from flux-system/{cluster}-kubeconfig)",
            reasons::WAITING_FOR_CNI
        ))
    );

    let silent = world
        .vm_views(cluster)
        .into_iter()
        .find(|vm| vm.is_worker())
        .expect("a worker")
        .name;
    world.lab.faults().hang_vm(&silent);
    let names = |world: &World| -> Vec<String> {
        world
            .vms_of(cluster)
            .into_iter()
            .map(|vm| vm.name)
            .collect()
    };
    let before = names(world);
    tokio::time::sleep(Duration::from_secs(7)).await;
    world.wait_passes(3).await;
    let fences: u64 = ["ok", "error"]
        .iter()
        .filter_map(|outcome| {
            world
                .counters()
                .steps
                .get(&(ActionKind::FenceMachine, *outcome))
                .copied()
        })
        .sum();
    assert_eq!(fences, 0, "nothing fenced: {:?}", world.counters().steps);
    assert_eq!(names(world), before, "no machine created or removed");
    assert!(
        world
            .lab
            .proxmox()
            .vm_named(&silent)
            .is_some_and(|vm| vm.running),
        "{silent} still runs"
    );
    world.lab.faults().unhang_vm(&silent);
    world.flux_kubeconfig_file(cluster)
}

/// Applies [`FLUX_CNI`] with Flux's kubeconfig, as Flux would, and waits for `cluster` to
/// be Ready with every node Ready.
pub async fn install_cni_as_flux(world: &World, cluster: &str, kubeconfig: &Path) {
    let manifest = world.state.path().join("cni.yaml");
    std::fs::write(&manifest, FLUX_CNI).expect("write the CNI");
    kubectl_with(
        kubeconfig,
        &["apply", "-f", &manifest.display().to_string()],
    );
    world
        .wait_for("the cluster Ready with its CNI", |s| ready(s, &[cluster]))
        .await;
    assert!(world.nodes_of(cluster).iter().all(|n| n.ready));
}

/// Each Node's InternalIP (empty when it has none), by Node name, as the stock kubectl
/// lists them.
pub fn internal_ips(
    world: &crate::World,
    cluster: &str,
) -> std::collections::BTreeMap<String, String> {
    let listed: serde_json::Value =
        serde_json::from_str(&world.kubectl(cluster, &["get", "nodes", "-o", "json"]))
            .expect("kubectl prints JSON");
    let nodes = listed["items"].as_array().expect("items");
    nodes
        .iter()
        .map(|node| {
            let ip = node["status"]["addresses"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|a| a["type"] == "InternalIP")
                .and_then(|a| a["address"].as_str())
                .unwrap_or_default();
            let name = node["metadata"]["name"].as_str().unwrap_or_default();
            (name.to_owned(), ip.to_owned())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_inside_when_their_prefix_and_mask_say_so() {
        assert!(is_inside("10.60.3.0/24", "10.60.0.0/16"));
        assert!(is_inside("10.60.3.7", "10.60.0.0/16"));
        assert!(!is_inside("10.61.0.0/24", "10.60.0.0/16"));
        assert!(!is_inside("10.0.0.0/8", "10.60.0.0/16"));
        assert!(!is_inside("nonsense", "10.60.0.0/16"));
    }

    #[test]
    fn network_fields_go_into_the_files_network() {
        let file = crate::ClusterYaml::lab("prod").render();
        let changed = with_network(&file, "cni: none");
        assert!(
            changed.contains("network: {cni: none, nodes: 192.168.1.0/24"),
            "{changed}"
        );
    }
}
