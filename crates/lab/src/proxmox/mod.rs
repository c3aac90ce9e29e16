//! The simulated Proxmox VE: an HTTPS server on loopback that answers the REST API as a real
//! Proxmox VE 9.1 cluster does, for the endpoints capstan (and common third-party clients)
//! use, with tasks, locks, capacity, a guest agent and fault injection.
//!
//! - [`SimProxmox::start`] serves a [`ProxmoxWorld`] with a self-signed certificate.
//! - [`SimHandle`] inspects it: per-endpoint call counters, the recorded requests and answers
//!   (the fidelity test checks them against the real schema), the VMs.
//! - [`FaultHandle`] injects faults at run time.
//! - The software inside the VMs is a [`GuestSoftware`] given by the caller.
//!
//! # Invariants
//! - Only the configured API token is accepted; the sim never logs it.
//! - Everything the API shows is derived from one state behind one mutex, so concurrent calls
//!   see a consistent cluster (and VMID races resolve as on a real host: the second clone to a
//!   VMID fails with "config file already exists").

mod addresses;
mod agent_handlers;
mod disk_image;
mod endpoints;
mod formats;
mod guest;
mod handlers;
mod hardware;
mod hardware_api;
mod http;
mod params;
pub mod pattern;
mod reply;
mod sizes;
mod state;
mod storage;
mod tasks;
mod upload;
mod vm_handlers;
mod volumes;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::clock::{Clock, LabClock};
use crate::serve::{HttpsServer, ServeError};
use crate::tls::{Identity, TlsError, self_signed_server};
use crate::world::{CallFault, ProxmoxWorld, TaskFault, WorldError, WorldVm};

pub use formats::known_keys as known_property_keys;
pub use guest::{
    DefaultShell, ExecFuture, ExecOutcome, FileOpenError, GuestCard, GuestDisk, GuestHardware,
    GuestIdentity, GuestSoftware, MediaImage, PowerEvent,
};
pub use state::{Exchange, SentParameter};
pub use upload::UPLOAD_MAX_BYTES;

use state::{Durations, Shared, SimState};

/// Starting or changing the simulator failed.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The world is inconsistent.
    #[error("invalid world for the simulated Proxmox")]
    World(#[source] WorldError),
    /// The certificate could not be made.
    #[error("cannot make the simulated Proxmox certificate")]
    Certificate(#[source] TlsError),
    /// The server could not start.
    #[error("cannot serve the simulated Proxmox")]
    Serve(#[source] ServeError),
    /// A change named something that does not exist.
    #[error("simulated Proxmox: {reason}")]
    Change {
        /// What is wrong.
        reason: String,
    },
}

/// How to serve the simulator.
#[derive(Debug, Clone)]
pub struct SimOptions {
    /// Where to listen (port 0 picks a free one).
    pub listen: SocketAddr,
    /// The accepted API token id, `USER@REALM!TOKENID`.
    pub token_id: String,
    /// The accepted token secret.
    pub token_secret: String,
    /// Record every request and answer (for fidelity checks).
    pub record: bool,
}

impl SimOptions {
    /// Loopback on a free port, the given token, no recording.
    pub fn loopback(token_id: &str, token_secret: &str) -> Self {
        SimOptions {
            listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
            token_id: token_id.to_owned(),
            token_secret: token_secret.to_owned(),
            record: false,
        }
    }
}

/// A running simulated Proxmox VE. Dropping it stops the server.
#[derive(Debug)]
pub struct SimProxmox {
    server: HttpsServer,
    shared: Arc<Shared>,
    identity: Identity,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("token_id", &self.token_id)
            .finish_non_exhaustive()
    }
}

impl SimProxmox {
    /// Serves `world` over HTTPS with a fresh self-signed certificate (SANs `localhost` and
    /// `127.0.0.1`), taking time from `clock` and running guest commands through `guest`.
    ///
    /// # Errors
    /// When the world is inconsistent, or the certificate or the server cannot be made.
    pub async fn start(
        world: &ProxmoxWorld,
        options: SimOptions,
        clock: LabClock,
        guest: Arc<dyn GuestSoftware>,
    ) -> Result<Self, SimError> {
        world.check().map_err(SimError::World)?;
        let not_after = clock.now() + jiff::SignedDuration::from_hours(24 * 365 * 2);
        let identity = self_signed_server(
            "pve.lab",
            &["localhost".to_owned()],
            &[IpAddr::V4(Ipv4Addr::LOCALHOST)],
            not_after,
        )
        .map_err(SimError::Certificate)?;
        let state = SimState::from_world(world, clock.now().as_second());
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            guest,
            clock,
            durations: Durations::from(&world.timings),
            token_id: options.token_id,
            token_secret: options.token_secret,
            fingerprint: identity.fingerprint(),
            record: options.record,
        });
        let app = Arc::new(http::App {
            shared: shared.clone(),
            endpoints: endpoints::endpoints(),
        });
        let server = HttpsServer::start(options.listen, &identity, None, http::router(app))
            .await
            .map_err(SimError::Serve)?;
        Ok(SimProxmox {
            server,
            shared,
            identity,
        })
    }

    /// `https://127.0.0.1:PORT` (the API is below `/api2/json`).
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// The address served.
    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// SHA-256 fingerprint of the server certificate, `AB:CD:...`.
    pub fn fingerprint(&self) -> String {
        self.identity.fingerprint()
    }

    /// The server certificate, PEM (a client may trust it as its own CA).
    pub fn certificate_pem(&self) -> &str {
        &self.identity.cert_pem
    }

    /// The accepted token id.
    pub fn token_id(&self) -> &str {
        &self.shared.token_id
    }

    /// The accepted token secret.
    pub fn token_secret(&self) -> &str {
        &self.shared.token_secret
    }

    /// Inspection of the running simulator.
    pub fn handle(&self) -> SimHandle {
        SimHandle {
            shared: self.shared.clone(),
        }
    }

    /// Fault injection on the running simulator.
    pub fn faults(&self) -> FaultHandle {
        FaultHandle {
            shared: self.shared.clone(),
        }
    }

    /// Stops serving.
    pub fn stop(&self) {
        self.server.stop();
    }
}

