//! The CA first seen for a workload cluster, pinned in the lab's management cluster
//! (`records::ca_pins`): kept across restarts, another CA refused naming both fingerprints,
//! and accepted only once an operator deletes the record.

use std::collections::BTreeMap;

use capstan::providers::kube::{
    AdminKubeconfig, ApiEndpoint, ClusterClient, KubeClusterClient, SecretRecord,
};
use capstan::records::NAMESPACE;
use capstan::records::ca_pins::{
    CERTIFICATE_KEY, CaPins, FINGERPRINT_KEY, PinError, PinStore, record_name,
};
use capstan_lab::kube::{KubeLab, SimCluster};

use crate::kube_support::{drain_world, lab};

/// `cluster`'s admin kubeconfig admitted as prod's (drain_world's prod endpoint).
fn admitted(cluster: &SimCluster, at: &SimCluster) -> AdminKubeconfig {
    let endpoint = ApiEndpoint::declared("k8s-prod.lab.example", 6443).served_at(at.local_addr());
    let mut text: serde_json::Value =
        serde_saphyr::from_str(&cluster.admin_kubeconfig()).expect("kubeconfig");
    text["clusters"][0]["cluster"]["server"] = serde_json::json!(at.url());
    AdminKubeconfig::reduce(
        &text.to_string(),
        &endpoint,
        &capstan::fingerprint::FingerprintKey::derive([]),
    )
    .expect("admitted")
}

async fn management(lab: &KubeLab) -> KubeClusterClient {
    KubeClusterClient::connect(&lab.management().expect("management").admin_kubeconfig())
        .await
        .expect("management client")
}

#[tokio::test]
async fn the_first_ca_is_pinned_in_the_management_cluster_and_another_is_refused_until_the_record_is_deleted()
 {
    let lab = lab(&drain_world(false)).await;
    let prod = lab.cluster("prod").expect("prod");
    let genuine = admitted(&prod, &prod);
    // A kubeconfig naming the management cluster's CA: what root on a VM could offer.
    let forged = admitted(&lab.management().expect("management"), &prod);
    assert_ne!(genuine.ca_fingerprint(), forged.ca_fingerprint());
    let management = management(&lab).await;
    let store = PinStore::Management("management", &management);

    let pins = CaPins::default();
    pins.check(store, "prod", &genuine).await.expect("pinned");
    let record = management
        .secret(NAMESPACE, &record_name("prod"))
        .await
        .expect("read")
        .expect("the record exists");
    assert_eq!(
        record.data[FINGERPRINT_KEY],
        genuine.ca_fingerprint().as_bytes()
    );
    assert_eq!(record.data[CERTIFICATE_KEY], genuine.ca_pem().as_bytes());
    pins.check(store, "prod", &genuine)
        .await
        .expect("the same CA");

    // A restarted daemon (nothing in memory) still knows the pin.
    let restarted = CaPins::default();
    let err = restarted
        .check(store, "prod", &forged)
        .await
        .expect_err("another CA");
    assert!(matches!(err, PinError::Changed { .. }), "{err}");
    let message = err.to_string();
    assert!(
        message.contains(genuine.ca_fingerprint()) && message.contains(forged.ca_fingerprint()),
        "both fingerprints named: {message}"
    );
    assert!(
        message.contains(
            "delete Secret capstan-system/capstan-ca-prod on management cluster `management`"
        ),
        "{message}"
    );
    assert!(
        pins.check(store, "prod", &forged).await.is_err(),
        "a daemon that confirmed the pin refuses too"
    );
    restarted
        .check(store, "prod", &genuine)
        .await
        .expect("the pinned CA still passes");

    // The operator accepts the new CA by deleting the record: the next check pins it,
    // without a restart.
    assert!(
        management
            .delete_secret(NAMESPACE, &record_name("prod"))
            .await
            .expect("deleted")
    );
    pins.check(store, "prod", &forged)
        .await
        .expect("the CA seen next is pinned");
    let err = restarted
        .check(store, "prod", &genuine)
        .await
        .expect_err("the old CA is now the other one");
    assert!(matches!(err, PinError::Changed { .. }), "{err}");
}

