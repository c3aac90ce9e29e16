//! The rules a parsed repository must follow beyond its types: names, networks, versions, the
//! endpoint, replica counts and references between files. Each rule adds findings and never
//! stops at the first, so one run reports every error of a repository.

use std::collections::BTreeMap;
use std::net::IpAddr;

use super::diagnostic::{Diagnostic, SourceFile};
use super::types::{
    Cluster, ClusterSpec, DatastoreChoice, DatastoreServer, Fleet, RECORDS_NAMESPACE, SecretSource,
};
use super::values::{is_dns1123_label, is_dns1123_subdomain};

/// Prefix of every VM capstan creates; the rest is `<cluster>-<pool>-<5 chars>`.
pub const VM_NAME_PREFIX: &str = "capstan-";
/// Pool part of control-plane VM names, so no worker pool may use it.
pub const CONTROL_PLANE_POOL: &str = "cp";
/// Length of the random suffix of a VM name, plus its dash.
const VM_NAME_SUFFIX_LEN: usize = 6;
/// Hostnames (and so VM and Node names) are DNS labels.
const MAX_VM_NAME_LEN: usize = 63;
/// kubeadm's preflight refuses a control plane with fewer CPUs (`NumCPU`).
const MIN_CONTROL_PLANE_CORES: u32 = 2;
/// kubeadm's preflight refuses a control plane with less memory (`Mem`, 1700 MB).
const MIN_CONTROL_PLANE_MEMORY_MIB: u32 = 1700;
/// Certificates kubeadm issues last a year; renewing earlier than that renews forever.
const CERTIFICATE_LIFETIME_DAYS: u64 = 365;

/// Whether the VMs of `pool` in `cluster` get names a hostname allows:
/// `capstan-<cluster>-<pool>-xxxxx`, at most 63 characters.
pub fn fits_vm_name(cluster: &str, pool: &str) -> bool {
    vm_name_length(cluster, pool) <= MAX_VM_NAME_LEN
}

fn vm_name_length(cluster: &str, pool: &str) -> usize {
    VM_NAME_PREFIX.len() + cluster.len() + 1 + pool.len() + VM_NAME_SUFFIX_LEN
}

