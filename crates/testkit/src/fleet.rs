//! Fleet and cluster files as a repository holds them (YAML text, what users write), built
//! from a few choices: [`FleetYaml`] for `capstan.yaml`, [`ClusterYaml`] for a cluster the lab
//! can build. For typed values (a `Cluster` to plan with) use core's fixtures,
//! `capstan_core::plan::fixtures` (the `fixtures` feature of `capstan-core`).

/// `capstan.yaml` of the test repositories: one Proxmox connection `homelab`, the management
/// cluster `management`, the approved minors, polled every minute.
#[derive(Debug, Clone)]
pub struct FleetYaml {
    approved: Vec<String>,
    prune: Option<bool>,
    status: Option<String>,
    extra: String,
    poll_interval: String,
}

impl Default for FleetYaml {
    fn default() -> Self {
        FleetYaml::new()
    }
}

impl FleetYaml {
    /// Approving 1.36, nothing pruned, no status settings, `pollInterval: 1m`.
    pub fn new() -> FleetYaml {
        FleetYaml {
            approved: vec!["1.36".to_owned()],
            prune: None,
            status: None,
            extra: String::new(),
            poll_interval: "1m".to_owned(),
        }
    }

    /// Approves these minors (instead of 1.36 alone).
    #[must_use]
    pub fn approved(mut self, minors: &[&str]) -> FleetYaml {
        self.approved = minors.iter().map(|m| (*m).to_owned()).collect();
        self
    }

    /// Says `prune:` explicitly.
    #[must_use]
    pub fn prune(mut self, prune: bool) -> FleetYaml {
        self.prune = Some(prune);
        self
    }

    /// Commits the status to `capstan-status` as the Platform Team, with `[skip ci]`.
    #[must_use]
    pub fn status_branch(mut self) -> FleetYaml {
        self.status = Some(
            "status:\n  branch: capstan-status\n  author: Platform Team <platform@example.com>\n  skipCI: true\n"
                .to_owned(),
        );
        self
    }

    /// Adds a top-level section (e.g. a MariaDB's `datastores:`), ending with a newline.
    #[must_use]
    pub fn section(mut self, yaml: &str) -> FleetYaml {
        self.extra.push_str(yaml);
        self
    }

    /// Polls the remote every `interval` (`2s`, `5m`).
    #[must_use]
    pub fn poll_interval(mut self, interval: &str) -> FleetYaml {
        interval.clone_into(&mut self.poll_interval);
        self
    }

    /// The file's text.
    pub fn render(&self) -> String {
        let minors: Vec<String> = self.approved.iter().map(|m| format!("\"{m}\"")).collect();
        let mut text = format!(
            "apiVersion: capstan.dev/v1alpha1
kind: Fleet
clustersDir: clusters
proxmox:
  homelab:
    url: https://pve1.lab.example:8006
    tokenId: capstan@pve!reconciler
    tokenFrom: {{env: CAPSTAN_PROXMOX_HOMELAB_TOKEN}}
managementClusters:
  management:
    kubeconfigFrom: {{file: /etc/capstan/management.kubeconfig}}
approvedMinors: [{}]
",
            minors.join(", ")
        );
        if let Some(prune) = self.prune {
            text.push_str(&format!("prune: {prune}\n"));
        }
        if let Some(status) = &self.status {
            text.push_str(status);
        }
        text.push_str(&self.extra);
        text.push_str(&format!("pollInterval: {}\n", self.poll_interval));
        text
    }
}

/// `capstan.yaml` approving `approved`, with `prune:` said.
pub fn fleet_yaml(approved: &[&str], prune: bool) -> String {
    FleetYaml::new().approved(approved).prune(prune).render()
}

/// A cluster file the lab can build: one kubeadm control plane on pve1, one pool `general` of
/// workers over pve1–3 (2 cores, 4 GiB each), addresses 170–189 reserved, at least 2 workers
/// serving, short drain and join timeouts (the lab is fast), delivered to Flux.
#[derive(Debug, Clone)]
pub struct ClusterYaml {
    name: String,
    address_octet: u8,
    version: String,
    workers: u32,
    template: String,
}

impl ClusterYaml {
    /// `name` at 192.168.1.60, 1.36.2, 2 workers on `debian13-k8s`.
    pub fn lab(name: &str) -> ClusterYaml {
        ClusterYaml {
            name: name.to_owned(),
            address_octet: 60,
            version: "1.36.2".to_owned(),
            workers: 2,
            template: "debian13-k8s".to_owned(),
        }
    }

    /// The endpoint's address is 192.168.1.`octet`.
    #[must_use]
    pub fn address(mut self, octet: u8) -> ClusterYaml {
        self.address_octet = octet;
        self
    }

    /// The Kubernetes version.
    #[must_use]
    pub fn version(mut self, version: &str) -> ClusterYaml {
        version.clone_into(&mut self.version);
        self
    }

    /// How many workers.
    #[must_use]
    pub fn workers(mut self, workers: u32) -> ClusterYaml {
        self.workers = workers;
        self
    }

    /// The workers' template (the control plane stays on `debian13-k8s`).
    #[must_use]
    pub fn template(mut self, template: &str) -> ClusterYaml {
        template.clone_into(&mut self.template);
        self
    }