/// One endpoint the simulator serves and the parameters it accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcceptedEndpoint {
    /// HTTP method.
    pub method: &'static str,
    /// Path template below `/api2/json`.
    pub template: &'static str,
    /// Accepted parameters.
    pub params: Vec<AcceptedParam>,
}

/// A parameter the simulator accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcceptedParam {
    /// Name as the schema writes it (`net[n]` for families).
    pub name: String,
    /// JSON Schema type: `string`, `integer`, `number`, `boolean`, `array`.
    pub ty: &'static str,
    /// Whether it may be left out.
    pub optional: bool,
}

/// Every endpoint the simulator serves, with its parameters (the fidelity test compares them
/// with the real schema).
pub fn accepted_parameters() -> Vec<AcceptedEndpoint> {
    endpoints::endpoints()
        .into_iter()
        .map(|endpoint| AcceptedEndpoint {
            method: endpoint.method,
            template: endpoint.template,
            params: endpoint
                .params
                .iter()
                .map(|spec| AcceptedParam {
                    name: spec.schema_name(),
                    ty: spec.type_name(),
                    optional: spec.optional,
                })
                .collect(),
        })
        .collect()
}

/// A VM as the simulator holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimVm {
    /// VMID.
    pub vmid: u32,
    /// Node.
    pub node: String,
    /// Name.
    pub name: String,
    /// Whether it runs.
    pub running: bool,
    /// Whether it is a template.
    pub template: bool,
    /// Raw config (`key: value` as Proxmox stores it).
    pub config: BTreeMap<String, String>,
    /// Its DHCP address, once it has one.
    pub address: Option<Ipv4Addr>,
}

/// A task in the simulator's task log, as `/cluster/tasks` of a real host lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimTask {
    /// Its UPID.
    pub upid: String,
    /// The node it runs on.
    pub node: String,
    /// Its type (`qmclone`, `qmstart`, `qmstop`, ...).
    pub kind: String,
    /// What it works on: the VMID (for a clone, the source's).
    pub id: String,
    /// `None` while it runs; then `OK` or the error.
    pub exitstatus: Option<String>,
}

