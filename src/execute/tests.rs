//! The executor against a fake Proxmox that records every change it is asked for: a step
//! whose replica loses the Lease mid-way sends nothing more.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::connect::AdmitError;
use crate::leader::Leadership;
use crate::model::{Ownership, VmId};
use crate::observed::{ObservedMachine, PowerState};
use crate::plan::Target;
use crate::providers::ca_pins::PinError;
use crate::providers::datastore::AdminAccess;
use crate::providers::flux::FluxDeliverer;
use crate::providers::kube::{AdminKubeconfig, KubeClusterClient};
use crate::providers::proxmox::recorder::{Recorder, exited};

/// One Proxmox connection, `p`, and nothing else.
struct Fake {
    proxmox: Recorder,
}

impl Providers for Fake {
    type Proxmox = Recorder;
    type Cluster = KubeClusterClient;
    type Flux = FluxDeliverer<KubeClusterClient>;

    fn proxmox(&self, connection: &str) -> Option<&Recorder> {
        (connection == "p").then_some(&self.proxmox)
    }
    fn proxmox_connections(&self) -> Vec<&str> {
        vec!["p"]
    }
    fn flux(&self, _: &str) -> Option<&Self::Flux> {
        None
    }
    fn management(&self, _: Option<&str>) -> Option<&KubeClusterClient> {
        None
    }
    fn datastore(&self, _: &str) -> Option<&AdminAccess> {
        None
    }
    fn kine_dsn(
        &self,
        cluster: &str,
        _: &crate::spec::SecretSource,
    ) -> Result<String, crate::secrets::SecretError> {
        Err(crate::secrets::SecretError::Unset {
            field: format!("{cluster}: datastore.endpointFrom"),
            variable: "none in this fake".to_owned(),
        })
    }
    fn admit_kubeconfig(
        &self,
        cluster: &str,
        _: &crate::spec::ClusterSpec,
        _: &str,
    ) -> impl Future<Output = Result<AdminKubeconfig, AdmitError>> + Send {
        std::future::ready(Err(AdmitError::Pin(PinError::Malformed {
            name: format!("{cluster}: no pins in this fake"),
            management: "none".to_owned(),
        })))
    }
    fn forget_ca(
        &self,
        _: &str,
        _: Option<&str>,
    ) -> impl Future<Output = Result<(), PinError>> + Send {
        std::future::ready(Ok(()))
    }
    fn connect_cluster(
        &self,
        _: &AdminKubeconfig,
    ) -> impl Future<Output = Result<KubeClusterClient, ClusterError>> + Send {
        std::future::ready(Err(ClusterError::ClientCertificate {
            reason: "no cluster in this fake".to_owned(),
        }))
    }
}

/// A replica leading for the next hour.
fn leading() -> Arc<Leadership> {
    let leadership = Arc::new(Leadership::new("a".to_owned(), "ns/lease".to_owned()));
    leadership.lead_until(Instant::now() + Duration::from_secs(3600));
    leadership
}

fn machine(name: &str, vmid: u32) -> MachineRef {
    MachineRef {
        name: NodeName::from(name),
        vm_id: Some(VmId(vmid)),
        proxmox_node: "pve1".into(),
    }
}

fn observed(machines: &[(&str, u32)]) -> ObservedCluster {
    ObservedCluster {
        machines: machines
            .iter()
            .map(|(name, vmid)| {
                let observed = ObservedMachine {
                    vm_id: VmId(*vmid),
                    proxmox_node: "pve1".into(),
                    ownership: Ownership {
                        cluster: "prod".into(),
                        role: Role::ControlPlane,
                        pool: "cp".into(),
                        spec_hash: "0123456789ab".into(),
                    },
                    tags: Vec::new(),
                    power: PowerState::Running,
                    created: jiff::Timestamp::UNIX_EPOCH,
                    guest_agent: true,
                    built_from: None,
                    config: None,
                    task: None,
                };
                (NodeName::from(*name), observed)
            })
            .collect::<BTreeMap<_, _>>(),
        ..ObservedCluster::default()
    }
}