    /// The file's text.
    pub fn render(&self) -> String {
        let ClusterYaml {
            name,
            address_octet,
            version,
            workers,
            template,
        } = self;
        format!(
            "apiVersion: capstan.dev/v1alpha1
kind: Cluster
metadata: {{name: {name}}}
spec:
  proxmox: homelab
  kubernetes: {{version: {version}}}
  endpoint: {{host: k8s-{name}.lab.example, address: 192.168.1.{address_octet}}}
  network: {{nodes: 192.168.1.0/24, reserved: [\"192.168.1.170-192.168.1.189\"]}}
  controlPlane:
    replicas: 1
    machine: {{template: debian13-k8s, cores: 2, memoryMiB: 4096, placement: [pve1]}}
  workers:
    - pool: general
      replicas: {workers}
      machine: {{template: {template}, cores: 2, memoryMiB: 4096, placement: [pve1, pve2, pve3]}}
  rollout: {{minWorkers: 2, drainTimeout: 4s, joinTimeout: 2m}}
  delivery:
    flux: {{cluster: management}}
"
        )
    }
}

/// A lab cluster (see [`ClusterYaml`]): `workers` workers on `template`, at `version`, its
/// endpoint at 192.168.1.`address_octet`.
pub fn cluster_yaml(
    name: &str,
    address_octet: u8,
    version: &str,
    workers: u32,
    template: &str,
) -> String {
    ClusterYaml::lab(name)
        .address(address_octet)
        .version(version)
        .workers(workers)
        .template(template)
        .render()
}

/// A lab cluster with `workers` workers, at 192.168.1.60, 1.36.2.
pub fn lab_cluster(name: &str, workers: u32) -> String {
    ClusterYaml::lab(name).workers(workers).render()
}

/// A lab K3s cluster: one server (embedded SQLite) on pve1 and one agent (pool `agents`) on
/// pve2, at the lab's K3s release, its endpoint at 192.168.1.`octet`.
pub fn k3s_lab_cluster(name: &str, octet: u8) -> String {
    format!(
        "apiVersion: capstan.dev/v1alpha1
kind: Cluster
metadata: {{name: {name}}}
spec:
  proxmox: homelab
  kubernetes: {{distribution: k3s, version: {release}}}
  endpoint: {{host: k8s-{name}.lab.example, address: 192.168.1.{octet}}}
  network: {{nodes: 192.168.1.0/24, reserved: [\"192.168.1.170-192.168.1.189\"]}}
  controlPlane:
    replicas: 1
    machine: {{template: debian13-k3s, cores: 2, memoryMiB: 4096, cpu: host, placement: [pve1]}}
  workers:
    - pool: agents
      replicas: 1
      machine: {{template: debian13-k3s, cores: 2, memoryMiB: 4096, cpu: host, placement: [pve2]}}
  rollout: {{minWorkers: 1, drainTimeout: 4s, joinTimeout: 2m}}
  delivery:
    flux: {{cluster: management}}
",
        release = capstan_lab::world::DEFAULT_K3S_RELEASE
    )
}

#[cfg(test)]
mod tests {
    use capstan_core::spec::{self, Cluster, RepoFiles, SourceText};

    use super::*;

    fn load(fleet: &str, cluster: &str) -> spec::Desired {
        let files = RepoFiles {
            fleet: SourceText {
                path: "capstan.yaml".to_owned(),
                text: fleet.to_owned(),
            },
            clusters: vec![SourceText {
                path: "clusters/prod.yaml".to_owned(),
                text: cluster.to_owned(),
            }],
        };
        let loaded = spec::load(&files);
        assert!(loaded.is_valid(), "{:?}", loaded.diagnostics);
        loaded.desired.expect("a fleet")
    }

    #[test]
    fn a_lab_cluster_is_the_cluster_cores_fixtures_describe_with_the_labs_machines() {
        let desired = load(
            &FleetYaml::new().approved(&["1.36", "1.37"]).render(),
            &ClusterYaml::lab("prod")
                .workers(3)
                .version("1.37.0")
                .template("debian13-k8s-v2")
                .render(),
        );
        let mut expected = Cluster::test("prod")
            .with_workers("general", 3)
            .with_version("1.37.0")
            .with_min_workers(2)
            .with_template("general", "debian13-k8s-v2");
        let lab_machine = |template: &str, placement: &[&str]| spec::Machine {
            memory_mib: 4096,
            cores: 2,
            placement: placement.iter().map(|p| (*p).to_owned()).collect(),
            ..capstan_core::plan::fixtures::machine(template, 2, 4096)
        };
        expected.spec.control_plane.machine = lab_machine("debian13-k8s", &["pve1"]);
        expected.spec.workers[0].machine =
            lab_machine("debian13-k8s-v2", &["pve1", "pve2", "pve3"]);
        expected.spec.endpoint.address = "192.168.1.60".parse().expect("an address");
        let actual = &desired.clusters["prod"];
        expected.spec.network.reserved = actual.spec.network.reserved.clone();
        expected.spec.rollout.drain_timeout = actual.spec.rollout.drain_timeout;
        expected.spec.rollout.join_timeout = actual.spec.rollout.join_timeout;
        assert_eq!(actual, &expected);
        assert_eq!(actual.spec.network.reserved.len(), 1);
        assert_eq!(desired.fleet.approved_minors.len(), 2);
    }

    #[test]
    fn the_fleet_file_says_what_was_chosen() {
        let text = FleetYaml::new()
            .prune(true)
            .status_branch()
            .poll_interval("2s")
            .render();
        let fleet = load(&text, &lab_cluster("prod", 2)).fleet;
        assert!(fleet.prune);
        assert_eq!(fleet.status.branch, "capstan-status");
        assert_eq!(fleet.status.author, "Platform Team <platform@example.com>");
        assert!(fleet.status.skip_ci);
        assert_eq!(fleet.poll_interval.to_string(), "2s");
    }
}