#[tokio::test]
async fn a_record_capstan_did_not_write_is_refused_not_overwritten() {
    let lab = lab(&drain_world(false)).await;
    let prod = lab.cluster("prod").expect("prod");
    let management = management(&lab).await;
    let foreign = SecretRecord {
        data: BTreeMap::from([(FINGERPRINT_KEY.to_owned(), b"AA:BB".to_vec())]),
        ..SecretRecord::default()
    };
    management
        .write_secret(NAMESPACE, &record_name("prod"), &foreign)
        .await
        .expect("someone else's Secret");
    let err = CaPins::default()
        .check(
            PinStore::Management("management", &management),
            "prod",
            &admitted(&prod, &prod),
        )
        .await
        .expect_err("not capstan's");
    assert!(matches!(err, PinError::Refused { .. }), "{err}");
    let chain = capstan::errors::error_chain(&err);
    assert!(
        chain.contains("Secret capstan-system/capstan-ca-prod is not capstan's"),
        "{chain}"
    );
    let kept = management
        .secret(NAMESPACE, &record_name("prod"))
        .await
        .expect("read")
        .expect("kept");
    assert_eq!(kept.data[FINGERPRINT_KEY], b"AA:BB");
}

#[tokio::test]
async fn replicas_racing_to_pin_different_cas_agree_on_the_first_written() {
    let lab = lab(&drain_world(false)).await;
    let prod = lab.cluster("prod").expect("prod");
    let genuine = admitted(&prod, &prod);
    let forged = admitted(&lab.management().expect("management"), &prod);
    let management = management(&lab).await;
    let store = PinStore::Management("management", &management);
    let (one, other) = (CaPins::default(), CaPins::default());
    let (a, b) = tokio::join!(
        one.check(store, "prod", &genuine),
        other.check(store, "prod", &forged)
    );
    assert!(
        a.is_ok() != b.is_ok(),
        "exactly one CA is pinned: {a:?} {b:?}"
    );
}

#[tokio::test]
async fn without_a_management_cluster_pins_last_as_long_as_the_daemon() {
    let lab = lab(&drain_world(false)).await;
    let prod = lab.cluster("prod").expect("prod");
    let genuine = admitted(&prod, &prod);
    let forged = admitted(&lab.management().expect("management"), &prod);
    let pins = CaPins::default();
    let memory = PinStore::<KubeClusterClient>::Memory;
    pins.check(memory, "prod", &genuine).await.expect("pinned");
    let err = pins
        .check(memory, "prod", &forged)
        .await
        .expect_err("another CA");
    assert!(err.to_string().contains("restart capstan"), "{err}");
}

#[tokio::test]
async fn a_deleted_clusters_pin_is_forgotten_so_a_new_cluster_of_its_name_pins_its_own() {
    let lab = lab(&drain_world(false)).await;
    let prod = lab.cluster("prod").expect("prod");
    let old = admitted(&prod, &prod);
    let new = admitted(&lab.management().expect("management"), &prod);
    let management = management(&lab).await;
    let store = PinStore::Management("management", &management);
    let pins = CaPins::default();
    pins.check(store, "prod", &old).await.expect("pinned");
    pins.forget(store, "prod").await.expect("forgotten");
    assert!(
        management
            .secret(NAMESPACE, &record_name("prod"))
            .await
            .expect("read")
            .is_none()
    );
    pins.forget(store, "prod")
        .await
        .expect("forgetting twice succeeds");
    pins.check(store, "prod", &new)
        .await
        .expect("the new cluster's CA is pinned");
}

