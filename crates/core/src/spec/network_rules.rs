//! The rules of `spec.network` that validation can judge from the file alone: the CNI the
//! distribution can install, the pod, service and node networks disjoint (the ranges a new
//! cluster would get, the distribution's defaults included, so a K3s file whose VMs live in
//! 10.42.0.0/24 is refused), and ranges Kubernetes accepts. A range that differs from the one
//! a live cluster runs is the planner's to refuse: validation cannot see the cluster.

use ipnet::IpNet;

use super::diagnostic::{Diagnostic, SourceFile};
use super::limits as bounds;
use super::types::ClusterSpec;

/// Each node takes a /24 of the pod network (kube-controller-manager's `--node-cidr-mask-size`
/// for IPv4, which kubeadm, K3s and Talos all keep).
pub const NODE_POD_PREFIX: u8 = 24;
/// kube-apiserver refuses a larger IPv4 service network ("specified
/// --service-cluster-ip-range is too large; for 32-bit addresses, the mask must be >= 12").
const MIN_SERVICE_PREFIX: u8 = 12;
/// The cluster DNS Service takes the tenth address of the service network, so a /28 (14
/// usable addresses) is the smallest that leaves room for a few Services.
const MAX_SERVICE_PREFIX: u8 = 28;

/// Every finding about `spec.network`'s pod and service networks and its CNI.
pub fn check(out: &mut Vec<Diagnostic>, spec: &ClusterSpec, file: &SourceFile) {
    cni(out, spec, file);
    let network = &spec.network;
    let effective = spec.cluster_network(None);
    let tool = spec.kubernetes.distribution.capabilities().tool;
    let default_note = |field: &str, declared: bool| {
        if declared {
            String::new()
        } else {
            format!(" ({tool}'s default: network.{field} is not set)")
        }
    };
    let named = [
        ("pods", effective.pods, network.pods.is_some()),
        ("services", effective.services, network.services.is_some()),
        ("nodes", network.nodes, true),
    ];
    for (i, (a_name, a, a_declared)) in named.iter().enumerate() {
        for (b_name, b, b_declared) in &named[i + 1..] {
            if !overlaps(a, b) {
                continue;
            }
            // Point at a range the file sets, the pod or service one before the VMs' subnet
            // (that is where the VMs are; the ranges are what can move).
            let at = match (*a_declared, *b_declared) {
                (_, true) if *b_name != "nodes" => b_name,
                (true, _) => a_name,
                _ => b_name,
            };
            let hint = if *a_declared && *b_declared {
                "pod, service and node networks must be disjoint".to_owned()
            } else {
                let unset = if *a_declared { b_name } else { a_name };
                format!(
                    "pod, service and node networks must be disjoint: set network.{unset} to a range outside the others"
                )
            };
            out.push(
                file.error(
                    &format!("spec.network.{at}"),
                    format!(
                        "{b_name} {b}{} overlaps {a_name} {a}{}",
                        default_note(b_name, *b_declared),
                        default_note(a_name, *a_declared)
                    ),
                )
                .with_hint(hint),
            );
        }
    }
    pods(out, spec, effective.pods, file);
    services(out, effective.services, file);
    for (index, range) in network.reserved.iter().enumerate() {
        if !network.nodes.contains(&range.first) || !network.nodes.contains(&range.last) {
            out.push(file.warning(
                &format!("spec.network.reserved[{index}]"),
                format!("{range} is not inside network.nodes {}", network.nodes),
            ));
        }
    }
}

fn overlaps(a: &IpNet, b: &IpNet) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}

/// The CNI must be one the distribution installs.
fn cni(out: &mut Vec<Diagnostic>, spec: &ClusterSpec, file: &SourceFile) {
    let Some(cni) = spec.network.cni else {
        return;
    };
    let capabilities = spec.kubernetes.distribution.capabilities();
    if capabilities.network.supports(cni) {
        return;
    }
    out.push(
        file.error(
            "spec.network.cni",
            format!("{} cannot install the CNI `{cni}`", capabilities.tool),
        )
        .with_hint(format!(
            "{} installs {}; with `none`, Flux installs the CNI you want",
            capabilities.tool,
            capabilities.network.choices()
        )),
    );
}

