//! Every condition capstan reports and every reason it gives, spelled once: the cluster
//! conditions [`super::cluster_status`] computes, the fleet's own (the source, commit
//! verification, the status branch), as `/status`, `capstan status`, the status branch and
//! the metrics show them. Types and reasons are `PascalCase`, as Kubernetes spells them.

/// A condition's `status` when it holds.
pub const TRUE: &str = "True";
/// A condition's `status` when it does not.
pub const FALSE: &str = "False";

/// Every node Ready with the declared version, kubeconfig delivered: nothing to do.
pub const READY: &str = "Ready";
/// The control plane was initialised and its API answers.
pub const API_AVAILABLE: &str = "APIAvailable";
/// Flux holds the current admin kubeconfig.
pub const KUBECONFIG_DELIVERED: &str = "KubeconfigDelivered";
/// A person must act: a refusal, a drain past its deadline, a step that keeps failing.
pub const BLOCKED: &str = "Blocked";
/// The fleet's source (the Git remote) answers; when False, the last good revision is
/// still reconciled.
pub const SOURCE_AVAILABLE: &str = "SourceAvailable";
/// The status branch holds the current status; when False, the last push failed (the
/// remote's error says why) and reconciling carries on.
pub const STATUS_PUSHED: &str = "StatusPushed";
/// With commit verification (`source.verify`): whether the branch's tip is signed by an
/// allowed key; when False, the last verified revision is still reconciled.
pub const SOURCE_VERIFIED: &str = "SourceVerified";

/// Fencing is held back: more nodes are NotReady than `remediation.maxUnhealthy` allows (the
/// message names them). Listed only while it holds, so a notification can fire when it appears.
pub const REMEDIATION_HELD: &str = "RemediationHeld";

/// The cluster is suspended (`spec.suspend: true` in Git, or `capstan suspend`): it is
/// observed and reported, and no step starts on it. The message says which, who, when and
/// why. Listed only while it holds, so a notification can fire when it appears and clears.
pub const SUSPENDED: &str = "Suspended";

/// Every condition type: a cluster's (in the order its status lists them), then the fleet's.
pub const TYPES: [&str; 9] = [
    READY,
    API_AVAILABLE,
    KUBECONFIG_DELIVERED,
    BLOCKED,
    REMEDIATION_HELD,
    SUSPENDED,
    SOURCE_AVAILABLE,
    STATUS_PUSHED,
    SOURCE_VERIFIED,
];

/// A condition as the reference page lists it: whose it is, and the reasons it gives when it
/// holds and when it does not.
#[derive(Debug, Clone, Copy)]
pub struct Catalogued {
    /// Its type.
    pub condition: &'static str,
    /// Whose condition it is (`a cluster`, `the fleet`), and when it is listed.
    pub of: &'static str,
    /// Its reasons when True.
    pub when_true: &'static [&'static str],
    /// Its reasons when False.
    pub when_false: &'static [&'static str],
}

/// Every condition with its reasons, in [`TYPES`] order: `capstan reference` writes the book's
/// page from it.
pub const CATALOGUE: [Catalogued; 9] = {
    use reasons::*;
    const CLUSTER: &str = "a cluster";
    const WHILE_IT_HOLDS: &str = "a cluster (listed only while it holds)";
    const FLEET: &str = "the fleet";
    [
        Catalogued {
            condition: READY,
            of: CLUSTER,
            when_true: &[CONVERGED],
            when_false: &[RECONCILING, WAITING_FOR_CNI],
        },
        Catalogued {
            condition: API_AVAILABLE,
            of: CLUSTER,
            when_true: &[ANSWERING],
            when_false: &[NOT_INITIALISED, UNREACHABLE, DATASTORE_UNAVAILABLE],
        },
        Catalogued {
            condition: KUBECONFIG_DELIVERED,
            of: CLUSTER,
            when_true: &[CURRENT],
            when_false: &[OUTDATED, NOT_CONFIGURED],
        },
        Catalogued {
            condition: BLOCKED,
            of: CLUSTER,
            when_true: &[
                REFUSED,
                REPLACEMENT_FORBIDDEN,
                STEP_FAILING,
                RECORD_REFUSED,
                OBSERVATION_FAILED,
                INVALID_FILE,
            ],
            when_false: &[CLEAR],
        },
        Catalogued {
            condition: REMEDIATION_HELD,
            of: WHILE_IT_HOLDS,
            when_true: &[TOO_MANY_UNHEALTHY],
            when_false: &[],
        },
        Catalogued {
            condition: SUSPENDED,
            of: WHILE_IT_HOLDS,
            when_true: &[
                SUSPENDED_IN_GIT,
                SUSPENDED_AT_RUNTIME,
                SUSPENSION_UNREADABLE,
            ],
            when_false: &[],
        },
        Catalogued {
            condition: SOURCE_AVAILABLE,
            of: FLEET,
            when_true: &[FOLLOWING],
            when_false: &[SOURCE_UNREACHABLE],
        },
        Catalogued {
            condition: STATUS_PUSHED,
            of: FLEET,
            when_true: &[PUSHED],
            when_false: &[
                PUSH_REJECTED,
                PUSH_REFUSED,
                SECRET_REFUSED,
                STATUS_BRANCH_UNAVAILABLE,
            ],
        },
        Catalogued {
            condition: SOURCE_VERIFIED,
            of: FLEET,
            when_true: &[VERIFIED],
            when_false: &[
                UNSIGNED,
                KEY_NOT_ALLOWED,
                BAD_SIGNATURE,
                KEY_NOT_VALID,
                UNSUPPORTED_SIGNATURE,
                TOO_MANY_COMMITS,
                KEYS_UNREADABLE,
                UNVERIFIABLE,
                NOT_DESCENDANT,
                RECORD_UNAVAILABLE,
            ],
        },
    ]
};

