//! The upper bounds of what a repository may declare, each with its reason: what an operator
//! could want at the most. Validation refuses past them (`bounds.rs`) and the JSON Schemas
//! state them (`types.rs`).

/// Control planes of one cluster. etcd's own guidance stops at seven members (each one slows
/// every write); K3s servers share one datastore, so more add load and no availability.
pub const MAX_CONTROL_PLANES: u32 = 7;
/// Machines (control planes and workers) of one cluster: Kubernetes supports clusters of up to
/// 5,000 nodes (kubernetes.io, "Considerations for large clusters").
pub const MAX_MACHINES_PER_CLUSTER: u32 = 5_000;
/// Worker pools of one cluster: each is a VM name part and a rollout of its own; a hundred is
/// far beyond any cluster's machine classes.
pub const MAX_POOLS: usize = 100;
/// Extra VMs during a replacement (`rollout.maxSurge`), and the `rollout.minWorkers` floor
/// (which the workers must reach anyway): neither means anything beyond the machines a
/// cluster may have.
pub const MAX_SURGE: u32 = MAX_MACHINES_PER_CLUSTER;
/// vCPUs of one VM: Proxmox's own `cpulimit` stops at 128 CPUs per VM.
pub const MAX_CORES: u32 = 128;
/// Memory of one VM, in MiB (4 TiB): more than any Proxmox host can give one guest.
pub const MAX_MEMORY_MIB: u32 = 4 * 1024 * 1024;
/// Boot disk of one VM, in GiB (64 TiB): a node's disk holds images and logs; beyond this a
/// size is a typo.
pub const MAX_DISK_GIB: u32 = 64 * 1024;
/// Proxmox nodes in one `placement`: Proxmox VE clusters run in the dozens of nodes.
pub const MAX_PLACEMENT: usize = 100;
/// Allow windows, and deny windows, of one cluster's `maintenance`: each is a cron schedule
/// the planner reads at every plan; a week's worth of distinct windows fits well within it.
pub const MAX_WINDOWS: usize = 32;
/// Ranges in `network.reserved`.
pub const MAX_RESERVED_RANGES: usize = 100;
/// DNS servers of a node with a static address: the resolver reads at most three
/// (`MAXNS` in glibc's resolv.h).
pub const MAX_NAMESERVERS: usize = 3;
/// Cluster files in one repository: the daemon observes every cluster at each pass and keeps
/// a status file for each; a larger fleet is split over several repositories and daemons.
pub const MAX_CLUSTERS: usize = 1_000;
/// Machines declared by all clusters of a repository: planning is linear in machines, and this
/// keeps a whole fleet's plan (every machine replaced at once) within tens of megabytes.
pub const MAX_MACHINES_PER_REPOSITORY: u64 = 20_000;
/// Notification providers of a fleet: each has a queue and a task in the daemon; a team's
/// channels, a pager and an Alertmanager or two are a handful.
pub const MAX_NOTIFICATION_PROVIDERS: usize = 20;
/// Alerts (event selections) of a fleet: each event is matched against every one.
pub const MAX_ALERTS: usize = 50;
/// Entries of one alert's `providers`, `clusters` or `kinds` list: a fleet has at most
/// `MAX_CLUSTERS` clusters to name.
pub const MAX_ALERT_SELECTORS: usize = MAX_CLUSTERS;
/// Clusters one cluster follows (`rollout.after`): a stage waits on each of them at every plan;
/// a rollout of a few stages names a handful.
pub const MAX_FOLLOWED: usize = 32;