/// Rules of `capstan.yaml` alone.
pub fn fleet(fleet: &Fleet, file: &SourceFile) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    if fleet.clusters_dir.is_absolute()
        || fleet
            .clusters_dir
            .components()
            .any(|c| c.as_os_str() == "..")
    {
        out.push(
            file.error("clustersDir", "must be a folder inside the repository")
                .with_hint("write a relative path such as `clusters`"),
        );
    }
    for (name, connection) in &fleet.proxmox {
        let path = format!("proxmox.{name}");
        if !is_dns1123_label(name) {
            out.push(
                file.error(&path, format!("`{name}` is not a valid connection name"))
                    .with_hint(DNS_LABEL_HINT),
            );
        }
        if !connection.url.starts_with("https://") {
            out.push(
                file.error(
                    &format!("{path}.url"),
                    format!("`{}` is not an https:// URL", connection.url),
                )
                .with_hint("Proxmox serves its API over TLS, e.g. `https://pve1.lab.example:8006`"),
            );
        }
        if !is_token_id(&connection.token_id) {
            out.push(
                file.error(&format!("{path}.tokenId"), format!("`{}` is not an API token id", connection.token_id))
                    .with_hint("write USER@REALM!TOKENID, e.g. `capstan@pve!reconciler`; the secret goes in tokenFrom"),
            );
        }
        SecretSource::check_form(
            &mut out,
            file,
            &format!("{path}.tokenFrom"),
            &connection.token_from,
        );
        if connection.tls_fingerprint.is_some() && connection.ca_file.is_some() {
            out.push(
                file.error(&format!("{path}.tlsFingerprint"), "set tlsFingerprint or caFile, not both")
                    .with_hint("pin the fingerprint of a self-signed certificate, or name the CA that signed it"),
            );
        }
        if let Some(fingerprint) = &connection.tls_fingerprint
            && !is_sha256_fingerprint(fingerprint)
        {
            out.push(
                file.error(&format!("{path}.tlsFingerprint"), "not a SHA-256 fingerprint")
                    .with_hint("copy it from Proxmox (Node → System → Certificates): 32 hex bytes like `AB:CD:...`"),
            );
        }
        if let Some(storage) = &connection.iso_storage {
            super::talos::iso_storage(&mut out, file, &format!("{path}.isoStorage"), storage);
        }
    }
    for (name, management) in &fleet.management_clusters {
        let path = format!("managementClusters.{name}");
        if !is_dns1123_label(name) {
            out.push(
                file.error(&path, format!("`{name}` is not a valid cluster name"))
                    .with_hint(DNS_LABEL_HINT),
            );
        }
        SecretSource::check_form(
            &mut out,
            file,
            &format!("{path}.kubeconfigFrom"),
            &management.kubeconfig_from,
        );
    }
    for (name, server) in &fleet.datastores {
        datastore_server(&mut out, file, name, server);
    }
    out.extend(super::notifications::validate(&fleet.notifications, file));
    for (name, provider) in &fleet.notifications.providers {
        let path = format!("notifications.providers.{name}");
        SecretSource::check_form(
            &mut out,
            file,
            &format!("{path}.addressFrom"),
            &provider.address_from,
        );
        if let Some(key) = &provider.signing_key_from {
            SecretSource::check_form(&mut out, file, &format!("{path}.signingKeyFrom"), key);
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    for (index, minor) in fleet.approved_minors.iter().enumerate() {
        if !seen.insert(*minor) {
            out.push(file.warning(
                &format!("approvedMinors[{index}]"),
                format!("{minor} is listed twice"),
            ));
        }
    }
    if super::types::parse_signature(&fleet.status.author).is_none() {
        out.push(
            file.error(
                "status.author",
                format!("`{}` is not `Name <email>`", fleet.status.author),
            )
            .with_hint("e.g. `capstan <capstan@example.com>`, as Git writes an author"),
        );
    }
    if !is_branch_name(&fleet.status.branch) {
        out.push(
            file.error(
                "status.branch",
                format!("`{}` is not a branch name", fleet.status.branch),
            )
            .with_hint(
                "e.g. `capstan-status`: no spaces, `..`, `~`, `^`, `:`, `?`, `*`, `[` or `\\`",
            ),
        );
    }
    if fleet.poll_interval.0.as_secs() < 10 {
        out.push(
            file.warning(
                "pollInterval",
                format!(
                    "polling every {} loads the Git server for little gain",
                    fleet.poll_interval
                ),
            )
            .with_hint("use a webhook for fast reaction and keep the poll at 1m or more"),
        );
    }
    out
}

fn datastore_server(
    out: &mut Vec<Diagnostic>,
    file: &SourceFile,
    name: &str,
    server: &DatastoreServer,
) {
    let path = format!("datastores.{name}");
    if !is_dns1123_label(name) {
        out.push(
            file.error(
                &path,
                format!("`{name}` is not a valid datastore server name"),
            )
            .with_hint(DNS_LABEL_HINT),
        );
    }
    if let Err(why) = server.host_port() {
        out.push(
            file.error(&format!("{path}.url"), why.to_string())
                .with_hint("write where MySQL/MariaDB listens, e.g. `mysql://db.lab.example:3306`; capstan creates each cluster's database and user there"),
        );
    }
    if server.admin_user.trim().is_empty() {
        out.push(
            file.error(&format!("{path}.adminUser"), "the admin user is empty")
                .with_hint("name a user that may create databases and users, e.g. `root`"),
        );
    }
    SecretSource::check_form(
        out,
        file,
        &format!("{path}.adminPasswordFrom"),
        &server.admin_password_from,
    );
}

/// Whether `name` is a branch name Git accepts (`git check-ref-format --branch`, simplified).
fn is_branch_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(['-', '/', '.'])
        && !name.ends_with(['/', '.'])
        && !name.ends_with(".lock")
        && !name.contains("..")
        && !name.contains("//")
        && !name.contains("@{")
        && !name
            .chars()
            .any(|c| c.is_control() || c.is_whitespace() || "~^:?*[\\".contains(c))
}

