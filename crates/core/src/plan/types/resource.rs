//! [`Resource`]: what a cluster waits on, and how it is told (times on the cluster's own
//! wall clock).

use std::fmt;

use jiff::Timestamp;
use serde::Serialize;

use crate::model::{NodeName, VmId};
use crate::observed::PodRef;

/// A thing in the world a cluster waits on: where to look.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Resource {
    /// A Proxmox task.
    #[serde(rename_all = "camelCase")]
    ProxmoxTask {
        /// Its UPID.
        upid: String,
        /// Its type.
        task: String,
    },
    /// A VM (booting, its guest agent not answering yet).
    #[serde(rename_all = "camelCase")]
    Vm {
        /// VM id.
        vm_id: VmId,
        /// VM name.
        name: NodeName,
        /// What is awaited.
        condition: String,
    },
    /// A Kubernetes Node (to become Ready).
    #[serde(rename_all = "camelCase")]
    Node {
        /// Node name.
        name: NodeName,
        /// What is awaited.
        condition: String,
    },
    /// A pod that blocks a drain.
    #[serde(rename_all = "camelCase")]
    Pod {
        /// The pod.
        pod: PodRef,
        /// The node being drained.
        node: NodeName,
    },
    /// The cluster's API endpoint, which does not answer.
    #[serde(rename_all = "camelCase")]
    ApiEndpoint {
        /// `host:port`.
        endpoint: String,
    },
    /// The maintenance windows (rule 11): no allow window is open, or a deny window is.
    #[serde(rename_all = "camelCase")]
    MaintenanceWindow {
        /// When a disruptive step may start next (absent: the schedules leave no time).
        #[serde(skip_serializing_if = "Option::is_none")]
        opens: Option<Timestamp>,
        /// The schedule of the deny window that holds it; absent when no allow window is open.
        #[serde(skip_serializing_if = "Option::is_none")]
        deny: Option<String>,
        /// The time zone the schedules are read in, when it is not UTC.
        #[serde(skip_serializing_if = "Option::is_none")]
        time_zone: Option<String>,
        /// The step's measured duration does not fit where it would start now.
        #[serde(skip_serializing_if = "Option::is_none")]
        fit: Option<WindowFit>,
    },
    /// The cluster is suspended (in Git or at runtime): no step starts until it is resumed.
    Suspended(super::Suspension),
    /// An earlier stage of a staged rollout (`rollout.after`): a cluster this one follows has
    /// not converged at this revision, is soaking, or went Blocked or unhealthy.
    #[serde(rename_all = "camelCase")]
    Stage {
        /// The cluster followed.
        cluster: String,
        /// When its soak ends, when it is soaking.
        #[serde(skip_serializing_if = "Option::is_none")]
        until: Option<Timestamp>,
        /// Why it holds this cluster, in words.
        why: String,
    },
    /// A CNI, on a cluster whose file says `cni: none`: its nodes report
    /// `NetworkPluginNotReady` until Flux installs one.
    #[serde(rename_all = "camelCase")]
    Cni {
        /// Nodes that report `NetworkPluginNotReady` (and were never Ready).
        nodes: usize,
        /// The Flux Secret (`namespace/name`) that holds the cluster's kubeconfig, when the
        /// cluster delivers to Flux.
        #[serde(skip_serializing_if = "Option::is_none")]
        flux: Option<String>,
    },
    /// New workers, before a removal may leave fewer than `rollout.minWorkers` (rule 3).
    #[serde(rename_all = "camelCase")]
    NewWorker {
        /// Ready, schedulable workers now.
        ready: u32,
        /// `rollout.minWorkers`.
        minimum: u32,
    },
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Resource::ProxmoxTask { upid, task } => write!(f, "Proxmox task {task} {upid}"),
            Resource::Vm {
                vm_id,
                name,
                condition,
            } => write!(f, "VM {vm_id} ({name}): {condition}"),
            Resource::Node { name, condition } => write!(f, "node {name}: {condition}"),
            Resource::Pod { pod, node } => {
                write!(f, "pod {}/{} on {node}", pod.namespace, pod.name)?;
                match &pod.reason {
                    Some(reason) => write!(f, " ({reason})"),
                    None => Ok(()),
                }
            }
            Resource::ApiEndpoint { endpoint } => {
                write!(f, "API endpoint {endpoint}: not answering")
            }
            Resource::MaintenanceWindow { fit: Some(fit), .. } => {
                write!(f, "maintenance window: {fit}")?;
                match self.window_opens_local() {
                    Some(when) => write!(f, ": waits until {when}"),
                    None => f.write_str(": it never starts"),
                }
            }
            Resource::MaintenanceWindow {
                opens,
                deny: None,
                time_zone,
                fit: None,
            } => match (opens, time_zone) {
                (Some(opens), None) => write!(f, "maintenance window (opens {opens})"),
                (Some(opens), Some(zone)) => {
                    write!(f, "maintenance window (opens {})", local_time(*opens, zone))
                }
                (None, _) => write!(f, "maintenance window (never opens again)"),
            },
            Resource::MaintenanceWindow {
                opens,
                deny: Some(deny),
                time_zone,
                fit: None,
            } => match opens {
                Some(opens) => write!(
                    f,
                    "deny window `{deny}` (until {})",
                    local_time(*opens, time_zone.as_deref().unwrap_or("UTC"))
                ),
                None => write!(f, "deny window `{deny}` (no time left to start)"),
            },
            Resource::Suspended(suspension) => write!(f, "{suspension}"),
            Resource::Stage { cluster, why, .. } => write!(f, "stage {cluster}: {why}"),
            Resource::Cni { nodes, flux } => {
                write!(f, "a CNI: {nodes} nodes report NetworkPluginNotReady")?;
                match flux {
                    Some(secret) => write!(f, " (Flux installs it from {secret})"),
                    None => f.write_str(" (no delivery.flux: install one yourself)"),
                }
            }
            Resource::NewWorker { ready, minimum } => write!(
                f,
                "a new worker ({ready} Ready, schedulable; rollout.minWorkers {minimum})"
            ),
        }
    }
}

