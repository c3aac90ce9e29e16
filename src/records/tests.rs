//! What a Secret is judged to be, from its label and annotations, as every write and read of
//! a record judges it.

use std::collections::BTreeMap;

use super::*;

fn uid(text: &str) -> ClusterUid {
    ClusterUid::new(text)
}

/// A Secret labelled capstan's with `annotations`.
fn secret(annotations: &[(&str, &str)]) -> SecretRecord {
    SecretRecord {
        labels: BTreeMap::from([(MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned())]),
        annotations: annotations
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        ..SecretRecord::default()
    }
}

fn bundle_of(owner: &str, identity: Option<&str>) -> SecretRecord {
    let mut annotations = vec![(KIND_ANNOTATION, "talos-bundle"), (OWNER_ANNOTATION, owner)];
    annotations.extend(identity.map(|id| (IDENTITY_ANNOTATION, id)));
    secret(&annotations)
}

fn expect<'a>(kind: RecordKind, owner: &'a str, identity: Option<&'a ClusterUid>) -> Expected<'a> {
    Expected {
        kind,
        owner,
        identity: IdentityCheck::Is(identity),
    }
}

#[test]
fn a_record_of_the_same_kind_cluster_and_identity_is_ours() {
    let id = uid("aa11");
    let judged = judge(
        NAMESPACE,
        "capstan-talos-talos",
        &bundle_of("talos", Some("aa11")),
        &expect(RecordKind::TalosBundle, "talos", Some(&id)),
    );
    assert_eq!(judged, Ok(Standing::Ours));
}

#[test]
fn another_kind_another_cluster_or_no_label_is_refused_naming_the_secret() {
    let id = uid("aa11");
    let wanted = expect(RecordKind::TalosBundle, "talos", Some(&id));
    let flux = secret(&[
        (KIND_ANNOTATION, "flux-kubeconfig"),
        (OWNER_ANNOTATION, "evil"),
        (IDENTITY_ANNOTATION, "bb22"),
    ]);
    let refusal = judge(NAMESPACE, "capstan-talos-talos", &flux, &wanted).expect_err("kind");
    assert_eq!(
        refusal.to_string(),
        "Secret capstan-system/capstan-talos-talos is a `flux-kubeconfig` record of cluster `evil`, not the `talos-bundle` record of cluster `talos` (identity aa11): capstan uses and overwrites only its record of the same kind and cluster; if this Secret is not needed, delete it, else choose another name (delivery.flux.secretName)"
    );
    let other = bundle_of("prod", Some("aa11"));
    assert!(judge(NAMESPACE, "x", &other, &wanted).is_err(), "owner");
    let mut unlabelled = bundle_of("talos", Some("aa11"));
    unlabelled.labels.clear();
    let refusal = judge(NAMESPACE, "x", &unlabelled, &wanted).expect_err("label");
    assert!(refusal.found.starts_with("not capstan's"), "{refusal}");
}

#[test]
fn a_record_of_another_identity_is_never_used() {
    let new = uid("cc33");
    let old = bundle_of("talos", Some("aa11"));
    let refusal = judge(
        NAMESPACE,
        "capstan-talos-talos",
        &old,
        &expect(RecordKind::TalosBundle, "talos", Some(&new)),
    )
    .expect_err("another life");
    assert!(
        refusal
            .found
            .contains("earlier cluster `talos` (identity aa11)"),
        "{refusal}"
    );
    // A cluster with no identity yet (added again after a deletion) takes none either.
    assert!(
        judge(
            NAMESPACE,
            "capstan-talos-talos",
            &old,
            &expect(RecordKind::TalosBundle, "talos", None)
        )
        .is_err()
    );
    // Deleting it with its cluster checks no identity.
    let any = Expected {
        kind: RecordKind::TalosBundle,
        owner: "talos",
        identity: IdentityCheck::Any,
    };
    assert_eq!(judge(NAMESPACE, "x", &old, &any), Ok(Standing::Ours));
}

#[test]
fn a_record_an_earlier_capstan_made_is_told_by_its_old_annotations_and_left_to_adopt() {
    let cases = [
        (
            "capstan-talos-t",
            "capstan.dev/talos-cluster",
            RecordKind::TalosBundle,
        ),
        (
            "t-talosconfig",
            "capstan.dev/talos-cluster",
            RecordKind::Talosconfig,
        ),
        (
            "capstan-k3s-t",
            "capstan.dev/k3s-cluster",
            RecordKind::K3sSecrets,
        ),
        (
            "capstan-ca-t",
            "capstan.dev/ca-of-cluster",
            RecordKind::CaPin,
        ),
        (
            "t-kubeconfig",
            "capstan.dev/cluster",
            RecordKind::FluxKubeconfig,
        ),
        (
            "capstan-suspend-t",
            "capstan.dev/suspended-cluster",
            RecordKind::Suspension,
        ),
    ];
    for (name, annotation, kind) in cases {
        let legacy = secret(&[(annotation, "t")]);
        assert_eq!(
            described(name, &legacy),
            Some((kind.name().to_owned(), "t".to_owned())),
            "{name}"
        );
        let judged = judge(NAMESPACE, name, &legacy, &expect(kind, "t", None));
        assert_eq!(judged, Ok(Standing::Unmarked), "{name}");
    }
    // A Talos bundle an earlier Flux delivery wrote over still reads as the bundle it was.
    let overwritten = secret(&[
        ("capstan.dev/talos-cluster", "talos"),
        ("capstan.dev/cluster", "evil"),
    ]);
    assert_eq!(
        described("capstan-talos-talos", &overwritten),
        Some(("talos-bundle".to_owned(), "talos".to_owned()))
    );
}

#[test]
fn a_refusal_is_found_through_the_layers_that_wrap_it() {
    let refusal = RecordRefusal {
        namespace: "flux-system".to_owned(),
        name: "a-kubeconfig".to_owned(),
        found: "a `ca-pin` record of cluster `b`".to_owned(),
        wanted: "the `flux-kubeconfig` record of cluster `a`".to_owned(),
        hint: "delete it".to_owned(),
    };
    let err = crate::records::flux::FluxError::Secret {
        namespace: "flux-system".to_owned(),
        name: "a-kubeconfig".to_owned(),
        source: RecordError::Refused(refusal.clone()),
    };
    assert_eq!(refusal_in(&err), Some(&refusal));
    let boxed = crate::records::ca_pins::PinError::Refused {
        cluster: "a".to_owned(),
        management: "management".to_owned(),
        source: Box::new(refusal.clone()),
    };
    assert_eq!(refusal_in(&boxed), Some(&refusal));
    let transient = RecordError::Random("a".to_owned());
    assert_eq!(refusal_in(&transient), None);
}
