//! Kubeconfig delivery to Flux (`records::flux`) against the simulated management cluster,
//! with the workload cluster's kubeconfig proven against the simulated workload cluster.

use std::time::Duration;

use crate::kube_support::{Kubectl, drain_world, lab};
use capstan::fingerprint::FingerprintKey;
use capstan::providers::kube::{AdminKubeconfig, ApiEndpoint, KubeClusterClient};
use capstan::records::flux::{
    CLUSTER_ANNOTATION, DeliveryOutcome, EXPIRY_ANNOTATION, FINGERPRINT_ANNOTATION, FluxDeliverer,
    FluxError, FluxTarget, KubeconfigDelivery, REVISION_ANNOTATION, VALUE_KEY, WATCH_LABEL,
};
use capstan::spec::FluxDelivery;
use capstan_lab::kube::{KubeLab, SimCluster};
use capstan_testkit::judge::{self, Judge};

/// prod's endpoint in `drain_world`.
const PROD_ENDPOINT: &str = "k8s-prod.lab.example";

/// `cluster`'s admin kubeconfig as capstan admits it from a VM: reduced, its server the lab's
/// address for prod's endpoint.
fn admitted_text(cluster: &SimCluster, text: &str) -> AdminKubeconfig {
    let endpoint = ApiEndpoint::declared(PROD_ENDPOINT, 6443).served_at(cluster.local_addr());
    AdminKubeconfig::reduce(text, &endpoint, &key()).expect("admitted")
}

fn admitted(cluster: &SimCluster) -> AdminKubeconfig {
    admitted_text(cluster, &cluster.admin_kubeconfig())
}

fn target() -> FluxTarget {
    let delivery = FluxDelivery {
        cluster: "management".into(),
        namespace: "flux-system".into(),
        secret_name: None,
    };
    FluxTarget::new("prod", &delivery)
}

/// The fingerprint key of these tests' deliverers, as a daemon derives one from its tokens.
fn key() -> FingerprintKey {
    FingerprintKey::derive([&b"a Proxmox token"[..]])
}

async fn deliverer(lab: &KubeLab) -> FluxDeliverer<KubeClusterClient> {
    let management = lab.management().expect("management");
    FluxDeliverer::new(
        KubeClusterClient::connect(&management.admin_kubeconfig())
            .await
            .expect("management client"),
        key(),
    )
}

fn secret(lab: &KubeLab) -> Option<serde_json::Value> {
    lab.management()
        .expect("management")
        .object("secrets", Some("flux-system"), "prod-kubeconfig")
}

