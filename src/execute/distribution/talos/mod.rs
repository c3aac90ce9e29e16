//! Talos Linux: no SSH, no shell, no guest-agent exec. A new machine gets its machine config
//! (rendered purely in core from the cluster's secrets bundle) on a NoCloud `cidata` ISO
//! uploaded through the Proxmox API and attached before its first start; everything after
//! goes through the Talos API (gRPC, mutual TLS with an `os:admin` certificate signed by the
//! cluster's OS CA): `Version` to see it took the config and runs the declared release,
//! `Bootstrap` once on the first control plane, and the etcd membership calls when a control
//! plane leaves. Nodes join on their own; the admin kubeconfig is computed from the bundle;
//! the version is what the kubelets report; upgrades replace machines.
//!
//! # Guarantees
//! - The ISO, which holds the cluster's CA keys, lives only until the machine's Talos API
//!   answers under the cluster's OS CA (proof it took and stored its config): `prepare`
//!   detaches and deletes it then, before any other check (the release it runs) and before
//!   the machine is marked prepared, so a crash or a refusal in between leaves none; the
//!   daemon's sweep (`execute/config_isos.rs`) deletes any a step left anyway.
//! - `Bootstrap` runs on one machine; a repeated one (after a crash) is Talos's
//!   `AlreadyExists`, taken as done. The bundle is marked bootstrapped only after it.
//! - A control plane leaves etcd (forfeit leadership, leave) before it is drained away; a dead
//!   one is removed by id through a healthy member; members that match no machine are removed.

use capstan_core::talos::{
    ClusterFacts, MacAddress, MachineRole, NodeFacts, RenderProblem, TalosVersion, cidata_files,
    cidata_image,
    facts::{Link, UserVolume},
    render_machine_config,
};

use crate::connect::Providers;
use crate::execute::{ExecuteError, Executor, StepContext, fenced, node_target, require_spec};
use crate::model::{NodeName, Role};
use crate::plan::{ActionKind, MachineRef};
use crate::providers::kubeadm::NodeStep;
use crate::providers::proxmox::{ProxmoxProvider as _, StorageContent, VmRef, VolumeId};
use crate::providers::talos::api::{BootstrapOutcome, GrpcTalosApi, TalosApi, TalosCredentials};
use crate::providers::talos::{admin_credentials, kubeconfig};
use crate::records::talos::{self as store, StoredBundle};
use crate::scheduling::NodeScheduling;
use crate::spec::registries::ResolvedRegistries;
use crate::spec::{ClusterSpec, Endpoint, KubeVersion};

use super::{AdminSource, Distribution, NewMachine, VersionSource};
pub use error::TalosError;

mod error;
mod etcd;

/// The disk Talos installs to on a Proxmox VE VM (`scsi0`, as the templates are made).
const INSTALL_DISK: &str = "/dev/sda";

/// Talos Linux machines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Talos;

impl Distribution for Talos {
    /// Before a clone: the connection's ISO storage exists on every placement node and holds
    /// ISO images (a storage that cannot is refused before any VM exists).
    async fn preflight<Pr: Providers>(
        &self,
        ex: &Executor<Pr>,
        ctx: StepContext<'_>,
    ) -> Result<(), ExecuteError> {
        let Some(spec) = ctx.spec else {
            return Ok(());
        };
        let action = ActionKind::CreateMachine;
        let storage = iso_storage(ctx, action)?;
        let proxmox = ex.proxmox(ctx)?;
        let mut nodes: Vec<&String> = std::iter::once(&spec.control_plane.machine)
            .chain(spec.workers.iter().map(|pool| &pool.machine))
            .flat_map(|machine| &machine.placement)
            .collect();
        nodes.sort();
        nodes.dedup();
        for node in nodes {
            let pve = crate::providers::proxmox::PveNode(node.clone());
            let content = proxmox
                .storage_content(&pve, storage)
                .await
                .map_err(|source| failed(action, TalosError::from_proxmox(source)))?;
            if !content.contains(&StorageContent::Iso) {
                return Err(failed(
                    action,
                    TalosError::StorageHoldsNoIso {
                        storage: storage.to_owned(),
                        node: node.clone(),
                    },
                ));
            }
        }
        Ok(())
    }