/// Why a condition has its status. Each names the condition it explains.
pub mod reasons {
    /// `Ready` True: converged.
    pub const CONVERGED: &str = "Converged";
    /// `Ready` False: work in progress.
    pub const RECONCILING: &str = "Reconciling";
    /// `Ready` False: the file says `cni: none` and nodes report `NetworkPluginNotReady`
    /// until Flux installs a CNI (the message names them and the Flux Secret).
    pub const WAITING_FOR_CNI: &str = "WaitingForCNI";
    /// `APIAvailable` False: not initialised yet.
    pub const NOT_INITIALISED: &str = "NotInitialised";
    /// `APIAvailable` False: the API does not answer.
    pub const UNREACHABLE: &str = "Unreachable";
    /// `APIAvailable` False: the API does not answer because its K3s datastore does not.
    pub const DATASTORE_UNAVAILABLE: &str = "DatastoreUnavailable";
    /// `APIAvailable` True: the API answers.
    pub const ANSWERING: &str = "Answering";
    /// `KubeconfigDelivered` True: Flux holds the current kubeconfig.
    pub const CURRENT: &str = "Current";
    /// `KubeconfigDelivered` False: Flux holds another kubeconfig, or none.
    pub const OUTDATED: &str = "Outdated";
    /// `KubeconfigDelivered` False: no Flux delivery configured.
    pub const NOT_CONFIGURED: &str = "NotConfigured";
    /// `Blocked` True: a planner rule refuses.
    pub const REFUSED: &str = "Refused";
    /// `Blocked` True: a step failed several times in a row.
    pub const STEP_FAILING: &str = "StepFailing";
    /// `Blocked` True: `replace: forbid` refuses a change that would replace live machines
    /// (rule 16), and no other rule refuses.
    pub const REPLACEMENT_FORBIDDEN: &str = "ReplacementForbidden";
    /// `RemediationHeld` True: too many nodes are NotReady at once to fence any.
    pub const TOO_MANY_UNHEALTHY: &str = "TooManyUnhealthy";
    /// `Suspended` True: the cluster's file says `spec.suspend: true` (and perhaps it was
    /// suspended at runtime too: the message says so).
    pub const SUSPENDED_IN_GIT: &str = "SuspendedInGit";
    /// `Suspended` True: `capstan suspend` suspended the cluster (the message says who, when
    /// and why).
    pub const SUSPENDED_AT_RUNTIME: &str = "SuspendedAtRuntime";
    /// `Blocked` True: a step was refused because a Secret capstan keeps in the management
    /// cluster is not the record it expected there (another kind, another cluster, another
    /// identity, or not capstan's): it blocks at once, since retrying never changes that. The
    /// message names the Secret.
    pub const RECORD_REFUSED: &str = "RecordRefused";
    /// `Suspended` True: the cluster's runtime suspension record cannot be read; it counts as
    /// a suspension (fail closed). The message names the record.
    pub const SUSPENSION_UNREADABLE: &str = "SuspensionUnreadable";
    /// `Blocked` False: nothing blocks.
    pub const CLEAR: &str = "Clear";
    /// `Blocked` True: the cluster could not be observed.
    pub const OBSERVATION_FAILED: &str = "ObservationFailed";
    /// `Blocked` True: the cluster's file has errors.
    pub const INVALID_FILE: &str = "InvalidFile";
    /// `SourceAvailable` True: the source answered the last poll.
    pub const FOLLOWING: &str = "Following";
    /// `SourceAvailable` False: the source did not answer (unreachable, credentials or host key refused).
    pub const SOURCE_UNREACHABLE: &str = "SourceUnreachable";
    /// `StatusPushed` True: the status branch holds the current status.
    pub const PUSHED: &str = "Pushed";
    /// `StatusPushed` False: pushes kept being rejected: someone else kept pushing first.
    pub const PUSH_REJECTED: &str = "PushRejected";
    /// `StatusPushed` False: the remote refused the push (read-only credentials, a hook).
    pub const PUSH_REFUSED: &str = "PushRefused";
    /// `StatusPushed` False: the status would have held a secret: nothing was committed.
    pub const SECRET_REFUSED: &str = "SecretRefused";
    /// `StatusPushed` False: the status branch could not be read or written.
    pub const STATUS_BRANCH_UNAVAILABLE: &str = "StatusBranchUnavailable";
    /// `SourceVerified` True: the tip is signed by an allowed key (and, mode `all`, every commit it brings).
    pub const VERIFIED: &str = "Verified";
    /// `SourceVerified` False: a commit is not signed.
    pub const UNSIGNED: &str = "Unsigned";
    /// `SourceVerified` False: a commit is signed by a key the allowed keys do not hold.
    pub const KEY_NOT_ALLOWED: &str = "KeyNotAllowed";
    /// `SourceVerified` False: a commit's signature does not match it.
    pub const BAD_SIGNATURE: &str = "BadSignature";
    /// `SourceVerified` False: an allowed key may not make this signature: revoked, expired, outside its validity or
    /// namespaces.
    pub const KEY_NOT_VALID: &str = "KeyNotValid";
    /// `SourceVerified` False: a commit carries a kind of signature capstan does not verify (X.509).
    pub const UNSUPPORTED_SIGNATURE: &str = "UnsupportedSignature";
    /// `SourceVerified` False: mode `all`: more commits to verify than `maxCommits`.
    pub const TOO_MANY_COMMITS: &str = "TooManyCommits";
    /// `SourceVerified` False: the allowed keys cannot be read.
    pub const KEYS_UNREADABLE: &str = "KeysUnreadable";
    /// `SourceVerified` False: the commits cannot be read from the mirror.
    pub const UNVERIFIABLE: &str = "Unverifiable";
    /// `SourceVerified` False: the tip does not descend from the last verified revision (a
    /// rollback, a replay, or a rewritten history the operator did not allow).
    pub const NOT_DESCENDANT: &str = "NotDescendant";
    /// `SourceVerified` False: the record of the last verified revision in the management
    /// cluster cannot be read or written, so no new revision is applied.
    pub const RECORD_UNAVAILABLE: &str = "RecordUnavailable";