fn resource_version(lab: &KubeLab) -> String {
    secret(lab).expect("secret")["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_owned()
}

#[tokio::test]
async fn the_first_delivery_creates_the_secret_flux_reads() {
    if !judge::present(&[Judge::Kubectl]) {
        return;
    }
    let lab = lab(&drain_world(false)).await;
    let prod = lab.cluster("prod").expect("prod");
    let flux = deliverer(&lab).await;
    let kubeconfig = admitted(&prod);
    assert_eq!(target().secret_name, "prod-kubeconfig");
    assert_eq!(flux.delivered(&target()).await.expect("observe"), None);
    let outcome = flux
        .deliver(&target(), &kubeconfig, "3f2a9c1")
        .await
        .expect("deliver");
    assert_eq!(outcome, DeliveryOutcome::Created);

    let stored = secret(&lab).expect("secret");
    let value = stored["data"][VALUE_KEY].as_str().expect("value");
    use base64::Engine as _;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(value)
        .expect("base64");
    assert_eq!(decoded, kubeconfig.render().as_bytes());
    assert_eq!(stored["metadata"]["labels"][WATCH_LABEL], "Enabled");
    let annotations = &stored["metadata"]["annotations"];
    assert_eq!(annotations[CLUSTER_ANNOTATION], "prod");
    assert_eq!(annotations[REVISION_ANNOTATION], "3f2a9c1");
    assert_eq!(
        annotations[FINGERPRINT_ANNOTATION],
        kubeconfig.fingerprint()
    );
    assert_eq!(
        annotations[EXPIRY_ANNOTATION],
        prod.admin_certificate_expiry().to_string()
    );

    let delivered = flux
        .delivered(&target())
        .await
        .expect("observe")
        .expect("present");
    assert_eq!(delivered.fingerprint, kubeconfig.fingerprint());
    assert_eq!(
        delivered.fingerprint,
        key().fingerprint(&decoded),
        "the fingerprint is the delivered text's"
    );
    assert_eq!(delivered.revision.as_deref(), Some("3f2a9c1"));
    assert_eq!(
        delivered.client_certificate_expiry,
        Some(prod.admin_certificate_expiry())
    );

    // What an operator sees with the stock kubectl.
    let management = lab.management().expect("management");
    let out = Kubectl::admin(&management)
        .run(&[
            "get",
            "secret",
            "prod-kubeconfig",
            "-n",
            "flux-system",
            "-o",
            "yaml",
        ])
        .await;
    let yaml = out.ok();
    assert!(
        yaml.contains("reconcile.fluxcd.io/watch: Enabled"),
        "{yaml}"
    );
    assert!(yaml.contains("capstan.dev/revision: 3f2a9c1"), "{yaml}");

    // What Flux gets works with the stock kubectl: the lab's address, verified for the
    // endpoint's name against the cluster's CA.
    let delivered_text = String::from_utf8(decoded).expect("utf-8");
    assert!(
        delivered_text.contains(&format!("tls-server-name: {PROD_ENDPOINT}")),
        "{delivered_text}"
    );
    let nodes = Kubectl::with_kubeconfig(&delivered_text)
        .run(&["get", "nodes", "-o", "name"])
        .await;
    assert!(nodes.ok().contains("node/cp"), "{nodes:?}");
}

#[tokio::test]
async fn an_unchanged_kubeconfig_is_not_written_again() {
    let lab = lab(&drain_world(false)).await;
    let prod = lab.cluster("prod").expect("prod");
    let flux = deliverer(&lab).await;
    let kubeconfig = admitted(&prod);
    flux.deliver(&target(), &kubeconfig, "rev-1")
        .await
        .expect("first");
    let before = resource_version(&lab);
    let outcome = flux
        .deliver(&target(), &kubeconfig, "rev-2")
        .await
        .expect("second");
    assert_eq!(outcome, DeliveryOutcome::Unchanged);
    assert_eq!(resource_version(&lab), before, "no write");
    assert_eq!(
        secret(&lab).expect("secret")["metadata"]["annotations"][REVISION_ANNOTATION],
        "rev-1"
    );
}

#[tokio::test]
async fn a_renewed_kubeconfig_replaces_the_old_one() {
    let lab = lab(&drain_world(false)).await;
    let prod = lab.cluster("prod").expect("prod");
    let flux = deliverer(&lab).await;
    flux.deliver(&target(), &admitted(&prod), "rev-1")
        .await
        .expect("first");
    let before = resource_version(&lab);
    let old_expiry = prod.admin_certificate_expiry();
    lab.clock().advance(Duration::from_secs(340 * 86_400));
    let new_expiry = prod.renew_certificates().expect("renew");
    assert!(new_expiry > old_expiry);
    let renewed = admitted(&prod);
    let outcome = flux
        .deliver(&target(), &renewed, "rev-2")
        .await
        .expect("update");
    assert_eq!(outcome, DeliveryOutcome::Updated);
    assert_ne!(resource_version(&lab), before);
    let annotations = secret(&lab).expect("secret")["metadata"]["annotations"].clone();
    assert_eq!(annotations[REVISION_ANNOTATION], "rev-2");
    assert_eq!(annotations[EXPIRY_ANNOTATION], new_expiry.to_string());
    assert_eq!(annotations[FINGERPRINT_ANNOTATION], renewed.fingerprint());
}

#[tokio::test]
async fn a_kubeconfig_that_does_not_authenticate_is_refused() {
    let lab = lab(&drain_world(false)).await;
    let prod = lab.cluster("prod").expect("prod");
    let flux = deliverer(&lab).await;
    flux.deliver(&target(), &admitted(&prod), "rev-1")
        .await
        .expect("first");
    let before = resource_version(&lab);
    // prod's server and CA with another cluster's admin certificate: well-formed, and refused
    // by prod's API server.
    let management = lab.management().expect("management");
    let mut stranger: serde_json::Value =
        serde_saphyr::from_str(&management.admin_kubeconfig()).expect("kubeconfig");
    let genuine: serde_json::Value =
        serde_saphyr::from_str(&prod.admin_kubeconfig()).expect("kubeconfig");
    stranger["clusters"] = genuine["clusters"].clone();
    stranger["contexts"][0]["context"]["cluster"] =
        genuine["contexts"][0]["context"]["cluster"].clone();
    let broken = admitted_text(&prod, &stranger.to_string());
    let err = flux
        .deliver(&target(), &broken, "rev-2")
        .await
        .expect_err("refused");
    assert!(matches!(err, FluxError::NotAuthenticated { .. }), "{err}");
    let message = err.to_string();
    assert!(
        message.starts_with("refusing to deliver cluster prod's new kubeconfig (hmac-sha256:"),
        "{message}"
    );

    assert_eq!(
        resource_version(&lab),
        before,
        "the Secret was left as it was"
    );
}

/// Whether `err` is a record refused ([`capstan::records::RecordRefusal`]).
fn refused(err: &FluxError) -> bool {
    capstan::records::refusal_in(err).is_some()
}

#[tokio::test]
async fn withdrawing_is_idempotent_and_spares_foreign_secrets() {
    let lab = lab(&drain_world(false)).await;
    let prod = lab.cluster("prod").expect("prod");
    let flux = deliverer(&lab).await;
    flux.deliver(&target(), &admitted(&prod), "rev-1")
        .await
        .expect("deliver");
    assert!(flux.withdraw(&target()).await.expect("withdraw"));
    assert!(secret(&lab).is_none());
    assert!(!flux.withdraw(&target()).await.expect("again"));

    let management = lab.management().expect("management");
    management
        .create_object(
            "secrets",
            Some("flux-system"),
            serde_json::json!({"metadata": {"name": "prod-kubeconfig"}, "data": {"value": "eA=="}}),
        )
        .expect("someone else's secret");
    let err = flux.withdraw(&target()).await.expect_err("not ours");
    assert!(refused(&err), "{err}");
    let err = flux
        .deliver(&target(), &admitted(&prod), "rev-2")
        .await
        .expect_err("not ours");
    assert!(refused(&err), "{err}");
    assert!(secret(&lab).is_some());
}

#[tokio::test]
async fn the_secrets_capstan_manages_are_found_without_their_cluster_file() {
    let lab = lab(&drain_world(false)).await;
    let prod = lab.cluster("prod").expect("prod");
    let flux = deliverer(&lab).await;
    assert_eq!(flux.held().await.expect("list"), vec![]);
    // A Secret in a namespace and under a name only the (now removed) cluster file knew.
    let custom = FluxTarget {
        cluster: "prod".into(),
        namespace: "tenants".into(),
        secret_name: "prod-admin".into(),
    };
    let management = lab.management().expect("management");
    management
        .create_object(
            "namespaces",
            None,
            serde_json::json!({"metadata": {"name": "tenants"}}),
        )
        .expect("namespace");
    flux.deliver(&custom, &admitted(&prod), "rev-1")
        .await
        .expect("deliver");
    // Someone else's Secret is not capstan's to report.
    management
        .create_object(
            "secrets",
            Some("flux-system"),
            serde_json::json!({"metadata": {"name": "other-kubeconfig"}, "data": {"value": "eA=="}}),
        )
        .expect("someone else's secret");

    let held = flux.held().await.expect("list");
    assert_eq!(held.len(), 1, "{held:?}");
    let (target, delivered) = &held[0];
    assert_eq!(target, &custom);
    assert_eq!(delivered.fingerprint, admitted(&prod).fingerprint());
    assert!(flux.withdraw(target).await.expect("withdraw"));
    assert_eq!(flux.held().await.expect("list"), vec![]);
}