    /// Renders the machine's config (with its static address, tagged on the VM already, its
    /// cards' links and its data volumes), writes it on a `cidata` ISO, uploads it to the ISO
    /// storage and puts it in the VM's CD-ROM drive. Refuses a VM with memory hotplug.
    async fn deliver_config<Pr: Providers>(
        &self,
        ex: &Executor<Pr>,
        ctx: StepContext<'_>,
        machine: &NewMachine<'_>,
    ) -> Result<Option<String>, ExecuteError> {
        let (vm, name, role) = (machine.vm, machine.name, machine.role);
        let action = ActionKind::CreateMachine;
        let spec = require_spec(ctx, action)?;
        let storage = iso_storage(ctx, action)?;
        let proxmox = ex.proxmox(ctx)?;
        let hardware = proxmox
            .vm_hardware(vm)
            .await
            .map_err(|source| failed(action, TalosError::from_proxmox(source)))?;
        if hardware.memory_hotplug {
            return Err(failed(
                action,
                TalosError::MemoryHotplug {
                    machine: name.clone(),
                },
            ));
        }
        let no_mac = || {
            failed(
                action,
                TalosError::NoMacAddress {
                    machine: name.clone(),
                },
            )
        };
        let declared = &machine.hardware.networks;
        let links = if declared.is_empty() {
            Vec::new()
        } else {
            declared
                .iter()
                .enumerate()
                .map(|(index, card)| {
                    let mac = hardware
                        .mac_addresses
                        .get(index)
                        .and_then(|mac| mac.parse::<MacAddress>().ok())
                        .ok_or_else(no_mac)?;
                    Ok(Link {
                        mac_address: mac,
                        mtu: card.mtu,
                    })
                })
                .collect::<Result<Vec<_>, ExecuteError>>()?
        };
        let mac_address = match links.get(machine.hardware.primary_card()) {
            Some(link) => link.mac_address,
            None => hardware
                .mac_address
                .and_then(|mac| mac.parse::<MacAddress>().ok())
                .ok_or_else(no_mac)?,
        };
        let volumes = user_volumes(machine.hardware);
        let stored = bundle(ex, ctx, spec, action).await?;
        let node = NodeFacts {
            role: match role {
                Role::ControlPlane => MachineRole::ControlPlane,
                Role::Worker => MachineRole::Worker,
            },
            hostname: name.to_string(),
            install_disk: INSTALL_DISK.to_owned(),
            mac_address,
            static_address: machine.address.cloned(),
            register_with_taints: machine
                .scheduling
                .registration(&spec.kubernetes.distribution.capabilities().scheduling)
                .taints,
            patches: capstan_core::talos::patches::patches_for(
                spec,
                machine.scheduling.worker_pool(),
            ),
            links,
            volumes,
        };
        let image = config_image(ex, ctx, spec, (&node, vm), &stored)?;
        let file_name = iso_file_name(name, vm);
        let volume = proxmox
            .upload_iso(&vm.node, storage, &file_name, &image)
            .await
            .map_err(|source| failed(action, TalosError::from_proxmox(source)))?;
        proxmox
            .attach_cdrom(vm, &volume)
            .await
            .map_err(|source| failed(action, TalosError::from_proxmox(source)))?;
        Ok(Some(format!("its machine config on {volume}")))
    }

