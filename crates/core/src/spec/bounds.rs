//! Upper bounds on every count and size a repository declares. A file comes from whoever can
//! push or open a pull request: without bounds, `replicas: 4000000000` validated and then made
//! the planner allocate for four billion machines, aborting the daemon. The bounds themselves,
//! with their reasons, are in `limits.rs` (the JSON Schemas state them too).

use super::diagnostic::{Diagnostic, SourceFile};
pub use super::limits::*;
use super::types::{ClusterSpec, Machine};

const SPLIT_HINT: &str = "split the machines over several clusters";

/// The bounds of one cluster's counts and sizes.
pub fn cluster(out: &mut Vec<Diagnostic>, spec: &ClusterSpec, file: &SourceFile) {
    let control_planes = spec.control_plane.replicas;
    if control_planes > MAX_CONTROL_PLANES {
        out.push(
            file.error(
                "spec.controlPlane.replicas",
                format!("{control_planes} control planes: at most {MAX_CONTROL_PLANES}"),
            )
            .with_hint("use 3 or 5: etcd (and a K3s datastore) gains nothing from more"),
        );
    }
    if spec.workers.len() > MAX_POOLS {
        out.push(
            file.error(
                "spec.workers",
                format!("{} worker pools: at most {MAX_POOLS}", spec.workers.len()),
            )
            .with_hint("merge pools whose machines are alike"),
        );
    }
    for (index, pool) in spec.workers.iter().enumerate() {
        if pool.replicas > MAX_MACHINES_PER_CLUSTER {
            out.push(
                file.error(
                    &format!("spec.workers[{index}].replicas"),
                    format!(
                        "{} workers: a cluster has at most {MAX_MACHINES_PER_CLUSTER} machines",
                        pool.replicas
                    ),
                )
                .with_hint(SPLIT_HINT),
            );
        }
    }
    let total = machines(spec);
    let pools_in_bounds = spec
        .workers
        .iter()
        .all(|pool| pool.replicas <= MAX_MACHINES_PER_CLUSTER);
    if total > u64::from(MAX_MACHINES_PER_CLUSTER) && pools_in_bounds {
        out.push(
            file.error(
                "spec.workers",
                format!("{total} machines in all: a cluster has at most {MAX_MACHINES_PER_CLUSTER} (Kubernetes supports 5,000 nodes)"),
            )
            .with_hint(SPLIT_HINT),
        );
    }
    let surge = spec.rollout.max_surge;
    if surge > MAX_SURGE {
        out.push(
            file.error(
                "spec.rollout.maxSurge",
                format!("{surge} extra VMs: at most {MAX_SURGE}, the machines a cluster may have"),
            )
            .with_hint("the default is 1; a larger surge overlaps replacements"),
        );
    }
    let reserved = spec.network.reserved.len();
    if reserved > MAX_RESERVED_RANGES {
        out.push(
            file.error(
                "spec.network.reserved",
                format!("{reserved} ranges: at most {MAX_RESERVED_RANGES}"),
            )
            .with_hint("write neighbouring addresses as one FIRST-LAST range or a CIDR"),
        );
    }
}

/// Machines a cluster declares (control planes and workers), without overflow.
pub fn machines(spec: &ClusterSpec) -> u64 {
    let workers: u64 = spec.workers.iter().map(|p| u64::from(p.replicas)).sum();
    workers + u64::from(spec.control_plane.replicas)
}

/// Whether a placement list is short enough for its entries to be checked one by one.
pub fn placement_in_bounds(machine: &Machine) -> bool {
    machine.placement.len() <= MAX_PLACEMENT
}