fn step(action: Action) -> Step {
    Step {
        action,
        target: Target {
            cluster: "prod".into(),
            ..Target::default()
        },
        reason: String::new(),
        disruptive: true,
        waits_on: None,
    }
}

/// Runs `action` on cluster `prod` (its VMs `machines`) with `proxmox`, fenced by `leadership`.
async fn run(
    proxmox: &Recorder,
    leadership: &Arc<Leadership>,
    machines: &[(&str, u32)],
    action: Action,
) -> Result<String, ExecuteError> {
    let executor = Executor::new(
        Arc::new(Fake {
            proxmox: proxmox.clone(),
        }),
        Arc::new(crate::clock::SystemClock),
    );
    let observed = observed(machines);
    let access = ClusterAccess {
        connection: "p".to_owned(),
        ..ClusterAccess::default()
    };
    let fence = Fence::new(leadership.clone());
    let ctx = StepContext {
        cluster: "prod",
        spec: None,
        observed: &observed,
        access: &access,
        revision: "r1",
        fence: &fence,
    };
    executor.run(ctx, &step(action)).await
}

#[tokio::test]
async fn a_step_whose_replica_loses_the_lease_sends_no_further_command() {
    let leadership = leading();
    let lost = Arc::clone(&leadership);
    // The Lease is lost while the first control plane renews its certificates.
    let proxmox = Recorder::new(move |_| {
        lost.follow(Some("b".to_owned()));
        exited(0)
    });
    let machines = [("cp-1", 101), ("cp-2", 102)];
    let err = run(
        &proxmox,
        &leadership,
        &machines,
        Action::RenewCertificates {
            machines: vec![machine("cp-1", 101), machine("cp-2", 102)],
        },
    )
    .await
    .expect_err("stopped");
    // The first call (creating the renewal script 0700) loses the Lease: its content, its
    // run and anything for cp-2 are never sent.
    assert_eq!(
        proxmox.calls(),
        [format!(
            "run 101 install -D -m 0700 /dev/null {}",
            kubeadm::RENEW_SCRIPT
        )],
        "nothing is sent to cp-2 once the Lease is lost"
    );
    let stopped = err.not_leading().expect("stopped, not failed");
    assert_eq!(
        stopped.to_string(),
        format!(
            "stopped before writing {} on VM 101: this replica no longer leads",
            kubeadm::RENEW_SCRIPT
        )
    );
}

#[tokio::test]
async fn a_reset_node_whose_replica_loses_the_lease_never_shuts_its_vm_down() {
    let leadership = leading();
    let lost = Arc::clone(&leadership);
    let proxmox = Recorder::new(move |_| {
        lost.follow(None);
        exited(0)
    });
    let err = run(
        &proxmox,
        &leadership,
        &[("w-1", 201)],
        Action::ResetNode {
            machine: machine("w-1", 201),
        },
    )
    .await
    .expect_err("stopped");
    assert_eq!(proxmox.calls(), ["run 201 kubeadm reset --force"]);
    assert!(err.not_leading().is_some(), "{err:?}");
}

#[tokio::test]
async fn a_standby_destroys_nothing() {
    let leadership = Arc::new(Leadership::new("a".to_owned(), "ns/lease".to_owned()));
    let proxmox = Recorder::new(|_| exited(0));
    let machines = [("w-1", 201), ("w-2", 202)];
    let err = run(
        &proxmox,
        &leadership,
        &machines,
        Action::DeleteCluster {
            machines: vec![machine("w-1", 201), machine("w-2", 202)],
            flux: None,
        },
    )
    .await
    .expect_err("stopped");
    assert!(proxmox.calls().is_empty(), "{:?}", proxmox.calls());
    assert!(err.not_leading().is_some(), "{err:?}");
}

#[tokio::test]
async fn a_leader_runs_the_whole_step() {
    let leadership = leading();
    let proxmox = Recorder::new(|_| exited(0));
    run(
        &proxmox,
        &leadership,
        &[("w-1", 201)],
        Action::ResetNode {
            machine: machine("w-1", 201),
        },
    )
    .await
    .expect("reset");
    assert_eq!(
        proxmox.calls(),
        ["run 201 kubeadm reset --force", "shutdown 201"]
    );
}