/// Inspects a running simulator (cheap to clone).
#[derive(Debug, Clone)]
pub struct SimHandle {
    shared: Arc<Shared>,
}

impl SimHandle {
    /// Calls per endpoint (`"GET /cluster/resources"` → count); unauthenticated and unknown
    /// calls are counted as `"GET (401)"` and `"GET (unknown)"`.
    pub fn calls(&self) -> BTreeMap<String, u64> {
        self.shared.lock().calls.clone()
    }

    /// Calls in all.
    pub fn total_calls(&self) -> u64 {
        self.shared.lock().calls.values().sum()
    }

    /// Calls of one endpoint (`"POST /nodes/{node}/qemu/{vmid}/clone"`).
    pub fn calls_of(&self, key: &str) -> u64 {
        self.shared.lock().calls.get(key).copied().unwrap_or(0)
    }

    /// Resets the counters.
    pub fn reset_calls(&self) {
        self.shared.lock().calls.clear();
    }

    /// The recorded requests and answers (empty unless started with `record`).
    pub fn exchanges(&self) -> Vec<Exchange> {
        self.shared.lock().exchanges.clone()
    }

    /// Every distinct scalar parameter received since the start, as (method, path template,
    /// name, value), whatever the answer (a refused call's parameters too): what a judge of
    /// the published schema checks.
    pub fn sent_parameters(&self) -> Vec<state::SentParameter> {
        self.shared.lock().sent.iter().cloned().collect()
    }

    /// Every VM and template, by VMID.
    pub fn vms(&self) -> Vec<SimVm> {
        let state = self.shared.lock();
        state
            .vms
            .iter()
            .map(|(vmid, vm)| SimVm {
                vmid: *vmid,
                node: vm.node.clone(),
                name: vm.name(),
                running: vm.running,
                template: vm.is_template(),
                config: vm.config.clone(),
                address: state.leases.get(vmid).copied(),
            })
            .collect()
    }

    /// The task log, oldest first (tasks that ran and those still running).
    pub fn tasks(&self) -> Vec<SimTask> {
        let state = self.shared.lock();
        let mut tasks: Vec<(u32, SimTask)> = state
            .tasks
            .iter()
            .map(|(upid, task)| {
                let listed = SimTask {
                    upid: upid.clone(),
                    node: task.node.clone(),
                    kind: task.kind.clone(),
                    id: task.id.clone(),
                    exitstatus: task.exitstatus.clone(),
                };
                (task.pid, listed)
            })
            .collect();
        // PIDs are handed out in start order.
        tasks.sort_by_key(|(pid, _)| *pid);
        tasks.into_iter().map(|(_, task)| task).collect()
    }

    /// The VM `vmid`, if it exists.
    pub fn vm(&self, vmid: u32) -> Option<SimVm> {
        self.vms().into_iter().find(|vm| vm.vmid == vmid)
    }

    /// What the guest of VM `vmid` is, as the node software sees it (its disks and cards
    /// derived from its config), if it exists.
    pub fn guest(&self, vmid: u32) -> Option<GuestIdentity> {
        self.shared.lock().identity(vmid)
    }

    /// Sets `key` of VM `vmid`'s config to `value` as someone at Proxmox's web interface would
    /// (no checks, no task): a change made outside capstan.
    pub fn edit_config(&self, vmid: u32, key: &str, value: &str) -> Result<(), SimError> {
        let mut state = self.shared.lock();
        let vm = state.vms.get_mut(&vmid).ok_or_else(|| SimError::Change {
            reason: format!("VM {vmid} does not exist"),
        })?;
        vm.config.insert(key.to_owned(), value.to_owned());
        Ok(())
    }

    /// The resource pool VM `vmid` is in, if any.
    pub fn pool_of(&self, vmid: u32) -> Option<String> {
        self.shared.lock().vms.get(&vmid)?.pool.clone()
    }

    /// The VM named `name`, if one exists.
    pub fn vm_named(&self, name: &str) -> Option<SimVm> {
        self.vms().into_iter().find(|vm| vm.name == name)
    }