    /// Waits for the machine's Talos API (which answers under the cluster's OS CA only once
    /// it took its config), detaches and deletes its ISO at once, then checks the release it
    /// runs (a template of another release is refused with no ISO left behind).
    async fn prepare<Pr: Providers>(
        &self,
        ex: &Executor<Pr>,
        ctx: StepContext<'_>,
        machine: &MachineRef,
        version: KubeVersion,
    ) -> Result<String, ExecuteError> {
        let action = ActionKind::PrepareNode;
        let spec = require_spec(ctx, action)?;
        let (api, _) = node_api(ex, ctx, machine, action).await?;
        let runs = api
            .version()
            .await
            .map_err(|source| failed(action, source.into()))?;
        // The machine answered under the cluster's OS CA: it took and stored its config, so
        // the ISO (every CA key) goes now, before any other check can fail and leave it.
        eject_config(ex, ctx, machine, action).await?;
        // The tag as the node sends it, bounded and printable: it is named in the refusal.
        let runs: String = runs
            .talos_tag
            .chars()
            .filter(|c| !c.is_control())
            .take(40)
            .collect();
        let wants = spec
            .talos
            .as_ref()
            .ok_or_else(|| failed(action, TalosError::NoRelease))?;
        if runs.parse::<TalosVersion>() != Ok(wants.version) {
            return Err(failed(
                action,
                TalosError::TemplateRelease {
                    machine: machine.name.clone(),
                    template: template_of(ctx, spec, &machine.name).to_owned(),
                    runs,
                    wants: wants.version.to_string(),
                },
            ));
        }
        let extensions = check_extensions(&api, ctx, spec, machine).await?;
        Ok(format!(
            "Talos {runs}{extensions} runs its machine config for Kubernetes {version}; its config ISO deleted"
        ))
    }

    /// `Bootstrap` on the first control plane, the bundle marked bootstrapped, the admin
    /// kubeconfig computed, admitted and recorded, the talosconfig kept for operators.
    async fn init<Pr: Providers>(
        &self,
        ex: &Executor<Pr>,
        ctx: StepContext<'_>,
        machine: &MachineRef,
        endpoint: &Endpoint,
        _: KubeVersion,
        scheduling: &NodeScheduling,
    ) -> Result<String, ExecuteError> {
        let action = ActionKind::InitControlPlane;
        let spec = require_spec(ctx, action)?;
        let (api, address) = node_api(ex, ctx, machine, action).await?;
        fenced(ctx, "bootstrapping etcd")?;
        let outcome = api
            .bootstrap()
            .await
            .map_err(|source| failed(action, source.into()))?;
        let stored = bundle(ex, ctx, spec, action).await?;
        let management = management(ex, spec)?;
        fenced(ctx, "recording the Talos bootstrap")?;
        store::mark_bootstrapped(management, ctx.cluster, &stored, ex.clock.now())
            .await
            .map_err(|source| failed(action, source.into()))?;
        let credentials = credentials(&stored, action)?;
        store::write_talosconfig(
            management,
            ctx.cluster,
            &stored.bundle,
            &credentials.admin,
            &[address.to_string()],
        )
        .await
        .map_err(|source| failed(action, source.into()))?;
        let text = kubeconfig::admin_kubeconfig(
            ctx.cluster,
            &stored.bundle,
            endpoint,
            time::OffsetDateTime::now_utc(),
        )
        .map_err(|source| failed(action, TalosError::Secrets(source)))?;
        let target = node_target(machine)?;
        let kubeconfig = ex.admit(ctx, spec, &target, &text).await?;
        ex.mark_bootstrapped(ctx, &kubeconfig).await?;
        let ready = ex.await_ready(ctx, &kubeconfig, &target.name).await;
        let labelled = ex
            .settle_node(ctx, &kubeconfig, &target.name, scheduling)
            .await;
        let how = match outcome {
            BootstrapOutcome::Bootstrapped => "etcd bootstrapped",
            BootstrapOutcome::AlreadyBootstrapped => "etcd was bootstrapped already",
        };
        Ok(format!(
            "{how} on {} (endpoint {}:{} on Talos's VIP {}){ready}{labelled}",
            target.name, endpoint.host, endpoint.port, endpoint.address
        ))
    }

    /// Nothing to run: a Talos machine joins with its machine config as it boots. The step
    /// waits briefly for its Node, then labels it.
    async fn join<Pr: Providers>(
        &self,
        ex: &Executor<Pr>,
        ctx: StepContext<'_>,
        machine: &MachineRef,
        _: Role,
        scheduling: &NodeScheduling,
    ) -> Result<String, ExecuteError> {
        let action = ActionKind::JoinNode;
        let kubeconfig = ctx
            .access
            .kubeconfig
            .as_ref()
            .ok_or(ExecuteError::NoKubeconfig { action })?;
        let ready = ex.await_ready(ctx, kubeconfig, &machine.name).await;
        let labelled = ex
            .settle_node(ctx, kubeconfig, &machine.name, scheduling)
            .await;
        Ok(format!(
            "{} joins with its machine config{ready}{labelled}",
            machine.name
        ))
    }

