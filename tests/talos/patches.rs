//! Patches on a Talos cluster the daemon builds: a cluster patch (a sysctl) and a pool patch
//! (the kubelet's extra mount Longhorn needs) reach the machine configs the nodes hold, the
//! control plane's without the pool's.

use capstan_testkit::World;

use crate::reconcile::{TALOS, fleet, talos_lab};

const CLUSTER: &str = "tuned";

fn cluster() -> String {
    format!(
        "apiVersion: capstan.dev/v1alpha1
kind: Cluster
metadata: {{name: {CLUSTER}}}
spec:
  proxmox: homelab
  kubernetes: {{distribution: talos, version: 1.36.2}}
  talos: {{version: {TALOS}}}
  endpoint: {{host: k8s-{CLUSTER}.lab.example, address: 192.168.1.68}}
  network: {{nodes: 192.168.1.0/24, reserved: [\"192.168.1.170-192.168.1.189\"]}}
  patches:
    - machine:
        sysctls:
          vm.max_map_count: \"262144\"
  controlPlane:
    replicas: 1
    machine: {{template: talos-{TALOS}, cores: 2, memoryMiB: 4096, placement: [pve1]}}
  workers:
    - pool: storage
      replicas: 1
      machine: {{template: talos-{TALOS}, cores: 2, memoryMiB: 4096, placement: [pve2]}}
      patches:
        - machine:
            kubelet:
              extraMounts:
                - destination: /var/lib/longhorn
                  type: bind
                  source: /var/lib/longhorn
                  options: [bind, rshared, rw]
  rollout: {{minWorkers: 1}}
  delivery:
    flux: {{cluster: management}}
"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_talos_cluster_patch_and_a_pool_patch_reach_the_configs_the_nodes_hold() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut world = World::with_lab(talos_lab(), &fleet(), &[(CLUSTER, cluster())], false).await;
    world.start_until_ready(&[CLUSTER]).await;
    let nodes = world.lab.nodes().expect("the lab's node software");
    let vms = world.vms_of(CLUSTER);
    assert_eq!(vms.len(), 2);
    for vm in vms {
        let machine = nodes
            .talos_machine(capstan::model::VmId(vm.vmid))
            .unwrap_or_else(|| panic!("{} holds a config", vm.name));
        assert_eq!(
            machine.sysctls.get("vm.max_map_count").map(String::as_str),
            Some("262144"),
            "{}: the cluster's patch",
            vm.name
        );
        let mounts = if vm.name.contains("-storage-") {
            vec!["/var/lib/longhorn".to_owned()]
        } else {
            Vec::new()
        };
        assert_eq!(
            machine.kubelet_mounts, mounts,
            "{}: the pool's patch",
            vm.name
        );
    }
}
