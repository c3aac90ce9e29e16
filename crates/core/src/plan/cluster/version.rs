//! Rule 7: which Kubernetes version a cluster moves to. Patches move freely; a minor moves one
//! at a time and only once approved; nothing moves backwards. A refused change keeps the
//! cluster at its current version and says which rule refused it.

use super::Input;
use crate::spec::KubeVersion;

/// The version the cluster's machines are built at, and the refusal of the desired one, if
/// any.
pub(crate) fn resolve(input: &Input<'_>) -> (KubeVersion, Option<String>) {
    let want = input.spec.kubernetes.version;
    let approved = |version: KubeVersion| {
        input
            .policy
            .approved_minors
            .contains(&version.minor_version())
    };
    let Some(control_plane) = &input.observed.control_plane else {
        if approved(want) {
            return (want, None);
        }
        return (
            want,
            Some(format!(
                "{want} refused (rule 7): minor {} is not in approvedMinors; add \"{}\" to approvedMinors in capstan.yaml once every Flux component supports it",
                want.minor_version(),
                want.minor_version()
            )),
        );
    };
    let current = control_plane.version;
    if want == current {
        return (current, None);
    }
    let refuse = |why: String| {
        (
            current,
            Some(format!("{current} → {want} refused (rule 7): {why}")),
        )
    };
    if want < current {
        return refuse(format!(
            "a downgrade; Kubernetes never moves backwards: set spec.kubernetes.version back to {current}"
        ));
    }
    if want.major != current.major {
        return refuse("a major version change".to_owned());
    }
    if want.minor == current.minor {
        return (want, None);
    }
    if want.minor > current.minor + 1 {
        return refuse(format!(
            "one minor at a time: move to {} first",
            current.minor_version().next()
        ));
    }
    if !approved(want) {
        return refuse(format!(
            "minor {} is not in approvedMinors; add \"{}\" to approvedMinors in capstan.yaml once every Flux component supports it",
            want.minor_version(),
            want.minor_version()
        ));
    }
    (want, None)
}