    /// Every reason.
    pub const ALL: [&str; 39] = [
        TOO_MANY_UNHEALTHY,
        WAITING_FOR_CNI,
        SUSPENDED_IN_GIT,
        SUSPENDED_AT_RUNTIME,
        SUSPENSION_UNREADABLE,
        RECORD_REFUSED,
        CONVERGED,
        RECONCILING,
        NOT_INITIALISED,
        UNREACHABLE,
        DATASTORE_UNAVAILABLE,
        ANSWERING,
        CURRENT,
        OUTDATED,
        NOT_CONFIGURED,
        REFUSED,
        REPLACEMENT_FORBIDDEN,
        STEP_FAILING,
        CLEAR,
        OBSERVATION_FAILED,
        INVALID_FILE,
        FOLLOWING,
        SOURCE_UNREACHABLE,
        PUSHED,
        PUSH_REJECTED,
        PUSH_REFUSED,
        SECRET_REFUSED,
        STATUS_BRANCH_UNAVAILABLE,
        VERIFIED,
        UNSIGNED,
        KEY_NOT_ALLOWED,
        BAD_SIGNATURE,
        KEY_NOT_VALID,
        UNSUPPORTED_SIGNATURE,
        TOO_MANY_COMMITS,
        KEYS_UNREADABLE,
        UNVERIFIABLE,
        NOT_DESCENDANT,
        RECORD_UNAVAILABLE,
    ];
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_and_reason_is_spelled_once_in_pascal_case() {
        let mut seen = std::collections::BTreeSet::new();
        for name in TYPES.iter().chain(&reasons::ALL) {
            assert!(seen.insert(*name), "{name} is spelled twice");
            assert!(
                name.starts_with(|c: char| c.is_ascii_uppercase())
                    && name.chars().all(|c| c.is_ascii_alphanumeric()),
                "{name} is not PascalCase"
            );
        }
    }

    #[test]
    fn the_catalogue_lists_every_type_in_order_and_every_reason_once() {
        let types: Vec<&str> = CATALOGUE.iter().map(|c| c.condition).collect();
        assert_eq!(types, TYPES);
        let mut listed: Vec<&str> = CATALOGUE
            .iter()
            .flat_map(|c| c.when_true.iter().chain(c.when_false))
            .copied()
            .collect();
        listed.sort_unstable();
        let mut all: Vec<&str> = reasons::ALL.to_vec();
        all.sort_unstable();
        assert_eq!(listed, all);
    }
}