/// The pod network is IPv4 and holds a /24 for every machine that can run at once.
fn pods(out: &mut Vec<Diagnostic>, spec: &ClusterSpec, pods: IpNet, file: &SourceFile) {
    let field = "spec.network.pods";
    let IpNet::V4(v4) = pods else {
        out.push(
            file.error(field, format!("{pods} is not an IPv4 network"))
                .with_hint("capstan builds single-stack IPv4 clusters: give an IPv4 range such as 10.60.0.0/16"),
        );
        return;
    };
    if v4.prefix_len() > NODE_POD_PREFIX {
        out.push(
            file.error(
                field,
                format!("{pods} is smaller than the /{NODE_POD_PREFIX} each node takes"),
            )
            .with_hint("give the pods a /24 per node, e.g. a /16"),
        );
        return;
    }
    let node_ranges = 1u64 << (NODE_POD_PREFIX - v4.prefix_len());
    let machines = u64::from(spec.control_plane.replicas)
        + u64::from(spec.worker_replicas())
        + u64::from(spec.rollout.max_surge);
    // Past the bound on machines, `bounds` says what is wrong; a range sized for that many
    // machines would be no fix.
    let in_bounds = machines <= u64::from(bounds::MAX_MACHINES_PER_CLUSTER)
        && spec.rollout.max_surge <= bounds::MAX_SURGE;
    if in_bounds && node_ranges < machines {
        out.push(
            file.error(
                field,
                format!(
                    "{pods} holds {node_ranges} node ranges (/{NODE_POD_PREFIX}), but {machines} machines can run at once ({} control planes, {} workers, maxSurge {})",
                    spec.control_plane.replicas,
                    spec.worker_replicas(),
                    spec.rollout.max_surge
                ),
            )
            .with_hint("each node takes a /24 of the pod network: give a larger range"),
        );
    }
}