impl Resource {
    /// For a step a maintenance or deny window, an earlier stage or a suspension holds, how,
    /// in words for a
    /// preview: "suspended: no step starts (suspended in Git (spec.suspend: true))", "held for
    /// the maintenance window (Sat 2026-05-02 01:00 UTC)", "held by deny window `0 0 20 12 *`
    /// until Sun 2027-01-03 00:00 Europe/Rome"; `None` for any other resource.
    pub fn hold_phrase(&self) -> Option<String> {
        if let Resource::Suspended(suspension) = self {
            return Some(format!("suspended: no step starts ({suspension})"));
        }
        if let Resource::Stage { .. } = self {
            return Some(format!("held for the earlier {self}"));
        }
        let Resource::MaintenanceWindow { deny, fit, .. } = self else {
            return None;
        };
        let when = self.window_opens_local();
        if let Some(fit) = fit {
            return Some(match when {
                Some(when) => format!("held for a window it fits in ({fit}): starts {when}"),
                None => format!("held: {fit}, so it never starts"),
            });
        }
        Some(match (deny, when) {
            (None, Some(when)) => format!("held for the maintenance window ({when})"),
            (None, None) => "held for a maintenance window that never opens again".to_owned(),
            (Some(deny), Some(when)) => format!("held by deny window `{deny}` until {when}"),
            (Some(deny), None) => {
                format!("held by deny window `{deny}`, which leaves no time to start")
            }
        })
    }
}

impl Resource {
    /// For a step a maintenance or deny window holds, when it may start, on the clock of the
    /// schedules' zone: `Sat 2026-05-02 01:00 UTC`; `None` for any other resource, or when
    /// the schedules leave no time.
    pub fn window_opens_local(&self) -> Option<String> {
        let Resource::MaintenanceWindow {
            opens: Some(opens),
            time_zone,
            ..
        } = self
        else {
            return None;
        };
        let zone = time_zone.as_deref().unwrap_or("UTC");
        Some(format!("{} {zone}", day_and_time(*opens, zone)))
    }
}

/// Why a step whose duration was measured does not start in the window open now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WindowFit {
    /// The step, as `drain of prod-w-2`.
    pub step: String,
    /// The 90th percentile of its action's measured steps, in seconds.
    pub needs_seconds: u64,
    /// How many steps that was measured over.
    pub samples: u32,
    /// What it does not fit in.
    pub short: Shortfall,
}

/// What a measured step does not fit in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Shortfall {
    /// What is left of the open allow window.
    #[serde(rename_all = "camelCase")]
    WindowLeft {
        /// Seconds left of it.
        left_seconds: u64,
    },
    /// A deny window opens before the step would end.
    #[serde(rename_all = "camelCase")]
    DenyAhead {
        /// Its schedule.
        schedule: String,
        /// When it opens.
        starts: Timestamp,
    },
    /// Every allow window is shorter than the step.
    #[serde(rename_all = "camelCase")]
    NoWindowLongEnough {
        /// How long the longest one lasts, in seconds.
        longest_seconds: u64,
    },
}

impl fmt::Display for WindowFit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} needs {} (p90 of {} run(s)); ",
            self.step,
            seconds(self.needs_seconds),
            self.samples
        )?;
        match &self.short {
            Shortfall::WindowLeft { left_seconds } => {
                write!(f, "{} of the window left", seconds(*left_seconds))
            }
            Shortfall::DenyAhead { schedule, .. } => {
                write!(f, "deny window `{schedule}` opens before it would end")
            }
            Shortfall::NoWindowLongEnough { longest_seconds } => write!(
                f,
                "no maintenance window is that long (the longest lasts {}): lengthen one",
                seconds(*longest_seconds)
            ),
        }
    }
}

/// `3m`, `1h 5m 30s`.
pub(crate) fn seconds(seconds: u64) -> String {
    humantime::format_duration(std::time::Duration::from_secs(seconds)).to_string()
}

/// `at` on the wall clock of `zone` (a name validation accepted), with the zone:
/// `2027-01-03 00:00 Europe/Rome`.
fn local_time(at: Timestamp, zone: &str) -> String {
    let wall = at
        .to_zoned(time_zone(zone))
        .strftime("%Y-%m-%d %H:%M")
        .to_string();
    format!("{wall} {zone}")
}

/// `at` with its weekday on the wall clock of `zone`: `Sun 2027-01-03 00:00`.
pub(crate) fn day_and_time(at: Timestamp, zone: &str) -> String {
    at.to_zoned(time_zone(zone))
        .strftime("%a %Y-%m-%d %H:%M")
        .to_string()
}

fn time_zone(name: &str) -> jiff::tz::TimeZone {
    // Names come from validated specs; UTC stands in for any other, as it did before zones.
    crate::spec::values::bundled_time_zones()
        .get(name)
        .unwrap_or(jiff::tz::TimeZone::UTC)
}