    /// A control plane leaves etcd: through its own Talos API when it answers (forfeiting
    /// leadership first), else removed by id through a healthy member.
    async fn leave<Pr: Providers>(
        &self,
        ex: &Executor<Pr>,
        ctx: StepContext<'_>,
        node: &NodeName,
        role: Role,
    ) -> Result<(), ExecuteError> {
        if role != Role::ControlPlane {
            return Ok(());
        }
        etcd::leave(ex, ctx, node).await
    }

    /// Nothing to undo on the node: the VM is destroyed with everything Talos wrote (its etcd
    /// member left in `leave`). Its config ISO goes, if it is still there (a machine removed
    /// before it was prepared).
    async fn reset<Pr: Providers>(
        &self,
        ex: &Executor<Pr>,
        ctx: StepContext<'_>,
        machine: &MachineRef,
    ) -> Result<(), ExecuteError> {
        if ctx.access.iso_storage.is_none() {
            return Ok(());
        }
        eject_config(ex, ctx, machine, ActionKind::ResetNode).await
    }

    /// Refused: Talos machines are replaced for a new release (`Capabilities::upgrades_in_place`).
    async fn upgrade_in_place<Pr: Providers>(
        &self,
        _: &Executor<Pr>,
        _: StepContext<'_>,
        _: &MachineRef,
        _: KubeVersion,
    ) -> Result<String, ExecuteError> {
        Err(ExecuteError::NotInPlace {
            action: ActionKind::UpgradeControlPlane,
            tool: crate::spec::Distribution::Talos.capabilities().tool,
        })
    }

    /// Nothing to run on a node: Talos rotates its own serving certificates, and the admin
    /// kubeconfig is computed afresh from the bundle.
    fn certificate_renewal(&self) -> Vec<NodeStep> {
        Vec::new()
    }

    fn renewed(&self, _: usize) -> String {
        "the Talos admin kubeconfig computed afresh from the cluster's bundle".to_owned()
    }

    fn admin_kubeconfig_source(&self) -> AdminSource {
        AdminSource::Bundle
    }

    /// Talos keeps no kubeadm-config: the control planes' kubelets report the release.
    fn version_source(&self) -> VersionSource {
        VersionSource::ServerKubelets
    }

    async fn unreachable_because<Pr: Providers>(
        &self,
        _: &Pr,
        _: &str,
        _: &ClusterSpec,
    ) -> Option<String> {
        None
    }
}

/// `step` failed for `source`.
fn failed(action: ActionKind, source: TalosError) -> ExecuteError {
    ExecuteError::Talos {
        action,
        source: Box::new(source),
    }
}

/// The connection's ISO storage.
fn iso_storage<'a>(ctx: StepContext<'a>, action: ActionKind) -> Result<&'a str, ExecuteError> {
    ctx.access.iso_storage.as_deref().ok_or_else(|| {
        failed(
            action,
            TalosError::NoIsoStorage {
                connection: ctx.access.connection.clone(),
            },
        )
    })
}

/// The ISO of machine `name` on VM `vm`: one per VM, so a replacement never reuses one.
fn iso_file_name(name: &NodeName, vm: &VmRef) -> String {
    crate::execute::config_isos::file_name(name, vm.vmid)
}

/// The `cidata` image of `node` on `vm`: its machine config on the network the cluster runs,
/// with the cluster's registries (their passwords read now).
fn config_image<Pr: Providers>(
    ex: &Executor<Pr>,
    ctx: StepContext<'_>,
    spec: &ClusterSpec,
    (node, vm): (&NodeFacts, &VmRef),
    stored: &StoredBundle,
) -> Result<Vec<u8>, ExecuteError> {
    let action = ActionKind::CreateMachine;
    let running = ctx.observed.control_plane.as_ref();
    let running = running.and_then(|cp| cp.network.as_ref());
    let registries = crate::execute::registries(ex.providers(), ctx, spec, action)?;
    cidata(ctx.cluster, spec, running, (node, &registries), vm, stored)
        .map_err(|source| failed(action, source))
}

