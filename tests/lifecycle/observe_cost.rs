//! What observation costs once a cluster is converged: no guest-agent call at all (the admin
//! kubeconfig is kept between passes), counted in `/metrics`; and a kubeconfig the API server
//! stops accepting (rotated on the node, the kept one expired) is read again.

use std::time::Duration;

use capstan::clock::Clock as _;
use capstan::daemon::http::render_metrics;
use capstan_lab::proxmox::GuestIdentity;

use capstan_testkit::{World, cluster_yaml, fleet_yaml};

const CLUSTER: &str = "quiet";
const DAY: Duration = Duration::from_secs(86_400);

/// Guest-agent requests the lab's Proxmox served since its counters were reset.
fn agent_requests(world: &World) -> u64 {
    world
        .lab
        .proxmox()
        .calls()
        .iter()
        .filter(|(key, _)| key.contains("/agent/"))
        .map(|(_, count)| count)
        .sum()
}

fn metric(world: &World, name: &str) -> u64 {
    let metrics = render_metrics(&world.board());
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{name} ")))
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("/metrics has {name}:\n{metrics}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_converged_pass_calls_no_guest_agent_and_a_refused_kubeconfig_is_read_again() {
    // No Flux delivery: the management cluster's own credentials would expire with the jump
    // of a year below.
    let spec = cluster_yaml(CLUSTER, 35, "1.36.2", 2, "debian13-k8s")
        .replace("  delivery:\n    flux: {cluster: management}\n", "");
    let mut world = World::new(&fleet_yaml(&["1.36"], false), &[(CLUSTER, spec)]).await;
    world.start_until_ready(&[CLUSTER]).await;
    world.wait_passes(2).await;
    assert!(
        metric(&world, "capstan_guest_agent_calls_total") > 0,
        "bootstrap used guest agents:\n{}",
        render_metrics(&world.board())
    );

    world.lab.proxmox().reset_calls();
    world.wait_passes(3).await;
    assert_eq!(
        agent_requests(&world),
        0,
        "converged passes call no guest agent"
    );
    assert_eq!(metric(&world, "capstan_pass_guest_agent_calls"), 0);
    let kept = world.status().clusters[CLUSTER]
        .kubeconfig_fingerprint
        .clone()
        .expect("fingerprint");

    // An operator renews the certificates on the control plane, 200 days in: the kept
    // kubeconfig still works (the old certificate is valid), so it is still used.
    world.lab.clock().advance(200 * DAY);
    let control_plane = world
        .lab
        .proxmox()
        .vms()
        .into_iter()
        .find(|vm| vm.name.starts_with(&format!("capstan-{CLUSTER}-cp-")))
        .expect("control plane VM");
    let renewed = world
        .lab
        .nodes()
        .expect("lab nodes")
        .exec(
            &GuestIdentity {
                vmid: capstan::model::VmId(control_plane.vmid),
                name: control_plane.name.clone(),
                node: control_plane.node.clone(),
                address: control_plane.address,
                k3s_airgap: None,
                talos: None,
                talos_extensions: Vec::new(),
                media: Vec::new(),
                cluster: None,
                hardware: Default::default(),
            },
            &["kubeadm", "certs", "renew", "all"].map(String::from),
        )
        .await;
    assert_eq!(renewed.exit_code, 0, "{renewed:?}");
    let rotated = world.admin_fingerprint(CLUSTER);
    assert_ne!(rotated, kept);
    world.lab.proxmox().reset_calls();
    world.wait_passes(2).await;
    assert_eq!(
        agent_requests(&world),
        0,
        "a working kubeconfig is not read again"
    );

    // Past the old certificate's expiry the API server answers 401 to it: the daemon reads
    // admin.conf again and carries on with the rotated one, without renewing anything.
    world.lab.clock().advance(170 * DAY);
    let status = world
        .wait_for("the rotated kubeconfig in use", |s| {
            s.clusters.get(CLUSTER).is_some_and(|c| {
                c.kubeconfig_fingerprint.as_deref() == Some(rotated.as_str())
                    && c.phase == capstan::status::Phase::Ready
            })
        })
        .await;
    let expiry = status.clusters[CLUSTER].certificate_expiry.expect("expiry");
    assert!(
        world.lab.clock().now().duration_until(expiry) > jiff::SignedDuration::from_hours(24 * 190),
        "the expiry is the rotated certificate's"
    );
    assert!(agent_requests(&world) > 0, "admin.conf was read again");
    assert_eq!(world.steps_ok("renew-certificates"), 0);
    world.lab.proxmox().reset_calls();
    world.wait_passes(3).await;
    assert_eq!(agent_requests(&world), 0, "and kept again");
    world.kill_daemon().await;
}