/// The bounds of one VM's size, at `path` (`spec.workers[0].machine`).
pub fn machine(out: &mut Vec<Diagnostic>, machine: &Machine, path: &str, file: &SourceFile) {
    let sizes = [
        (
            "cores",
            machine.cores,
            MAX_CORES,
            "vCPUs",
            "Proxmox limits a VM to 128 CPUs",
        ),
        (
            "memoryMiB",
            machine.memory_mib,
            MAX_MEMORY_MIB,
            "MiB",
            "no Proxmox host gives one VM more than 4 TiB (4194304 MiB)",
        ),
        (
            "diskGiB",
            machine.disk_gib,
            MAX_DISK_GIB,
            "GiB",
            "a node's boot disk holds images and logs: 50 GiB is usual",
        ),
    ];
    for (field, value, max, unit, hint) in sizes {
        if value > max {
            out.push(
                file.error(
                    &format!("{path}.{field}"),
                    format!("{value} {unit}: at most {max}"),
                )
                .with_hint(hint),
            );
        }
    }
    if !placement_in_bounds(machine) {
        out.push(
            file.error(
                &format!("{path}.placement"),
                format!(
                    "{} Proxmox nodes: at most {MAX_PLACEMENT}",
                    machine.placement.len()
                ),
            )
            .with_hint("list each Proxmox node once"),
        );
    }
}

