use super::*;
use crate::secrets::Pin;
use crate::spec::SourceText;

const FINGERPRINT: &str = "5C:7A:1F:02:9B:44:E3:10:8D:2A:6F:C1:73:0E:B5:98:24:D6:4F:E1:0A:9C:33:7B:C8:52:16:EF:40:A9:61:D7";

/// `capstan.yaml` with the connection `homelab` at `url`, a management cluster and a
/// datastore server, each reading its secret as the default policy allows.
fn fleet_text(url: &str) -> String {
    format!(
        "apiVersion: capstan.dev/v1alpha1
kind: Fleet
proxmox:
  homelab:
    url: {url}
    tokenId: capstan@pve!reconciler
    tokenFrom: {{env: CAPSTAN_PROXMOX_HOMELAB_TOKEN}}
    tlsFingerprint: \"{FINGERPRINT}\"
managementClusters:
  management:
    kubeconfigFrom: {{env: CAPSTAN_MANAGEMENT_MANAGEMENT_KUBECONFIG}}
datastores:
  mariadb:
    url: mysql://db.lab.example:3306
    adminUser: root
    adminPasswordFrom: {{env: CAPSTAN_DATASTORE_MARIADB_PASSWORD}}
approvedMinors: [\"1.36\"]
"
    )
}

/// A single-server K3s cluster whose DSN comes from `endpoint_from`.
fn k3s_cluster(name: &str, octet: u8, endpoint_from: &str) -> SourceText {
    SourceText {
        path: format!("clusters/{name}.yaml"),
        text: format!(
            "apiVersion: capstan.dev/v1alpha1
kind: Cluster
metadata:
  name: {name}
spec:
  proxmox: homelab
  kubernetes:
    distribution: k3s
    version: v1.36.2+k3s1
    datastore:
      endpointFrom: {endpoint_from}
  endpoint: {{host: k8s-{name}.lab.example, address: 192.168.1.{octet}}}
  network: {{nodes: 192.168.1.0/24}}
  controlPlane:
    replicas: 1
    machine: {{template: debian13-k3s, cores: 2, memoryMiB: 4096, cpu: host, placement: [pve1]}}
  workers:
    - pool: agents
      replicas: 2
      machine: {{template: debian13-k3s, cores: 2, memoryMiB: 4096, cpu: host, placement: [pve1]}}
  rollout: {{minWorkers: 1}}
"
        ),
    }
}

fn files(fleet: &str, clusters: Vec<SourceText>) -> RepoFiles {
    RepoFiles {
        fleet: SourceText {
            path: "capstan.yaml".to_owned(),
            text: fleet.to_owned(),
        },
        clusters,
    }
}

fn pins(texts: &[&str]) -> Pins {
    Pins::new(texts.iter().map(|t| t.parse::<Pin>().expect("pin"))).expect("pins")
}

fn daemon_pins() -> Pins {
    pins(&[
        "proxmox.homelab.url=https://pve1.lab.example:8006",
        &format!("proxmox.homelab.tlsFingerprint={FINGERPRINT}"),
        "datastores.mariadb.url=mysql://db.lab.example:3306",
    ])
}

fn real_fleet() -> Admission {
    Admission::fleet(Arc::new(SecretPolicy::default()), daemon_pins())
}

fn errors(loaded: &Loaded) -> Vec<&Diagnostic> {
    loaded
        .diagnostics
        .0
        .iter()
        .filter(|d| d.is_error())
        .collect()
}

#[test]
fn a_revision_keeping_its_pinned_connections_is_admitted() {
    let loaded = real_fleet().load(&files(
        &fleet_text("https://PVE1.lab.example:8006/"),
        vec![k3s_cluster(
            "edge",
            25,
            "{env: CAPSTAN_CLUSTER_EDGE_DATASTORE_ENDPOINT}",
        )],
    ));
    assert!(errors(&loaded).is_empty(), "{}", loaded.diagnostics);
    let desired = loaded.desired.expect("admitted");
    assert!(desired.clusters.contains_key("edge"));
}

#[test]
fn a_commit_pointing_the_proxmox_url_elsewhere_is_refused_whole_naming_line_field_and_flag() {
    let loaded = real_fleet().load(&files(&fleet_text("https://evil.example:8006"), vec![]));
    assert!(loaded.desired.is_none(), "nothing of the revision applies");
    let found = errors(&loaded);
    assert_eq!(found.len(), 1, "{}", loaded.diagnostics);
    let shown = found[0].to_string();
    assert!(
        shown.starts_with("capstan.yaml:5:5: error: proxmox.homelab.url: `https://evil.example:8006` is not the pinned `https://pve1.lab.example:8006`"),
        "{shown}"
    );
    assert!(
        shown.contains("--pin proxmox.homelab.url=https://evil.example:8006"),
        "{shown}"
    );
}

#[test]
fn a_new_connection_or_datastore_is_refused_until_pinned() {
    let fleet = fleet_text("https://pve1.lab.example:8006")
        .replace(
            "managementClusters:",
            "  evil:\n    url: https://127.0.0.1:9\n    tokenId: capstan@pve!r\n    tokenFrom: {env: CAPSTAN_PROXMOX_EVIL_TOKEN}\nmanagementClusters:",
        )
        .replace(
            "approvedMinors:",
            "  other:\n    url: mysql://127.0.0.1:9\n    adminUser: root\n    adminPasswordFrom: {env: CAPSTAN_DATASTORE_OTHER_PASSWORD}\napprovedMinors:",
        );
    let loaded = real_fleet().load(&files(&fleet, vec![]));
    let fields: Vec<Option<&str>> = errors(&loaded).iter().map(|d| d.field.as_deref()).collect();
    assert!(loaded.desired.is_none(), "{}", loaded.diagnostics);
    assert!(fields.contains(&Some("proxmox.evil.url")), "{fields:?}");
    let other = errors(&loaded)
        .into_iter()
        .find(|d| d.field.as_deref() == Some("datastores.other.url"))
        .unwrap_or_else(|| panic!("{}", loaded.diagnostics));
    assert!(
        other
            .hint
            .as_deref()
            .is_some_and(|h| h.contains("--pin datastores.other.url=mysql://127.0.0.1:9")),
        "{other}"
    );
}

#[test]
fn a_dropped_or_changed_fingerprint_is_refused() {
    let dropped = fleet_text("https://pve1.lab.example:8006")
        .replace(&format!("    tlsFingerprint: \"{FINGERPRINT}\"\n"), "");
    let loaded = real_fleet().load(&files(&dropped, vec![]));
    assert!(loaded.desired.is_none());
    assert!(
        errors(&loaded)
            .iter()
            .any(|d| d.field.as_deref() == Some("proxmox.homelab.tlsFingerprint")),
        "{}",
        loaded.diagnostics
    );
    let changed = fleet_text("https://pve1.lab.example:8006").replace("5C:7A", "00:00");
    assert!(
        real_fleet()
            .load(&files(&changed, vec![]))
            .desired
            .is_none()
    );
}

#[test]
fn secret_sources_outside_the_policy_refuse_capstan_yaml() {
    let fleet = fleet_text("https://pve1.lab.example:8006")
        .replace("CAPSTAN_PROXMOX_HOMELAB_TOKEN", "HOMELAB_TOKEN")
        .replace(
            "{env: CAPSTAN_MANAGEMENT_MANAGEMENT_KUBECONFIG}",
            "{file: /etc/capstan/management.kubeconfig}",
        );
    let loaded = real_fleet().load(&files(&fleet, vec![]));
    assert!(loaded.desired.is_none());
    let shown: Vec<String> = errors(&loaded).iter().map(ToString::to_string).collect();
    assert_eq!(shown.len(), 2, "{shown:#?}");
    assert!(
        shown[0].starts_with("capstan.yaml:7:5: error: proxmox.homelab.tokenFrom: the daemon does not let the token of Proxmox connection `homelab` come from the environment variable HOMELAB_TOKEN"),
        "{shown:#?}"
    );
    assert!(shown[0].contains("name it CAPSTAN_PROXMOX_HOMELAB_TOKEN"));
    assert!(
        shown[1].starts_with("capstan.yaml:11:5: error: managementClusters.management.kubeconfigFrom: the daemon reads no secret files")
            && shown[1].contains("--secrets-dir DIR"),
        "{shown:#?}"
    );
}

#[test]
fn an_endpoint_from_naming_another_clusters_dsn_refuses_that_cluster_only() {
    let loaded = real_fleet().load(&files(
        &fleet_text("https://pve1.lab.example:8006"),
        vec![
            k3s_cluster("edge", 25, "{env: CAPSTAN_CLUSTER_PROD_DATASTORE_ENDPOINT}"),
            k3s_cluster("prod", 26, "{env: CAPSTAN_CLUSTER_PROD_DATASTORE_ENDPOINT}"),
        ],
    ));
    let desired = loaded.desired.as_ref().expect("capstan.yaml is fine");
    assert!(desired.clusters.contains_key("prod"));
    assert!(!desired.clusters.contains_key("edge"));
    assert_eq!(desired.invalid_file_of("edge"), Some("clusters/edge.yaml"));
    assert!(desired.incomplete, "a refused cluster is not a removed one");
    let shown: Vec<String> = errors(&loaded).iter().map(ToString::to_string).collect();
    assert_eq!(shown.len(), 1, "{shown:#?}");
    assert!(
        shown[0].starts_with("clusters/edge.yaml:11:7: error: spec.kubernetes.datastore.endpointFrom: the daemon does not let the kine DSN of cluster `edge` come from the environment variable CAPSTAN_CLUSTER_PROD_DATASTORE_ENDPOINT")
            && shown[0].contains("name it CAPSTAN_CLUSTER_EDGE_DATASTORE_ENDPOINT"),
        "{shown:#?}"
    );
}

#[test]
fn a_lab_checks_the_sources_it_reads_and_pins_nothing() {
    let fleet = fleet_text("https://anything.example:8006")
        .replace("CAPSTAN_PROXMOX_HOMELAB_TOKEN", "NEVER_READ");
    let lab = Admission::default();
    let loaded = lab.load(&files(&fleet, vec![]));
    assert!(errors(&loaded).is_empty(), "{}", loaded.diagnostics);
    let wrong_password = fleet.replace("CAPSTAN_DATASTORE_MARIADB_PASSWORD", "MARIADB_ROOT");
    let loaded = lab.load(&files(&wrong_password, vec![]));
    assert_eq!(
        errors(&loaded)
            .iter()
            .map(|d| d.field.as_deref())
            .collect::<Vec<_>>(),
        [Some("datastores.mariadb.adminPasswordFrom")]
    );
}

#[test]
fn a_preview_head_is_held_to_its_base() {
    let preview = Admission::against_base();
    let base = preview.load(&files(&fleet_text("https://pve1.lab.example:8006"), vec![]));
    assert!(errors(&base).is_empty(), "{}", base.diagnostics);
    let head = preview
        .for_head(&base)
        .load(&files(&fleet_text("https://evil.example:8006"), vec![]));
    let shown: Vec<String> = errors(&head).iter().map(ToString::to_string).collect();
    assert_eq!(shown.len(), 1, "{shown:#?}");
    assert!(
        shown[0].contains("`https://evil.example:8006` changes the base revision's `https://pve1.lab.example:8006`")
            && shown[0].contains("--pin proxmox.homelab.url=https://evil.example:8006"),
        "{shown:#?}"
    );
    let unchanged = preview
        .for_head(&base)
        .load(&files(&fleet_text("https://pve1.lab.example:8006"), vec![]));
    assert!(errors(&unchanged).is_empty());
}

#[test]
fn a_notification_address_or_key_is_read_only_from_its_providers_own_source() {
    let notifications = "notifications:
  providers:
    chat: {type: slack, addressFrom: {env: CAPSTAN_NOTIFICATION_CHAT_ADDRESS}}
    hook:
      type: generic
      addressFrom: {env: CAPSTAN_NOTIFICATION_HOOK_ADDRESS}
      signingKeyFrom: {env: CAPSTAN_NOTIFICATION_HOOK_SIGNING_KEY}
  alerts:
    - providers: [chat, hook]
";
    let fleet = format!(
        "{}{notifications}",
        fleet_text("https://pve1.lab.example:8006")
    );
    // A lab reads receivers' secrets too: they are real servers.
    for admission in [real_fleet(), Admission::default()] {
        let loaded = admission.load(&files(&fleet, vec![]));
        assert!(errors(&loaded).is_empty(), "{}", loaded.diagnostics);
        // A commit pointing the chat at the Proxmox token, or the key at the hook's address.
        let stolen = fleet
            .replace(
                "CAPSTAN_NOTIFICATION_CHAT_ADDRESS",
                "CAPSTAN_PROXMOX_HOMELAB_TOKEN",
            )
            .replace(
                "CAPSTAN_NOTIFICATION_HOOK_SIGNING_KEY",
                "CAPSTAN_NOTIFICATION_HOOK_ADDRESS",
            );
        let loaded = admission.load(&files(&stolen, vec![]));
        assert!(loaded.desired.is_none(), "nothing of it is applied");
        assert_eq!(
            errors(&loaded)
                .iter()
                .map(|d| d.field.as_deref())
                .collect::<Vec<_>>(),
            [
                Some("notifications.providers.chat.addressFrom"),
                Some("notifications.providers.hook.signingKeyFrom")
            ],
            "{}",
            loaded.diagnostics
        );
    }
}

#[test]
fn a_delivery_outside_the_operators_namespaces_refuses_that_cluster_only() {
    let delivering = |name: &str, octet: u8, namespace: &str| {
        let mut cluster = k3s_cluster(
            name,
            octet,
            &format!(
                "{{env: CAPSTAN_CLUSTER_{}_DATASTORE_ENDPOINT}}",
                name.to_uppercase()
            ),
        );
        cluster.text.push_str(&format!(
            "  delivery:\n    flux: {{cluster: management, namespace: {namespace}}}\n"
        ));
        cluster
    };
    let repository = files(
        &fleet_text("https://pve1.lab.example:8006"),
        vec![
            delivering("edge", 25, "tenants"),
            delivering("prod", 26, "flux-system"),
        ],
    );
    // No flag: both deliver where they say.
    let loaded = real_fleet().load(&repository);
    assert!(errors(&loaded).is_empty(), "{}", loaded.diagnostics);

    let limited = real_fleet().with_delivery_namespaces(&["flux-system".to_owned()]);
    let loaded = limited.load(&repository);
    let desired = loaded.desired.as_ref().expect("capstan.yaml is fine");
    assert_eq!(desired.clusters.keys().collect::<Vec<_>>(), ["prod"]);
    assert_eq!(desired.invalid_file_of("edge"), Some("clusters/edge.yaml"));
    let shown: Vec<String> = errors(&loaded).iter().map(ToString::to_string).collect();
    assert_eq!(shown.len(), 1, "{shown:#?}");
    assert!(
        shown[0].starts_with("clusters/edge.yaml:23:33:")
            && shown[0].contains("error: spec.delivery.flux.namespace: `tenants` is not a namespace the daemon delivers kubeconfigs to (flux-system)")
            && shown[0].contains("--delivery-namespaces"),
        "{shown:#?}"
    );
}

#[test]
fn a_registry_password_read_from_another_owners_variable_refuses_that_cluster_at_its_line() {
    let with_registry = |variable: &str| {
        let mut cluster = k3s_cluster("edge", 25, "{env: CAPSTAN_CLUSTER_EDGE_DATASTORE_ENDPOINT}");
        cluster.text = cluster.text.replacen(
            "    datastore:\n",
            &format!(
                "    registries:\n      credentials:\n        mirror.example:5000:\n          username: robot\n          passwordFrom: {{env: {variable}}}\n    datastore:\n"
            ),
            1,
        );
        cluster
    };
    let fleet = fleet_text("https://pve1.lab.example:8006");
    let own = "CAPSTAN_CLUSTER_EDGE_REGISTRY_MIRROR_EXAMPLE_5000_PASSWORD";
    let loaded = real_fleet().load(&files(&fleet, vec![with_registry(own)]));
    assert!(errors(&loaded).is_empty(), "{}", loaded.diagnostics);
    let loaded = real_fleet().load(&files(
        &fleet,
        vec![with_registry("CAPSTAN_PROXMOX_HOMELAB_TOKEN")],
    ));
    let shown: Vec<String> = errors(&loaded).iter().map(ToString::to_string).collect();
    assert_eq!(shown.len(), 1, "{shown:#?}");
    assert!(
        shown[0].starts_with("clusters/edge.yaml:14:11: error: spec.kubernetes.registries.credentials.mirror.example:5000.passwordFrom: the daemon does not let the password cluster `edge` presents to registry `mirror.example:5000` come from the environment variable CAPSTAN_PROXMOX_HOMELAB_TOKEN")
            && shown[0].contains(&format!("name it {own}")),
        "{shown:#?}"
    );
}
