//! The executor against a fake Proxmox that records every change it is asked for: a step
//! whose replica loses the Lease mid-way sends nothing more.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::connect::AdmitError;
use crate::leader::Leadership;
use crate::model::{NodeName, Role};
use crate::model::{Ownership, VmId};
use crate::observed::PREPARED_TAG;
use crate::observed::{ObservedMachine, PowerState};
use crate::plan::Target;
use crate::plan::{ActionKind, MachineRef};
use crate::providers::datastore::AdminAccess;
use crate::providers::kube::ClusterError;
use crate::providers::kube::{AdminKubeconfig, KubeClusterClient};
use crate::providers::kubeadm;
use crate::providers::proxmox::recorder::{Recorder, exited};
use crate::records::ca_pins::PinError;
use crate::records::flux::FluxDeliverer;
use crate::spec::{ClusterSpec, Distribution};

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
    fn registry_password(
        &self,
        cluster: &str,
        registry: &str,
        _: &crate::spec::SecretSource,
    ) -> Result<String, crate::secrets::SecretError> {
        Err(crate::secrets::SecretError::Unset {
            field: format!("{cluster}: registries.credentials.{registry}.passwordFrom"),
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
                    pool: None,
                    recorded_tags: None,
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
) -> Result<StepReport, ExecuteError> {
    run_with(None, proxmox, leadership, machines, action).await
}

/// [`run`] on a cluster whose file says `spec`.
async fn run_with(
    spec: Option<&ClusterSpec>,
    proxmox: &Recorder,
    leadership: &Arc<Leadership>,
    machines: &[(&str, u32)],
    action: Action,
) -> Result<StepReport, ExecuteError> {
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
        spec,
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
    // The script is created (0700) by the first command sent; the Lease is lost as it runs.
    assert_eq!(
        proxmox.calls(),
        [format!(
            "run 101 install -D -m 0700 /dev/null {}",
            kubeadm::RENEW_SCRIPT
        )],
        "nothing is sent once the Lease is lost, to cp-1 or cp-2"
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
            records: Vec::new(),
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

fn spec_of(distribution: Distribution) -> ClusterSpec {
    let mut spec = kubeadm::tests::example_cluster("prod").spec;
    spec.kubernetes.distribution = distribution;
    if distribution == Distribution::K3s {
        spec.kubernetes.version = "v1.36.2+k3s1".parse().expect("version");
    }
    spec
}

#[tokio::test]
async fn a_kubeadm_machine_is_prepared_by_its_script_then_tagged() {
    let proxmox = Recorder::new(|_| exited(0));
    let spec = spec_of(Distribution::Kubeadm);
    let action = Action::PrepareNode {
        machine: machine("w-1", 201),
        version: spec.kubernetes.version,
    };
    let report = run_with(Some(&spec), &proxmox, &leading(), &[("w-1", 201)], action)
        .await
        .expect("prepared");
    let calls = proxmox.calls();
    let script = kubeadm::PREPARE_SCRIPT;
    assert_eq!(
        calls[..2],
        [
            format!("run 201 install -D -m 0700 /dev/null {script}"),
            format!("write 201 {script}"),
        ],
        "the script is created root-only before it is written"
    );
    assert_eq!(calls.last(), Some(&format!("tag 201 {PREPARED_TAG}")));
    assert_eq!(report.action, ActionKind::PrepareNode);
    assert_eq!(
        report.summary,
        format!(
            "w-1 prepared: CRI-O and Kubernetes {}",
            spec.kubernetes.version
        )
    );
}

#[tokio::test]
async fn a_k3s_machine_is_prepared_by_its_template_and_only_tagged() {
    let proxmox = Recorder::new(|_| exited(0));
    let spec = spec_of(Distribution::K3s);
    let action = Action::PrepareNode {
        machine: machine("w-1", 201),
        version: spec.kubernetes.version,
    };
    let report = run_with(Some(&spec), &proxmox, &leading(), &[("w-1", 201)], action)
        .await
        .expect("prepared");
    assert_eq!(proxmox.calls(), [format!("tag 201 {PREPARED_TAG}")]);
    assert_eq!(
        report.to_string(),
        "w-1 prepared: K3s 1.36.2+k3s1 is in its template"
    );
}

#[tokio::test]
async fn a_k3s_control_plane_is_never_upgraded_in_place() {
    let proxmox = Recorder::new(|_| exited(0));
    let spec = spec_of(Distribution::K3s);
    let action = Action::UpgradeControlPlane {
        machine: machine("cp-1", 101),
        from: "v1.35.1+k3s1".parse().expect("version"),
        to: spec.kubernetes.version,
    };
    let err = run_with(Some(&spec), &proxmox, &leading(), &[("cp-1", 101)], action)
        .await
        .expect_err("refused");
    assert!(proxmox.calls().is_empty(), "{:?}", proxmox.calls());
    assert!(matches!(err, ExecuteError::NotInPlace { .. }), "{err:?}");
    assert!(!err.is_transient());
    assert_eq!(
        err.to_string(),
        "upgrade-control-plane: K3s upgrades by replacing machines, not in place"
    );
}

#[tokio::test]
async fn a_k3s_server_is_reset_by_its_uninstall_script() {
    let proxmox = Recorder::new(|_| exited(0));
    let spec = spec_of(Distribution::K3s);
    let action = Action::ResetNode {
        machine: machine("cp-1", 101),
    };
    run_with(Some(&spec), &proxmox, &leading(), &[("cp-1", 101)], action)
        .await
        .expect("reset");
    assert_eq!(
        proxmox.calls(),
        ["run 101 sh /usr/local/bin/k3s-uninstall.sh", "shutdown 101"]
    );
}

#[tokio::test]
async fn a_leaving_worker_takes_no_etcd_member_and_a_k3s_server_none_either() {
    let proxmox = Recorder::new(|_| exited(0));
    let observed = observed(&[("cp-1", 101), ("w-1", 201)]);
    let access = ClusterAccess {
        connection: "p".to_owned(),
        ..ClusterAccess::default()
    };
    let fence = Fence::new(leading());
    let executor = Executor::new(
        Arc::new(Fake {
            proxmox: proxmox.clone(),
        }),
        Arc::new(crate::clock::SystemClock),
    );
    let kubeadm_spec = spec_of(Distribution::Kubeadm);
    let k3s_spec = spec_of(Distribution::K3s);
    for (spec, role, node) in [
        (&kubeadm_spec, Role::Worker, "w-1"),
        (&k3s_spec, Role::Worker, "w-1"),
        (&k3s_spec, Role::ControlPlane, "cp-1"),
    ] {
        let ctx = StepContext {
            cluster: "prod",
            spec: Some(spec),
            observed: &observed,
            access: &access,
            revision: "r1",
            fence: &fence,
        };
        let node = NodeName(node.into());
        crate::execute::distribution::Distribution::leave(
            &ctx.distribution(),
            &executor,
            ctx,
            &node,
            role,
        )
        .await
        .expect("nothing to remove");
    }
    assert!(proxmox.calls().is_empty(), "{:?}", proxmox.calls());
    // kubeadm's control plane takes its etcd member, through another Ready control plane:
    // none here, so it refuses rather than delete the Node with its member left behind.
    let ctx = StepContext {
        cluster: "prod",
        spec: Some(&kubeadm_spec),
        observed: &observed,
        access: &access,
        revision: "r1",
        fence: &fence,
    };
    let err = crate::execute::distribution::Distribution::leave(
        &ctx.distribution(),
        &executor,
        ctx,
        &NodeName("cp-1".into()),
        Role::ControlPlane,
    )
    .await
    .expect_err("no control plane to remove the member through");
    assert!(
        matches!(err, ExecuteError::NoControlPlane { .. }),
        "{err:?}"
    );
}