#[tokio::test]
async fn while_the_management_cluster_does_not_answer_only_the_ca_read_last_is_accepted() {
    let lab = lab(&drain_world(false)).await;
    let prod = lab.cluster("prod").expect("prod");
    let genuine = admitted(&prod, &prod);
    let forged = admitted(&lab.management().expect("management"), &prod);
    let management = management(&lab).await;
    // The same management cluster refusing capstan (401), as with expired credentials.
    let refusing =
        KubeClusterClient::connect(&lab.management().expect("management").anonymous_kubeconfig())
            .await
            .expect("client");
    let answering = PinStore::Management("management", &management);
    let down = PinStore::Management("management", &refusing);
    let pins = CaPins::default();
    pins.check(answering, "prod", &genuine)
        .await
        .expect("pinned");
    pins.check(down, "prod", &genuine)
        .await
        .expect("the CA read last still passes");
    let err = pins
        .check(down, "prod", &forged)
        .await
        .expect_err("no other");
    assert!(matches!(err, PinError::Management { .. }), "{err}");
    let err = CaPins::default()
        .check(down, "prod", &genuine)
        .await
        .expect_err("a daemon that never read the pin cannot tell");
    assert!(matches!(err, PinError::Management { .. }), "{err}");
}

/// A Secret labelled capstan's with `annotations` and `fingerprint` as its pin.
fn pin_secret(annotations: &[(&str, &str)], fingerprint: &str) -> SecretRecord {
    SecretRecord {
        data: BTreeMap::from([(FINGERPRINT_KEY.to_owned(), fingerprint.as_bytes().to_vec())]),
        labels: BTreeMap::from([(
            "app.kubernetes.io/managed-by".to_owned(),
            "capstan".to_owned(),
        )]),
        annotations: annotations
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        resource_version: None,
    }
}

#[tokio::test]
async fn a_pin_an_earlier_capstan_recorded_is_adopted_and_one_of_another_cluster_or_life_is_refused()
 {
    let lab = lab(&drain_world(false)).await;
    let prod = lab.cluster("prod").expect("prod");
    let genuine = admitted(&prod, &prod);
    let management = management(&lab).await;
    let store = PinStore::Management("management", &management);
    let pins = CaPins::default();

    // As capstan wrote it before records carried a kind: adopted on the live cluster.
    let legacy = pin_secret(
        &[("capstan.dev/ca-of-cluster", "prod")],
        genuine.ca_fingerprint(),
    );
    management
        .write_secret(NAMESPACE, &record_name("prod"), &legacy)
        .await
        .expect("a legacy pin");
    pins.check(store, "prod", &genuine).await.expect("adopted");
    let adopted = management
        .secret(NAMESPACE, &record_name("prod"))
        .await
        .expect("read")
        .expect("kept");
    let identity = management
        .secret(NAMESPACE, "capstan-cluster-prod")
        .await
        .expect("read")
        .expect("the cluster's identity, minted to adopt it");
    assert_eq!(adopted.annotations["capstan.dev/record-kind"], "ca-pin");
    assert_eq!(adopted.annotations["capstan.dev/owner-cluster"], "prod");
    assert_eq!(
        adopted.annotations["capstan.dev/cluster-uid"],
        identity.annotations["capstan.dev/cluster-uid"]
    );

    // A pin of another cluster under this cluster's record name: refused, not read.
    let other = pin_secret(
        &[("capstan.dev/ca-of-cluster", "edge")],
        genuine.ca_fingerprint(),
    );
    management
        .write_secret(NAMESPACE, &record_name("stage"), &other)
        .await
        .expect("another cluster's pin");
    let err = pins
        .check(store, "stage", &genuine)
        .await
        .expect_err("another cluster's");
    assert!(matches!(err, PinError::Refused { .. }), "{err}");
    assert!(
        capstan::errors::error_chain(&err).contains("is a `ca-pin` record of cluster `edge`"),
        "{err}"
    );

    // A pin of an earlier life of the name (another identity): never used.
    let earlier = pin_secret(
        &[
            ("capstan.dev/record-kind", "ca-pin"),
            ("capstan.dev/owner-cluster", "qa"),
            (
                "capstan.dev/cluster-uid",
                "0123456789abcdef0123456789abcdef",
            ),
        ],
        genuine.ca_fingerprint(),
    );
    management
        .write_secret(NAMESPACE, &record_name("qa"), &earlier)
        .await
        .expect("an earlier life's pin");
    let err = pins
        .check(store, "qa", &genuine)
        .await
        .expect_err("another life's");
    assert!(
        capstan::errors::error_chain(&err)
            .contains("a `ca-pin` record of an earlier cluster `qa` (identity 0123456789abcdef0123456789abcdef)"),
        "{err}"
    );
}