const DNS_LABEL_HINT: &str = "use lowercase letters, digits and `-`, starting and ending with a letter or digit, at most 63 characters";

fn is_token_id(token_id: &str) -> bool {
    match token_id
        .split_once('@')
        .and_then(|(user, rest)| Some((user, rest.split_once('!')?)))
    {
        Some((user, (realm, token))) => {
            !user.is_empty() && !realm.is_empty() && !token.is_empty() && !token.contains('=')
        }
        None => false,
    }
}

fn is_sha256_fingerprint(text: &str) -> bool {
    let hex: String = text.chars().filter(|c| *c != ':').collect();
    hex.len() == 64 && hex.chars().all(|c| c.is_ascii_hexdigit())
}

/// Rules of one cluster file, given the fleet it belongs to.
pub fn cluster(fleet: &Fleet, cluster: &Cluster, file: &SourceFile) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let name = &cluster.metadata.name;
    let spec = &cluster.spec;
    if !is_dns1123_label(name) {
        out.push(
            file.error("metadata.name", format!("`{name}` is not a DNS-1123 label"))
                .with_hint(DNS_LABEL_HINT),
        );
    }
    references(&mut out, fleet, spec, file);
    version(&mut out, fleet, spec, file);
    super::network_rules::check(&mut out, spec, file);
    super::authentication_rules::check(&mut out, spec, file);
    endpoint(&mut out, spec, file);
    control_plane(&mut out, spec, file);
    workers(&mut out, name, spec, file);
    rollout(&mut out, spec, file);
    super::labels::check(&mut out, spec, file);
    super::bounds::cluster(&mut out, spec, file);
    super::registries::check(&mut out, &spec.kubernetes.registries, file);
    out.extend(crate::patch_findings(name, spec, file));
    if let Some(flux) = &spec.delivery.flux {
        if flux.namespace == RECORDS_NAMESPACE {
            out.push(
                file.error(
                    "spec.delivery.flux.namespace",
                    format!(
                        "`{RECORDS_NAMESPACE}` holds the records capstan keeps (secrets bundles, CA pins, K3s tokens, suspensions): no kubeconfig is delivered there"
                    ),
                )
                .with_hint("deliver to the namespace Flux reads (flux-system, the default) or another of yours"),
            );
        }
        if !is_dns1123_label(&flux.namespace) {
            out.push(
                file.error(
                    "spec.delivery.flux.namespace",
                    format!("`{}` is not a namespace name", flux.namespace),
                )
                .with_hint(DNS_LABEL_HINT),
            );
        }
        let secret = flux.secret_name_for(name);
        if !is_dns1123_subdomain(&secret) {
            out.push(file.error(
                "spec.delivery.flux.secretName",
                format!("`{secret}` is not a valid Secret name"),
            ));
        }
    }
    out
}

fn references(out: &mut Vec<Diagnostic>, fleet: &Fleet, spec: &ClusterSpec, file: &SourceFile) {
    if !fleet.proxmox.contains_key(&spec.proxmox) {
        out.push(
            file.error(
                "spec.proxmox",
                format!(
                    "no Proxmox connection named `{}` in capstan.yaml",
                    spec.proxmox
                ),
            )
            .with_hint(known_names("proxmox", fleet.proxmox.keys())),
        );
    }
    if let Some(flux) = &spec.delivery.flux
        && !fleet.management_clusters.contains_key(&flux.cluster)
    {
        out.push(
            file.error(
                "spec.delivery.flux.cluster",
                format!(
                    "no management cluster named `{}` in capstan.yaml",
                    flux.cluster
                ),
            )
            .with_hint(known_names(
                "managementClusters",
                fleet.management_clusters.keys(),
            )),
        );
    }
}