/// The `cidata` image of `node`, on the network the cluster runs (`running`: what it was
/// built with, when it exists), with the registry documents of `registries`.
fn cidata(
    cluster: &str,
    spec: &ClusterSpec,
    running: Option<&capstan_core::spec::RecordedNetwork>,
    (node, registries): (&NodeFacts, &ResolvedRegistries),
    vm: &VmRef,
    stored: &StoredBundle,
) -> Result<Vec<u8>, TalosError> {
    let talos = spec.talos.as_ref().ok_or(TalosError::NoRelease)?;
    let network = spec.cluster_network(running);
    let facts = ClusterFacts {
        cluster_name: cluster.to_owned(),
        endpoint_host: spec.endpoint.host.clone(),
        endpoint_address: spec.endpoint.address,
        endpoint_port: spec.endpoint.port,
        kubernetes_version: spec.kubernetes.version,
        talos_version: talos.version,
        installer_image: talos.installer_image.clone(),
        network,
        authentication: spec.kubernetes.authentication.clone(),
    };
    let mut config =
        render_machine_config(&facts, node, &stored.bundle).map_err(TalosError::Render)?;
    capstan_core::talos::registries::append(&mut config, registries)
        .map_err(|words| TalosError::Render(RenderProblem::Yaml(words)))?;
    let instance_id = format!("{}-{}", node.hostname, vm.vmid);
    let files = cidata_files(node, &instance_id, &config).map_err(TalosError::Cidata)?;
    cidata_image(&files).map_err(TalosError::Cidata)
}

/// Empties the machine's CD-ROM drive of its config ISO and deletes the ISO (both no-ops
/// when done already).
async fn eject_config<Pr: Providers>(
    ex: &Executor<Pr>,
    ctx: StepContext<'_>,
    machine: &MachineRef,
    action: ActionKind,
) -> Result<(), ExecuteError> {
    let storage = iso_storage(ctx, action)?;
    let vm = crate::execute::access::vm_ref(machine)?;
    let volume = VolumeId::iso(storage, &iso_file_name(&machine.name, &vm));
    let proxmox = ex.proxmox(ctx)?;
    proxmox
        .detach_cdrom(&vm, &volume)
        .await
        .map_err(|source| failed(action, TalosError::from_proxmox(source)))?;
    proxmox
        .delete_volume(&vm.node, &volume)
        .await
        .map_err(|source| failed(action, TalosError::from_proxmox(source)))
}

/// The management cluster that keeps the bundle: the one the cluster delivers to.
fn management<'a, Pr: Providers>(
    ex: &'a Executor<Pr>,
    spec: &ClusterSpec,
) -> Result<&'a Pr::Cluster, ExecuteError> {
    let preferred = spec.delivery.flux.as_ref().map(|f| f.cluster.as_str());
    ex.providers()
        .management(preferred)
        .ok_or_else(|| ExecuteError::NoManagement {
            name: preferred.unwrap_or("(none in capstan.yaml)").to_owned(),
        })
}

/// The cluster's bundle, generated and stored on first use.
async fn bundle<Pr: Providers>(
    ex: &Executor<Pr>,
    ctx: StepContext<'_>,
    spec: &ClusterSpec,
    action: ActionKind,
) -> Result<StoredBundle, ExecuteError> {
    let management = management(ex, spec)?;
    // May generate and store the cluster's secrets.
    fenced(ctx, "reading or creating the cluster's Talos secrets")?;
    // A bundle an earlier capstan made is adopted only once a machine of the cluster was
    // prepared (it took a config from that bundle): a new cluster's first machine must not be
    // configured from a deleted one's keys.
    let live = ctx.observed.machines.values().any(|m| m.is_prepared());
    store::bundle_or_create(
        management,
        ctx.cluster,
        live,
        time::OffsetDateTime::now_utc(),
    )
    .await
    .map_err(|source| failed(action, source.into()))
}

/// An `os:admin` client certificate for the Talos API, from the bundle.
fn credentials(
    stored: &StoredBundle,
    action: ActionKind,
) -> Result<TalosCredentials, ExecuteError> {
    let admin = admin_credentials(&stored.bundle, time::OffsetDateTime::now_utc())
        .map_err(|source| failed(action, TalosError::Secrets(source)))?;
    Ok(TalosCredentials {
        os_ca_pem: stored.bundle.os_ca.certificate_pem.clone(),
        admin,
    })
}