    /// The bytes of volume `volid` (`local:iso/seed.iso`) as Proxmox node `node` sees it,
    /// exactly as uploaded; `None` when there is no such volume there.
    pub fn volume(&self, node: &str, volid: &str) -> Option<Vec<u8>> {
        let state = self.shared.lock();
        state.volume_bytes(node, volid).map(|bytes| bytes.to_vec())
    }

    /// Every uploaded volume id a node sees (its own and those on shared storages), sorted.
    pub fn volumes(&self, node: &str) -> Vec<String> {
        let state = self.shared.lock();
        state
            .store
            .volumes
            .keys()
            .filter(|(at, _)| at.is_empty() || at == node)
            .map(|(_, volid)| volid.clone())
            .collect()
    }

    /// The ISO image in VM `vmid`'s CD-ROM drive `drive` (`ide2`): its volume's bytes, as the
    /// VM would read them; `None` when the drive is empty, holds no uploaded volume, or the VM
    /// does not exist.
    pub fn cdrom_image(&self, vmid: u32, drive: &str) -> Option<Vec<u8>> {
        let state = self.shared.lock();
        let vm = state.vms.get(&vmid)?;
        let value = vm.config.get(drive)?;
        if !value.split(',').any(|part| part == "media=cdrom") {
            return None;
        }
        let volid = value.split(',').next()?;
        state
            .volume_bytes(&vm.node, volid)
            .map(|bytes| bytes.to_vec())
    }

    /// Adds a VM as if someone created it outside capstan.
    ///
    /// # Errors
    /// When its node does not exist or its VMID is taken.
    pub fn add_vm(&self, vm: &WorldVm) -> Result<(), SimError> {
        let now = self.shared.unix_now();
        let mut state = self.shared.lock();
        if !state.nodes.contains_key(&vm.node) {
            return Err(SimError::Change {
                reason: format!("no node {}", vm.node),
            });
        }
        if state.vms.contains_key(&vm.vmid) {
            return Err(SimError::Change {
                reason: format!("VMID {} is taken", vm.vmid),
            });
        }
        let storage = state
            .storages
            .keys()
            .next()
            .cloned()
            .unwrap_or_else(|| "local-lvm".into());
        let mut config = state.base_config(
            vm.vmid,
            &vm.name,
            vm.cores,
            vm.memory_mib,
            &storage,
            u64::from(vm.disk_gib) * state::GIB,
            now,
        );
        if let Some(tags) = &vm.tags {
            config.insert("tags".into(), tags.clone());
        }
        if let Some(description) = &vm.description {
            config.insert("description".into(), description.clone());
        }
        state.insert_vm(vm.vmid, &vm.node, config, vm.running, None);
        if vm.running {
            state.lease(vm.vmid);
            if let Some(added) = state.vms.get_mut(&vm.vmid) {
                added.agent_ready_at = Some(tokio::time::Instant::now());
                added.started_unix = Some(now);
            }
        }
        Ok(())
    }
}

/// Injects faults into a running simulator (cheap to clone).
#[derive(Debug, Clone)]
pub struct FaultHandle {
    shared: Arc<Shared>,
}

impl FaultHandle {
    /// The next `count` tasks of type `kind` (`qmclone`, `qmstart`, ...) fail with `message`.
    pub fn fail_tasks(&self, kind: &str, count: u32, message: &str) {
        self.shared.lock().faults.tasks.push(TaskFault {
            kind: kind.to_owned(),
            count,
            message: message.to_owned(),
        });
    }

    /// Tasks of type `kind` fail no more: the faults [`FaultHandle::fail_tasks`] left for it
    /// are dropped (a fault that was cleared, as an operator fixes a storage).
    pub fn clear_tasks(&self, kind: &str) {
        self.shared
            .lock()
            .faults
            .tasks
            .retain(|fault| fault.kind != kind);
    }

    /// The next calls (see [`CallFault`]) get an error answer instead of being served.
    pub fn fail_calls(&self, fault: CallFault) {
        self.shared.lock().faults.calls.push(fault);
    }

    /// Adds `latency` to every call.
    pub fn set_latency(&self, latency: Duration) {
        self.shared.lock().faults.latency = latency;
    }

