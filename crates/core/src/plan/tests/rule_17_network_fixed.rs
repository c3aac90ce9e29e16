//! The cluster network: `cni: none` (the kubeconfig goes to Flux as soon as the API answers,
//! control planes join without a CNI, nodes waiting for their first CNI are not remediated)
//! and rule 17 (a live cluster's network never changes).

use super::*;
use crate::spec::{Cni, RecordedNetwork};

fn without_cni(cluster: Cluster) -> Cluster {
    let mut cluster = cluster;
    cluster.spec.network.cni = Some(Cni::None);
    cluster
}

/// Every node of `cluster` NotReady for want of a CNI since `since`.
fn awaiting_network(observed: &mut Observed, cluster: &str, since: Timestamp) {
    for node in cluster_mut(observed, cluster).nodes.values_mut() {
        node.ready = false;
        node.awaiting_network = true;
        node.ready_since = since;
    }
}

#[test]
fn with_cni_none_the_kubeconfig_goes_to_flux_as_soon_as_the_api_answers() {
    let prod = without_cni(Cluster::test("prod"));
    let desired = desired(vec![prod]);
    let mut observed = built(&desired);
    awaiting_network(&mut observed, "prod", minutes(-2));
    cluster_mut(&mut observed, "prod").flux = None;
    let plan = plan_at(&desired, &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    assert_eq!(shape(&cluster.steps), vec![c("deliver-kubeconfig")]);
    assert!(
        cluster.steps[0].reason.contains("cni is none"),
        "{}",
        cluster.steps[0].reason
    );
    let cni = Resource::Cni {
        nodes: 4,
        flux: Some("flux-system/prod-kubeconfig".to_owned()),
    };
    assert!(
        cluster.waiting_on.iter().any(|w| w.resource == cni),
        "{:?}",
        cluster.waiting_on
    );
    assert_eq!(
        cni.to_string(),
        "a CNI: 4 nodes report NetworkPluginNotReady (Flux installs it from flux-system/prod-kubeconfig)"
    );
    // The same nodes on a cluster whose CNI capstan installs: nothing goes to Flux yet.
    let calico = desired_with(Cluster::test("prod"));
    let plan = plan_at(&calico, &observed, now());
    assert!(
        plan.clusters[0]
            .steps
            .iter()
            .all(|s| s.name() != "deliver-kubeconfig")
    );
}

fn desired_with(cluster: Cluster) -> crate::spec::Desired {
    desired(vec![cluster])
}

#[test]
fn with_cni_none_the_wait_is_named_until_the_nodes_are_ready() {
    let prod = without_cni(Cluster::test("prod"));
    let desired = desired(vec![prod]);
    let mut observed = built(&desired);
    awaiting_network(&mut observed, "prod", minutes(-2));
    let plan = plan_at(&desired, &observed, now());
    assert_eq!(plan.clusters[0].phase, Phase::Updating);
    assert!(
        plan.clusters[0]
            .waiting_on
            .iter()
            .any(|w| matches!(w.resource, Resource::Cni { nodes: 4, .. })),
        "{:?}",
        plan.clusters[0].waiting_on
    );
    // Flux installed one: every node Ready, the cluster too.
    let built = built(&desired);
    let plan = plan_at(&desired, &built, now());
    assert_eq!(plan.clusters[0].phase, Phase::Ready);
    assert!(plan.clusters[0].waiting_on.is_empty());
}

#[test]
fn with_cni_none_control_planes_join_while_the_first_waits_for_a_cni() {
    let platform = without_cni(Cluster::test("platform").with_control_planes(3));
    let desired = desired(vec![platform.clone()]);
    let mut observed = built(&desired);
    let cps = machines_of(&observed, "platform", "cp");
    awaiting_network(&mut observed, "platform", now());
    let cluster = cluster_mut(&mut observed, "platform");
    for joining in &cps[1..] {
        cluster.nodes.remove(joining);
        cluster.machines.get_mut(joining).expect("vm").created = now();
    }
    let joins = |plan: &Plan| -> Vec<String> {
        plan.clusters[0]
            .steps
            .iter()
            .filter(|s| {
                s.action.kind() == ActionKind::JoinNode && s.target.role == Some(Role::ControlPlane)
            })
            .map(|s| {
                s.target
                    .machine
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default()
            })
            .collect()
    };
    let plan = plan_at(&desired, &observed, now());
    assert_eq!(
        joins(&plan),
        vec![cps[1].to_string()],
        "{:#?}",
        shape(&plan.clusters[0].steps)
    );
    // With a CNI capstan installs, a control plane that is not Ready holds the next join.
    let calico = desired_with(Cluster::test("platform").with_control_planes(3));
    let plan = plan_at(&calico, &observed, now());
    assert_eq!(joins(&plan), Vec::<String>::new());
}

#[test]
fn a_node_waiting_for_its_first_cni_is_neither_fenced_nor_counted_unhealthy() {
    let prod = without_cni(
        Cluster::test("prod")
            .with_workers("general", 5)
            .with_fencing(),
    );
    let desired = desired(vec![prod]);
    let mut observed = built(&desired);
    // Long past remediation.after (5m), guest agents silent: dead, were it not for the CNI.
    awaiting_network(&mut observed, "prod", minutes(-15));
    let workers = machines_of(&observed, "prod", "general");
    let cluster = cluster_mut(&mut observed, "prod");
    for worker in &workers {
        cluster.machines.get_mut(worker).expect("vm").guest_agent = false;
    }
    let plan = plan_at(&desired, &observed, now());
    let planned = &plan.clusters[0];
    assert!(
        planned.steps.iter().all(|s| s.name() != "fence-machine"),
        "{:?}",
        shape(&planned.steps)
    );
    assert_eq!(planned.remediation_held, None);
    // Once a node was Ready, NotReady is NotReady: the one dead worker is fenced.
    let cluster = cluster_mut(&mut observed, "prod");
    for node in cluster.nodes.values_mut() {
        node.awaiting_network = false;
        node.ready = true;
    }
    let node = cluster.nodes.get_mut(&workers[0]).expect("node");
    node.ready = false;
    let plan = plan_at(&desired, &observed, now());
    assert_eq!(
        shape(&plan.clusters[0].steps),
        vec![s("fence-machine", &workers[0])]
    );
}

fn recorded(pods: &str, services: &str, cni: Cni) -> RecordedNetwork {
    RecordedNetwork {
        pods: Some(pods.parse().expect("net")),
        services: Some(services.parse().expect("net")),
        cni: Some(cni),
        kube_proxy: Some(true),
    }
}

fn refusal(desired: &crate::spec::Desired, observed: &Observed) -> Option<String> {
    let plan = plan_at(desired, observed, now());
    let cluster = &plan.clusters[0];
    let blocked = cluster
        .blocked
        .iter()
        .find(|b| b.rule == Rule::NetworkFixed)?;
    assert_eq!(cluster.steps, vec![], "nothing else proceeds");
    Some(blocked.message.clone())
}

#[test]
fn rule_17_a_declared_network_other_than_the_one_the_cluster_runs_is_refused() {
    let mut prod = Cluster::test("prod");
    let desired_now = desired(vec![prod.clone()]);
    let mut observed = built(&desired_now);
    let control_plane = cluster_mut(&mut observed, "prod")
        .control_plane
        .as_mut()
        .expect("cp");
    control_plane.network = Some(recorded("172.16.0.0/16", "10.96.0.0/12", Cni::Calico));
    assert_eq!(refusal(&desired_now, &observed), None, "as built");
    prod.spec.network.pods = Some("10.60.0.0/16".parse().expect("net"));
    prod.spec.network.cni = Some(Cni::None);
    let message = refusal(&desired(vec![prod.clone()]), &observed).expect("refused");
    assert!(
        message.starts_with("the cluster network cannot change on a live cluster (pods 172.16.0.0/16 → 10.60.0.0/16; cni calico → none)"),
        "{message}"
    );
    // A field the file no longer sets keeps what the cluster runs.
    prod.spec.network.pods = None;
    prod.spec.network.services = None;
    prod.spec.network.cni = None;
    assert_eq!(refusal(&desired(vec![prod]), &observed), None);
}

#[test]
fn rule_17_a_cluster_built_before_its_network_was_recorded_is_judged_by_what_it_shows() {
    // A K3s cluster of an earlier capstan: 10.42.0.0/16 and 10.43.0.0/16, nothing recorded.
    let mut edge = Cluster::test("edge");
    edge.spec.kubernetes.distribution = crate::spec::Distribution::K3s;
    edge.spec.kubernetes.version = "1.36.2+k3s1".parse().expect("version");
    edge.spec.network.pods = None;
    edge.spec.network.services = None;
    edge.spec.network.cni = None;
    let desired_now = desired(vec![edge.clone()]);
    let mut observed = built(&desired_now);
    let cluster = cluster_mut(&mut observed, "edge");
    for (index, node) in cluster.nodes.values_mut().enumerate() {
        node.pod_cidr = Some(format!("10.42.{index}.0/24").parse().expect("net"));
    }
    let control_plane = cluster.control_plane.as_mut().expect("cp");
    control_plane.api_service_address = Some("10.43.0.1".parse().expect("ip"));
    assert_eq!(
        refusal(&desired_now, &observed),
        None,
        "its file says nothing"
    );
    // The file now spells out what used to be the only validated default.
    edge.spec.network.pods = Some("172.16.0.0/16".parse().expect("net"));
    edge.spec.network.services = Some("10.96.0.0/12".parse().expect("net"));
    let message = refusal(&desired(vec![edge]), &observed).expect("refused");
    assert!(
        message.contains("services 10.96.0.0/12: its `kubernetes` Service is at 10.43.0.1"),
        "{message}"
    );
    assert!(message.contains("pods 172.16.0.0/16: node "), "{message}");
}