/// The Talos API of `machine`, at the address its guest agent reports.
async fn node_api<Pr: Providers>(
    ex: &Executor<Pr>,
    ctx: StepContext<'_>,
    machine: &MachineRef,
    action: ActionKind,
) -> Result<(GrpcTalosApi, std::net::IpAddr), ExecuteError> {
    let spec = require_spec(ctx, action)?;
    let target = node_target(machine)?;
    let address = ex.address(ctx, &target).await?;
    let stored = bundle(ex, ctx, spec, action).await?;
    let credentials = credentials(&stored, action)?;
    let api = ex
        .providers()
        .talos_api(address, &credentials)
        .await
        .map_err(|source| failed(action, source.into()))?;
    Ok((api, address))
}

/// The template machine `name` was cloned from, as the spec names its pool's.
fn template_of<'a>(ctx: StepContext<'_>, spec: &'a ClusterSpec, name: &NodeName) -> &'a str {
    let pool = ctx
        .observed
        .machines
        .get(name)
        .map(|observed| observed.ownership.pool.as_str());
    spec.workers
        .iter()
        .find(|workers| Some(workers.pool.as_str()) == pool)
        .map_or(&spec.control_plane.machine.template, |workers| {
            &workers.machine.template
        })
}

/// The data disks Talos mounts as user volumes (those with a mount, under `/var/mnt/`), found
/// by the serial capstan gives each disk.
fn user_volumes(hardware: &capstan_core::spec::hardware::MachineHardware) -> Vec<UserVolume> {
    hardware
        .disks
        .iter()
        .enumerate()
        .filter_map(|(index, disk)| {
            let mount = disk.mount.as_ref()?;
            Some(UserVolume {
                name: mount.path.strip_prefix("/var/mnt/")?.to_owned(),
                serial: crate::providers::proxmox::disk_serial(index),
                filesystem: mount.filesystem.as_str(),
            })
        })
        .collect()
}

/// The most extensions a refusal names of those a machine runs.
const MAX_EXTENSIONS_NAMED: usize = 16;

/// Refuses a new machine whose template lacks an extension `spec.talos.extensions` declares,
/// before capstan counts it; says which declared ones it runs (` with iscsi-tools v0.2.0`).
async fn check_extensions(
    api: &impl TalosApi,
    ctx: StepContext<'_>,
    spec: &ClusterSpec,
    machine: &MachineRef,
) -> Result<String, ExecuteError> {
    let action = ActionKind::PrepareNode;
    let declared = spec
        .talos
        .as_ref()
        .map(|t| t.extensions.as_slice())
        .unwrap_or_default();
    if declared.is_empty() {
        return Ok(String::new());
    }
    let runs = api
        .extensions()
        .await
        .map_err(|source| failed(action, source.into()))?;
    // A machine names an extension without its owner: `siderolabs/iscsi-tools` runs as
    // `iscsi-tools`.
    let reported = |declared: &str| {
        declared
            .rsplit_once('/')
            .map_or(declared, |(_, n)| n)
            .to_owned()
    };
    let running = |name: &str| runs.iter().find(|e| e.name == reported(name));
    let missing: Vec<&str> = declared
        .iter()
        .filter(|name| running(name).is_none())
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        // What the node sent, printable and at most a few: it is named in the refusal.
        let runs: Vec<String> = runs
            .iter()
            .take(MAX_EXTENSIONS_NAMED)
            .map(|e| {
                format!("{} {}", e.name, e.version)
                    .chars()
                    .filter(|c| !c.is_control())
                    .collect()
            })
            .collect();
        return Err(failed(
            action,
            TalosError::MissingExtensions {
                machine: machine.name.clone(),
                template: template_of(ctx, spec, &machine.name).to_owned(),
                missing: missing.join(", "),
                runs: if runs.is_empty() {
                    "none".to_owned()
                } else {
                    runs.join(", ")
                },
            },
        ));
    }
    let found: Vec<String> = declared
        .iter()
        .filter_map(|name| running(name))
        .map(|e| format!("{} {}", e.name, e.version))
        .collect();
    Ok(format!(" with {}", found.join(", ")))
}