fn known_names<'a>(section: &str, names: impl Iterator<Item = &'a String>) -> String {
    let names: Vec<&str> = names.map(String::as_str).collect();
    if names.is_empty() {
        format!("add one under `{section}:` in capstan.yaml")
    } else {
        format!(
            "known in `{section}:`: {}; or add it there",
            names.join(", ")
        )
    }
}

fn version(out: &mut Vec<Diagnostic>, fleet: &Fleet, spec: &ClusterSpec, file: &SourceFile) {
    let version = spec.kubernetes.version;
    let minor = version.minor_version();
    if !fleet.approved_minors.contains(&minor) {
        out.push(
            file.error("spec.kubernetes.version", format!("{version}: minor {minor} is not approved"))
                .with_hint(format!(
                    "add \"{minor}\" to approvedMinors in capstan.yaml once every Flux component supports it"
                )),
        );
    }
    super::k3s::cluster(out, fleet, spec, file);
    if let Some(source) = spec
        .kubernetes
        .datastore
        .as_ref()
        .and_then(|d| d.endpoint_from.as_ref())
    {
        SecretSource::check_form(out, file, "spec.kubernetes.datastore.endpointFrom", source);
    }
}

fn endpoint(out: &mut Vec<Diagnostic>, spec: &ClusterSpec, file: &SourceFile) {
    let endpoint = &spec.endpoint;
    let nodes = spec.network.nodes;
    if !is_dns1123_subdomain(&endpoint.host) || !endpoint.host.contains('.') {
        out.push(
            file.error("spec.endpoint.host", format!("`{}` is not a fully qualified DNS name", endpoint.host))
                .with_hint("reserve a DNS record for the cluster, e.g. `k8s-prod.lab.example`; it can never change later"),
        );
    }
    let address = endpoint.address;
    if !nodes.contains(&address) {
        out.push(
            file.error(
                "spec.endpoint.address",
                format!("{address} is outside network.nodes {nodes}"),
            )
            .with_hint(
                "kube-vip announces the endpoint on the VMs' subnet: pick a free address in it",
            ),
        );
    } else if address == nodes.network() || address == nodes.broadcast() {
        out.push(file.error(
            "spec.endpoint.address",
            format!("{address} is the network or broadcast address of {nodes}"),
        ));
    }
    if let Some(range) = spec.network.reserved.iter().find(|r| r.contains(address)) {
        out.push(
            file.error("spec.endpoint.address", format!("{address} lies in the reserved range {range}"))
                .with_hint("the endpoint must not collide with e.g. the MetalLB pool: pick an address outside network.reserved"),
        );
    }
    if endpoint.port == 0 {
        out.push(file.error("spec.endpoint.port", "port 0 is not a port"));
    }
}

fn control_plane(out: &mut Vec<Diagnostic>, spec: &ClusterSpec, file: &SourceFile) {
    let replicas = spec.control_plane.replicas;
    let capabilities = spec.kubernetes.distribution.capabilities();
    let tool = capabilities.tool;
    if replicas == 0 && !capabilities.etcd_quorum {
        out.push(
            file.error(
                "spec.controlPlane.replicas",
                format!("a {tool} cluster needs a server"),
            )
            .with_hint("use 1 server, or 2 or more with an external datastore"),
        );
    } else if capabilities.etcd_quorum && (replicas == 0 || replicas.is_multiple_of(2)) {
        out.push(
            file.error(
                "spec.controlPlane.replicas",
                format!("{replicas} control planes cannot keep etcd quorum"),
            )
            .with_hint("use an odd number: 1, 3 or 5"),
        );
    } else if replicas == 1 {
        out.push(
            file.warning(
                "spec.controlPlane.replicas",
                "a single control plane: the API is down while it is replaced or fails",
            )
            .with_hint("use 3 for clusters that must stay reachable"),
        );
    }
    let machine = &spec.control_plane.machine;
    let path = "spec.controlPlane.machine";
    if machine.cores < MIN_CONTROL_PLANE_CORES {
        out.push(file.error(
            &format!("{path}.cores"),
            format!(
                "{} vCPU: {tool} needs at least {MIN_CONTROL_PLANE_CORES} on a control plane",
                machine.cores
            ),
        ));
    }
    if machine.memory_mib < MIN_CONTROL_PLANE_MEMORY_MIB {
        out.push(file.error(
            &format!("{path}.memoryMiB"),
            format!("{} MiB: {tool} needs at least {MIN_CONTROL_PLANE_MEMORY_MIB} MiB on a control plane", machine.memory_mib),
        ));
    }
    super::machine::check(out, machine, path, replicas, file);
    super::hardware_rules::check(out, machine, path, spec.kubernetes.distribution, file);
}