/// The bounds of a whole repository: the cluster files past [`MAX_CLUSTERS`], and those that
/// bring the machines declared past [`MAX_MACHINES_PER_REPOSITORY`], counted in path order over
/// the files valid so far (`valid`), are refused. Returns each finding with its file's index.
pub fn repository<'a>(
    clusters: impl IntoIterator<Item = (&'a ClusterSpec, &'a SourceFile)>,
    valid: &[bool],
) -> Vec<(usize, Diagnostic)> {
    let mut out = Vec::new();
    let (mut counted, mut machines_so_far) = (0usize, 0u64);
    for (index, (spec, file)) in clusters.into_iter().enumerate() {
        if !valid[index] {
            continue;
        }
        let declared = machines(spec);
        if counted == MAX_CLUSTERS {
            out.push((
                index,
                Diagnostic::file_error(
                    &file.name,
                    format!("the repository declares more than {MAX_CLUSTERS} clusters: this one is not planned"),
                )
                .with_hint("split the fleet over several repositories, each with its own capstan"),
            ));
            continue;
        }
        if machines_so_far + declared > MAX_MACHINES_PER_REPOSITORY {
            out.push((
                index,
                file.error(
                    "spec.workers",
                    format!(
                        "with this cluster's {declared} machines, the clusters up to this file declare {} in all: a repository holds at most {MAX_MACHINES_PER_REPOSITORY}, so it is not planned",
                        machines_so_far + declared
                    ),
                )
                .with_hint("split the fleet over several repositories, each with its own capstan"),
            ));
            continue;
        }
        counted += 1;
        machines_so_far += declared;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::{RepoFiles, SourceText, load};
    use super::*;

    fn example(path: &str, text: &str) -> SourceText {
        SourceText {
            path: path.to_owned(),
            text: text.to_owned(),
        }
    }

    const FLEET: &str = include_str!("../../../../examples-repo/capstan.yaml");
    const PROD: &str = include_str!("../../../../examples-repo/clusters/prod.yaml");

    /// The errors of the example `prod` cluster with `from` replaced by `to`, as
    /// `field: message` lines.
    fn errors_with(from: &str, to: &str) -> Vec<String> {
        assert!(PROD.contains(from), "the example changed: {from}");
        let files = RepoFiles {
            fleet: example("capstan.yaml", FLEET),
            clusters: vec![example("clusters/prod.yaml", &PROD.replacen(from, to, 1))],
        };
        let loaded = load(&files);
        assert!(
            loaded
                .desired
                .as_ref()
                .is_some_and(|d| d.clusters.is_empty()),
            "the cluster must be refused: {}",
            loaded.diagnostics
        );
        loaded
            .diagnostics
            .0
            .iter()
            .filter(|d| d.is_error())
            .map(|d| format!("{}: {}", d.field.as_deref().unwrap_or(""), d.message))
            .collect()
    }

    #[test]
    fn a_count_or_size_past_its_bound_is_refused_with_its_field() {
        let cases = [
            (
                "      replicas: 3",
                "      replicas: 4000000000",
                "spec.workers[0].replicas: 4000000000 workers: a cluster has at most 5000 machines",
            ),
            (
                "    replicas: 1 ",
                "    replicas: 9 ",
                "spec.controlPlane.replicas: 9 control planes: at most 7",
            ),
            (
                "cores: 4, memoryMiB: 8192, diskGiB: 50",
                "cores: 4000, memoryMiB: 8192, diskGiB: 50",
                "spec.workers[0].machine.cores: 4000 vCPUs: at most 128",
            ),
            (
                "cores: 4, memoryMiB: 8192, diskGiB: 50",
                "cores: 4, memoryMiB: 4294967295, diskGiB: 50",
                "spec.workers[0].machine.memoryMiB: 4294967295 MiB: at most 4194304",
            ),
            (
                "cores: 2, memoryMiB: 6144, diskGiB: 50",
                "cores: 2, memoryMiB: 6144, diskGiB: 100000",
                "spec.controlPlane.machine.diskGiB: 100000 GiB: at most 65536",
            ),
            (
                "    minWorkers: 2 ",
                "    maxSurge: 1000000\n    minWorkers: 2 ",
                "spec.rollout.maxSurge: 1000000 extra VMs: at most 5000, the machines a cluster may have",
            ),
        ];
        for (from, to, expected) in cases {
            let errors = errors_with(from, to);
            assert_eq!(errors, [expected], "{to}");
        }
    }

    #[test]
    fn pools_in_bounds_that_add_up_past_the_cluster_bound_are_refused() {
        let pools = "    - pool: a\n      replicas: 3000\n      machine: {template: t, cores: 4, memoryMiB: 8192, placement: [pve1, pve2]}\n    - pool: b\n      replicas: 3000\n      machine: {template: t, cores: 4, memoryMiB: 8192, placement: [pve1, pve2]}\n  rollout:";
        let (start, end) = (
            PROD.find("  workers:\n").expect("workers"),
            PROD.find("  rollout:").expect("rollout"),
        );
        let from = &PROD[start..end + "  rollout:".len()];
        let errors = errors_with(from, &format!("  workers:\n{pools}"));
        assert_eq!(
            errors,
            [
                "spec.workers: 6001 machines in all: a cluster has at most 5000 (Kubernetes supports 5,000 nodes)"
            ]
        );
    }

    #[test]
    fn long_lists_are_refused_whole_without_a_finding_per_entry() {
        let placement = vec!["Not_A_Node"; 20_000].join(", ");
        let errors = errors_with(
            "placement: [pve1, pve2]",
            &format!("placement: [{placement}]"),
        );
        assert_eq!(
            errors,
            ["spec.workers[0].machine.placement: 20000 Proxmox nodes: at most 100"]
        );
        let reserved = vec!["\"10.0.0.1\""; 101].join(", ");
        let errors = errors_with(
            "reserved: [\"192.168.1.170-192.168.1.189\"]",
            &format!("reserved: [{reserved}]"),
        );
        assert_eq!(errors, ["spec.network.reserved: 101 ranges: at most 100"]);
    }

    #[test]
    fn clusters_past_the_repository_bounds_are_refused_in_path_order() {
        let files = RepoFiles {
            fleet: example("capstan.yaml", FLEET),
            clusters: vec![example("clusters/prod.yaml", PROD)],
        };
        let loaded = load(&files);
        let cluster = &loaded.desired.expect("valid").clusters["prod"];
        let file = SourceFile::new("clusters/prod.yaml", PROD);
        let checked = vec![(&cluster.spec, &file); MAX_CLUSTERS + 2];
        let mut valid = vec![true; checked.len()];
        valid[3] = false;
        let refused: Vec<usize> = repository(checked, &valid)
            .into_iter()
            .map(|(index, diagnostic)| {
                assert!(diagnostic.message.contains("more than 1000 clusters"));
                index
            })
            .collect();
        assert_eq!(
            refused,
            [MAX_CLUSTERS + 1],
            "an invalid file is not counted"
        );

        let mut big = cluster.clone();
        big.spec.workers[0].replicas = 4_999;
        let findings = repository(vec![(&big.spec, &file); 5], &[true; 5]);
        assert_eq!(findings.len(), 1);
        let (index, diagnostic) = &findings[0];
        assert_eq!(*index, 4, "the fifth cluster of 5,000 machines");
        assert_eq!(
            diagnostic.to_string(),
            "clusters/prod.yaml:32:3: error: spec.workers: with this cluster's 5000 machines, the clusters up to this file declare 25000 in all: a repository holds at most 20000, so it is not planned\n  hint: split the fleet over several repositories, each with its own capstan"
        );
    }
}
