//! Where a cluster's admin kubeconfig may be delivered (`delivery.flux`): never into
//! [`super::RECORDS_NAMESPACE`] (refused in `validate`, with the field's other rules), where capstan keeps its own records (secrets bundles, CA pins, K3s
//! tokens, suspensions), and never into the Secret another cluster delivers to. A commit
//! choosing either would have capstan overwrite what it or another cluster relies on (the
//! Talos CA keys replaced by a kubeconfig, an operator's suspension lifted, one cluster's
//! workloads applied by Flux to another), so both are refused at validation, before any
//! Secret is read, at the file and line of the field; this module holds the rule across
//! files. The daemon refuses the same Secrets again when it
//! writes (`src/records/`), and the operator may narrow the namespaces further
//! (`--delivery-namespaces`).

use std::collections::BTreeMap;

use super::diagnostic::Diagnostic;
use super::validate::Checked;

/// The findings about clusters delivering to one Secret (management cluster, namespace and
/// name), each with the index (in `clusters`) of its file, which loses:
/// - a file invalid anyway, always (as with every rule across files, it never blocks a valid
///   one);
/// - of the valid files, every one but the cluster the Secret is named after
///   (`<cluster>-kubeconfig`, the default name): a commit aiming another cluster's delivery at
///   it must not take the Secret from its cluster;
/// - every valid file when none is that cluster: the file sorted first may be the one that
///   aimed at the other's Secret, and neither may deliver into a contested Secret.
pub fn across(clusters: &[Checked<'_>]) -> Vec<(usize, Diagnostic)> {
    let mut targets: BTreeMap<(String, String, String), Vec<usize>> = BTreeMap::new();
    for (index, checked) in clusters.iter().enumerate() {
        let name = &checked.cluster.metadata.name;
        if let Some(flux) = &checked.cluster.spec.delivery.flux {
            let key = (
                flux.cluster.clone(),
                flux.namespace.clone(),
                flux.secret_name_for(name),
            );
            targets.entry(key).or_default().push(index);
        }
    }
    let mut out = Vec::new();
    for ((management, namespace, secret), indices) in targets {
        if indices.len() < 2 {
            continue;
        }
        for index in losing(clusters, &indices, &secret) {
            let others: Vec<String> = indices
                .iter()
                .filter(|&&other| other != index)
                .map(|&other| {
                    let checked = &clusters[other];
                    format!(
                        "`{}` ({})",
                        checked.cluster.metadata.name, checked.file.name
                    )
                })
                .collect();
            out.push((
                index,
                clusters[index]
                    .file
                    .error(
                        "spec.delivery.flux",
                        format!(
                            "Secret {namespace}/{secret} on management cluster `{management}` is where cluster {} delivers its kubeconfig too",
                            others.join(", ")
                        ),
                    )
                    .with_hint("two clusters in one Secret would have Flux apply one cluster's workloads to the other: give each its own secretName"),
            ));
        }
    }
    out
}

/// Which of the files in `indices`, all delivering to Secret `secret`, lose (see [`across`]).
fn losing(clusters: &[Checked<'_>], indices: &[usize], secret: &str) -> Vec<usize> {
    let (valid, mut lose): (Vec<usize>, Vec<usize>) =
        indices.iter().partition(|&&index| clusters[index].valid);
    if valid.len() > 1 {
        let named_after = valid.iter().copied().find(|&index| {
            secret == format!("{}-kubeconfig", clusters[index].cluster.metadata.name)
        });
        lose.extend(
            valid
                .iter()
                .copied()
                .filter(|&index| Some(index) != named_after),
        );
    }
    lose.sort_unstable();
    lose
}

#[cfg(test)]
mod tests {
    use crate::spec::{RepoFiles, SourceText, load};

    const PROD: &str = include_str!("../../../../examples-repo/clusters/prod.yaml");
    const PLATFORM: &str = include_str!("../../../../examples-repo/clusters/platform.yaml");
    const FLEET: &str = include_str!("../../../../examples-repo/capstan.yaml");

    /// The example repository's findings and its desired clusters, `platform`'s delivery
    /// replaced by `platform_flux`.
    fn load_with(platform_flux: &str) -> (String, Vec<String>) {
        let source = |path: &str, text: String| SourceText {
            path: path.to_owned(),
            text,
        };
        let platform = PLATFORM.replacen(
            "    flux: {cluster: management}",
            &format!("    flux: {platform_flux}"),
            1,
        );
        assert_ne!(platform, PLATFORM, "the example names its delivery");
        let loaded = load(&RepoFiles {
            fleet: source("capstan.yaml", FLEET.to_owned()),
            clusters: vec![
                source("clusters/platform.yaml", platform),
                source("clusters/prod.yaml", PROD.to_owned()),
            ],
        });
        let desired = loaded
            .desired
            .map(|d| d.clusters.keys().cloned().collect())
            .unwrap_or_default();
        (loaded.diagnostics.to_string(), desired)
    }

    #[test]
    fn a_delivery_into_capstans_own_namespace_is_refused_at_its_line() {
        let (text, desired) = load_with(
            "{cluster: management, namespace: capstan-system, secretName: capstan-talos-talos}",
        );
        assert!(
            text.contains("clusters/platform.yaml:58:33: error: spec.delivery.flux.namespace: `capstan-system` holds the records capstan keeps"),
            "{text}"
        );
        assert_eq!(desired, ["prod"], "the file's cluster is not applied");
    }

    #[test]
    fn a_delivery_into_another_clusters_flux_secret_is_refused_and_that_cluster_keeps_it() {
        let (text, desired) = load_with("{cluster: management, secretName: prod-kubeconfig}");
        assert!(
            text.contains("clusters/platform.yaml:58:5: error: spec.delivery.flux: Secret flux-system/prod-kubeconfig on management cluster `management` is where cluster `prod` (clusters/prod.yaml) delivers its kubeconfig too"),
            "{text}"
        );
        assert!(!text.contains("clusters/prod.yaml:56"), "{text}");
        assert_eq!(desired, ["prod"], "the Secret is prod's: prod keeps it");
        // Another Secret, or the same name in another namespace, is fine.
        let (text, _) =
            load_with("{cluster: management, namespace: tenants, secretName: prod-kubeconfig}");
        assert!(!text.contains("error"), "{text}");
    }

    #[test]
    fn two_clusters_delivering_into_a_secret_named_after_neither_are_both_refused() {
        let source = |path: &str, text: String| SourceText {
            path: path.to_owned(),
            text,
        };
        let prod = PROD.replace("secretName: prod-kubeconfig", "secretName: shared");
        let platform = PLATFORM.replacen(
            "    flux: {cluster: management}",
            "    flux: {cluster: management, secretName: shared}",
            1,
        );
        assert!(prod != PROD && platform != PLATFORM);
        let loaded = load(&RepoFiles {
            fleet: source("capstan.yaml", FLEET.to_owned()),
            clusters: vec![
                source("clusters/platform.yaml", platform),
                source("clusters/prod.yaml", prod),
            ],
        });
        let text = loaded.diagnostics.to_string();
        for (file, other) in [
            ("clusters/platform.yaml", "`prod` (clusters/prod.yaml)"),
            ("clusters/prod.yaml", "`platform` (clusters/platform.yaml)"),
        ] {
            let finding = format!(
                "error: spec.delivery.flux: Secret flux-system/shared on management cluster `management` is where cluster {other} delivers its kubeconfig too"
            );
            assert!(
                text.lines()
                    .any(|l| l.starts_with(file) && l.contains(&finding)),
                "{file}: {text}"
            );
        }
        let desired = loaded.desired.expect("the fleet is valid");
        assert!(
            desired.clusters.is_empty(),
            "neither delivers into a contested Secret"
        );
    }
}