fn workers(out: &mut Vec<Diagnostic>, cluster: &str, spec: &ClusterSpec, file: &SourceFile) {
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (index, pool) in spec.workers.iter().enumerate() {
        let path = format!("spec.workers[{index}]");
        let name = pool.pool.as_str();
        if !is_dns1123_label(name) {
            out.push(
                file.error(
                    &format!("{path}.pool"),
                    format!("`{name}` is not a DNS-1123 label"),
                )
                .with_hint(DNS_LABEL_HINT),
            );
        } else if name == CONTROL_PLANE_POOL {
            out.push(
                file.error(
                    &format!("{path}.pool"),
                    format!("`{CONTROL_PLANE_POOL}` names the control plane's VMs"),
                )
                .with_hint("choose another pool name"),
            );
        }
        if let Some(first) = seen.insert(name, index) {
            out.push(file.error(
                &format!("{path}.pool"),
                format!("pool `{name}` is already defined at spec.workers[{first}]"),
            ));
        }
        super::machine::check(
            out,
            &pool.machine,
            &format!("{path}.machine"),
            pool.replicas,
            file,
        );
        super::hardware_rules::check(
            out,
            &pool.machine,
            &format!("{path}.machine"),
            spec.kubernetes.distribution,
            file,
        );
    }
    for pool in spec
        .workers
        .iter()
        .map(|p| p.pool.as_str())
        .chain([CONTROL_PLANE_POOL])
    {
        if !fits_vm_name(cluster, pool) {
            let length = vm_name_length(cluster, pool);
            out.push(
                file.error("metadata.name", format!("VM names `{VM_NAME_PREFIX}{cluster}-{pool}-xxxxx` would be {length} characters, over the {MAX_VM_NAME_LEN} a hostname allows"))
                    .with_hint("shorten the cluster or pool name"),
            );
        }
    }
    let total = spec.worker_replicas();
    // A compact cluster (no worker, its control planes schedulable) needs none.
    let minimum = spec.min_workers();
    if total < minimum {
        let field = if spec.workers.is_empty() {
            "spec.workers".to_owned()
        } else {
            format!("spec.workers[{}].replicas", spec.workers.len() - 1)
        };
        out.push(
            file.error(&field, format!("{total} workers in all, below rollout.minWorkers {minimum}"))
                .with_hint("add a worker first: keep at least rollout.minWorkers workers so drains can always move workloads"),
        );
    }
}