/// The service network is IPv4, within what kube-apiserver accepts.
fn services(out: &mut Vec<Diagnostic>, services: IpNet, file: &SourceFile) {
    let field = "spec.network.services";
    let IpNet::V4(v4) = services else {
        out.push(
            file.error(field, format!("{services} is not an IPv4 network"))
                .with_hint("capstan builds single-stack IPv4 clusters: give an IPv4 range such as 10.70.0.0/16"),
        );
        return;
    };
    if v4.prefix_len() < MIN_SERVICE_PREFIX {
        out.push(
            file.error(field, format!("{services} is larger than the /{MIN_SERVICE_PREFIX} kube-apiserver accepts"))
                .with_hint("kube-apiserver refuses a service network larger than a /12: give e.g. 10.96.0.0/12 or a /16"),
        );
    } else if v4.prefix_len() > MAX_SERVICE_PREFIX {
        out.push(
            file.error(
                field,
                format!("{services} is too small: the cluster DNS Service takes its tenth address"),
            )
            .with_hint("give the services a /28 or larger, e.g. a /16"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::{RepoFiles, SourceText, load};

    const FLEET: &str = include_str!("../../../../examples-repo/capstan.yaml");
    const PROD: &str = include_str!("../../../../examples-repo/clusters/prod.yaml");
    const EDGE: &str = include_str!("../../../../examples-repo/clusters/edge.yaml");
    const TALOS: &str = include_str!("../../../../examples-repo/clusters/talos.yaml");
    const NODES: &str = "    nodes: 192.168.1.0/24\n";

    /// The findings about `spec.network` of `example` (a cluster file of the examples) with
    /// each `(from, to)` replaced, as `line:column field: message (hint)`; and whether the
    /// cluster was refused.
    fn network_findings(example: &str, changes: &[(&str, &str)]) -> (Vec<String>, bool) {
        let text = changes.iter().fold(example.to_owned(), |text, (from, to)| {
            assert!(text.contains(from), "the example changed: {from}");
            text.replacen(from, to, 1)
        });
        let source = |path: &str, text: &str| SourceText {
            path: path.to_owned(),
            text: text.to_owned(),
        };
        let loaded = load(&RepoFiles {
            fleet: source("capstan.yaml", FLEET),
            clusters: vec![source("clusters/c.yaml", &text)],
        });
        let refused = loaded
            .desired
            .as_ref()
            .is_some_and(|d| d.clusters.is_empty());
        let findings = loaded
            .diagnostics
            .0
            .iter()
            .filter(|d| {
                d.field
                    .as_deref()
                    .is_some_and(|f| f.starts_with("spec.network"))
            })
            .map(|d| {
                format!(
                    "{}:{} {}: {} ({})",
                    d.line.unwrap_or(0),
                    d.column.unwrap_or(0),
                    d.field.as_deref().unwrap_or(""),
                    d.message,
                    d.hint.as_deref().unwrap_or("")
                )
            })
            .collect();
        (findings, refused)
    }

    #[test]
    fn a_k3s_or_talos_pod_range_overlapping_the_node_subnet_is_refused_at_its_line() {
        for example in [EDGE, TALOS] {
            let declared = format!("{NODES}    pods: 192.168.0.0/16\n");
            let (findings, refused) = network_findings(example, &[(NODES, &declared)]);
            assert!(refused, "{findings:?}");
            assert_eq!(findings.len(), 1, "{findings:?}");
            assert!(
                findings[0].contains(
                    "spec.network.pods: nodes 192.168.1.0/24 overlaps pods 192.168.0.0/16 (pod, service and node networks must be disjoint)"
                ),
                "{findings:?}"
            );
            // The pods line, right under `nodes:`.
            let line = example
                .lines()
                .position(|l| l == NODES.trim_end())
                .expect("nodes line")
                + 2;
            assert!(
                findings[0].starts_with(&format!("{line}:5 ")),
                "{findings:?}"
            );
        }
    }

    #[test]
    fn a_node_subnet_inside_the_distribution_default_pod_range_is_refused_too() {
        let (findings, refused) = network_findings(
            EDGE,
            &[
                (NODES, "    nodes: 10.42.0.0/24\n"),
                ("address: 192.168.1.25", "address: 10.42.0.25"),
                (
                    "reserved: [\"192.168.1.170-192.168.1.189\"]",
                    "reserved: []",
                ),
            ],
        );
        assert!(refused);
        assert_eq!(
            findings
                .iter()
                .map(|f| f.split_once(' ').map_or("", |(_, rest)| rest))
                .collect::<Vec<_>>(),
            [
                "spec.network.nodes: nodes 10.42.0.0/24 overlaps pods 10.42.0.0/16 (K3s's default: network.pods is not set) (pod, service and node networks must be disjoint: set network.pods to a range outside the others)"
            ]
        );
    }

    #[test]
    fn a_cni_the_distribution_cannot_install_is_refused_naming_those_it_can() {
        let (findings, refused) = network_findings(PROD, &[("cni: calico ", "cni: flannel ")]);
        assert!(refused);
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert!(findings[0].contains("spec.network.cni: kubeadm cannot install the CNI `flannel` (kubeadm installs `calico` (IPIP, applied through the new cluster's API at bootstrap) or `none` (no CNI: Flux installs one); with `none`, Flux installs the CNI you want)"), "{findings:?}");
        let with_cni = format!("{NODES}    cni: calico\n");
        let (findings, _) = network_findings(TALOS, &[(NODES, &with_cni)]);
        assert!(
            findings[0].contains("Talos cannot install the CNI `calico`"),
            "{findings:?}"
        );
        for accepted in ["none", "flannel"] {
            let with_cni = format!("{NODES}    cni: {accepted}\n    kubeProxy: false\n");
            let (findings, refused) = network_findings(EDGE, &[(NODES, &with_cni)]);
            assert!(findings.is_empty() && !refused, "{accepted}: {findings:?}");
        }
    }

    #[test]
    fn ranges_kubernetes_refuses_are_refused() {
        let cases = [
            (
                "pods: 172.16.0.0/16 ",
                "pods: 172.16.0.0/25 ",
                "172.16.0.0/25 is smaller than the /24 each node takes",
            ),
            (
                "pods: 172.16.0.0/16 ",
                "pods: 172.16.0.0/23 ",
                "172.16.0.0/23 holds 2 node ranges (/24), but 5 machines can run at once (1 control planes, 3 workers, maxSurge 1)",
            ),
            (
                "pods: 172.16.0.0/16 ",
                "pods: fd00:10::/56 ",
                "fd00:10::/56 is not an IPv4 network",
            ),
            (
                "services: 10.96.0.0/12 ",
                "services: 10.0.0.0/8 ",
                "10.0.0.0/8 is larger than the /12 kube-apiserver accepts",
            ),
            (
                "services: 10.96.0.0/12 ",
                "services: 10.96.0.0/29 ",
                "10.96.0.0/29 is too small: the cluster DNS Service takes its tenth address",
            ),
        ];
        for (from, to, expected) in cases {
            let (findings, refused) = network_findings(PROD, &[(from, to)]);
            assert!(refused, "{to}");
            assert_eq!(findings.len(), 1, "{findings:?}");
            assert!(findings[0].contains(expected), "{findings:?}");
        }
    }
}
