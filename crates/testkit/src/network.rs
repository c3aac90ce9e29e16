//! The cluster network as third parties see it: the stock `kubectl` reading every Node's
//! `spec.podCIDR`, the `kubernetes` Service's ClusterIP and the pods' addresses, and a CNI
//! installed as Flux would (its agent's DaemonSet applied with the kubeconfig Flux holds).

use std::net::Ipv4Addr;
use std::path::Path;

use crate::world::kubectl_with;

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