fn rollout(out: &mut Vec<Diagnostic>, spec: &ClusterSpec, file: &SourceFile) {
    let rollout = &spec.rollout;
    if rollout.max_surge == 0 {
        out.push(
            file.error(
                "spec.rollout.maxSurge",
                "0 extra VMs would leave no room for a replacement: every replacement is created before the machine it replaces leaves",
            )
            .with_hint("the default is 1; a larger surge overlaps replacements"),
        );
    }
    if rollout.drain_timeout.0.is_zero() {
        out.push(
            file.error(
                "spec.rollout.drainTimeout",
                "a drain needs time: 0 would cordon and give up at once",
            )
            .with_hint("the default is 10m"),
        );
    }
    if rollout.join_timeout.0.is_zero() {
        out.push(
            file.error("spec.rollout.joinTimeout", "a new node needs time to join")
                .with_hint("the default is 15m"),
        );
    }
    super::maintenance::check(out, spec, file);
    super::replace::check(out, spec, file);
    let renew_before = spec.certificates.renew_before.0.as_secs() / 86_400;
    if renew_before >= CERTIFICATE_LIFETIME_DAYS {
        out.push(
            file.error("spec.certificates.renewBefore", format!("{}: certificates last {CERTIFICATE_LIFETIME_DAYS} days, so they would be renewed forever", spec.certificates.renew_before))
                .with_hint("the default is 30d"),
        );
    }
    if spec.remediation.fence && spec.remediation.after.0.as_secs() < 60 {
        out.push(
            file.warning(
                "spec.remediation.after",
                format!(
                    "fencing after {}: a short network blip would hard-stop a node",
                    spec.remediation.after
                ),
            )
            .with_hint("the default is 5m"),
        );
    }
}

/// A cluster that passed its own rules, with the file it came from.
pub struct Checked<'a> {
    /// The cluster.
    pub cluster: &'a Cluster,
    /// Its file, to position findings.
    pub file: &'a SourceFile,
    /// Whether the file passed its own rules (a collision with an invalid file is reported
    /// on the invalid one).
    pub valid: bool,
}

/// Rules across cluster files: names, endpoint hosts and addresses must be unique. Returns the
/// findings and, for each, the index of the later file that loses.
pub fn across(clusters: &[Checked<'_>]) -> Vec<(usize, Diagnostic)> {
    let mut out = Vec::new();
    let mut names: BTreeMap<&str, &SourceFile> = BTreeMap::new();
    let mut hosts: BTreeMap<String, &SourceFile> = BTreeMap::new();
    let mut addresses: BTreeMap<IpAddr, &SourceFile> = BTreeMap::new();
    let mut databases: BTreeMap<(&str, &str), &SourceFile> = BTreeMap::new();
    for (index, checked) in clusters.iter().enumerate() {
        let Checked { cluster, file, .. } = checked;
        if let Some(DatastoreChoice::Provisioned { server, database }) = cluster
            .spec
            .kubernetes
            .datastore
            .as_ref()
            .and_then(|d| d.choice())
            && let Some(first) = databases.insert((server, database), file)
        {
            out.push((
                index,
                file.error(
                    "spec.kubernetes.datastore.database",
                    format!("database `{database}` on `{server}` is already used by {}", first.name),
                )
                .with_hint("two K3s clusters in one database would share their state: name another database"),
            ));
        }
        if let Some(first) = names.insert(&cluster.metadata.name, file) {
            out.push((
                index,
                file.error(
                    "metadata.name",
                    format!(
                        "cluster `{}` is already defined in {}",
                        cluster.metadata.name, first.name
                    ),
                )
                .with_hint("cluster names are unique in a repository"),
            ));
        }
        let host = cluster.spec.endpoint.host.to_ascii_lowercase();
        if let Some(first) = hosts.insert(host, file) {
            out.push((
                index,
                file.error(
                    "spec.endpoint.host",
                    format!(
                        "endpoint host `{}` is already used by {}",
                        cluster.spec.endpoint.host, first.name
                    ),
                )
                .with_hint("each cluster needs its own DNS record"),
            ));
        }
        if let Some(first) = addresses.insert(cluster.spec.endpoint.address, file) {
            out.push((
                index,
                file.error(
                    "spec.endpoint.address",
                    format!(
                        "endpoint address {} is already used by {}",
                        cluster.spec.endpoint.address, first.name
                    ),
                )
                .with_hint("two clusters' kube-vip would fight for the same address"),
            ));
        }
    }
    out
}