    /// VMs matching `selector` (VMID, name or `prefix*`) never start their guest agent.
    pub fn agent_never_starts(&self, selector: &str) {
        self.shared
            .lock()
            .faults
            .agent_never_starts
            .push(selector.to_owned());
    }

    /// The guest agents of VMs matching `selector` are root's to play with (a hostile or
    /// compromised workload VM): they answer every exec of `program` with an error whose
    /// message echoes the command line and every file written into the VM since (newest
    /// first). What a VM sends back must never be trusted to hold no secret.
    pub fn hostile_agent(&self, selector: &str, program: &str) {
        self.shared
            .lock()
            .faults
            .hostile
            .push((selector.to_owned(), program.to_owned()));
    }

    /// The guest agents of VMs matching `selector` are root's to play with and answer every
    /// exec of `program` with `bytes` of output (a `cat` of a kubeconfig that is a 100 MiB
    /// file): what a VM sends back must be bounded before it is read.
    pub fn flooding_agent(&self, selector: &str, program: &str, bytes: usize) {
        self.shared
            .lock()
            .faults
            .flooding
            .push((selector.to_owned(), program.to_owned(), bytes));
    }

    /// VMs matching `selector` hang: the agent never answers, a clean shutdown times out.
    pub fn hang_vm(&self, selector: &str) {
        self.shared.lock().faults.hung.push(selector.to_owned());
    }

    /// VMs matching `selector` hang no more (a hung guest that came back).
    pub fn unhang_vm(&self, selector: &str) {
        self.shared
            .lock()
            .faults
            .hung
            .retain(|hung| hung != selector);
    }

    /// The next `count` answers of `/cluster/nextid` are taken by someone else's clone right
    /// after they are given (a lost VMID race).
    pub fn steal_next_vmid(&self, count: u32) {
        self.shared.lock().faults.steal_next_vmid += count;
    }

    /// Takes a Proxmox node away (its VMs die with it and calls to it fail with 595) or
    /// brings it back (its VMs stay stopped, as after a host crash).
    ///
    /// # Errors
    /// When the node does not exist.
    pub fn set_node_online(&self, node: &str, online: bool) -> Result<(), SimError> {
        let events = {
            let mut state = self.shared.lock();
            let Some(entry) = state.nodes.get_mut(node) else {
                return Err(SimError::Change {
                    reason: format!("no node {node}"),
                });
            };
            entry.online = online;
            if online {
                Vec::new()
            } else {
                let lost: Vec<u32> = state
                    .vms
                    .iter()
                    .filter(|(_, vm)| vm.node == node && vm.running)
                    .map(|(vmid, _)| *vmid)
                    .collect();
                let mut events = Vec::new();
                for vmid in lost {
                    events.extend(state.identity(vmid).map(|id| (id, PowerEvent::HostLost)));
                    if let Some(vm) = state.vms.get_mut(&vmid) {
                        vm.running = false;
                        vm.started_unix = None;
                        vm.agent_ready_at = None;
                        vm.execs.clear();
                    }
                }
                events
            }
        };
        self.shared.notify(events);
        Ok(())
    }

    /// The running VM `vmid` dies where it is (a guest kernel panic, someone's `qm stop`):
    /// stopped, its agent silent, its Node NotReady. Nothing starts it again.
    ///
    /// # Errors
    /// When no running VM has that VMID.
    pub fn crash_vm(&self, vmid: u32) -> Result<(), SimError> {
        let events = {
            let mut state = self.shared.lock();
            let identity = state.identity(vmid);
            let Some(vm) = state.vms.get_mut(&vmid).filter(|vm| vm.running) else {
                return Err(SimError::Change {
                    reason: format!("no running VM {vmid}"),
                });
            };
            vm.running = false;
            vm.started_unix = None;
            vm.agent_ready_at = None;
            vm.execs.clear();
            identity
                .map(|id| vec![(id, PowerEvent::HardStopped)])
                .unwrap_or_default()
        };
        self.shared.notify(events);
        Ok(())
    }

    /// Disarms every fault (offline nodes stay offline).
    pub fn clear(&self) {
        let mut state = self.shared.lock();
        state.faults = state::Faults::default();
    }
}
