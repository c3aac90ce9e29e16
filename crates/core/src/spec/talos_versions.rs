//! Talos releases and the Kubernetes releases each supports (pure).
//!
//! The rule, from Talos v1.13.9 (`pkg/machinery/constants/constants.go`, see
//! `reference/README.md`): Talos 1.13 defaults to Kubernetes 1.36 and supports the
//! `SupportedKubernetesVersions = 6` Kubernetes minors up to it, 1.31 to 1.36. Each Talos minor
//! moves that window by one Kubernetes minor (Talos 1.12 supports 1.30 to 1.35). capstan knows
//! Talos releases up to 1.13: a newer one is refused rather than guessed at.

use std::fmt;
use std::str::FromStr;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::Cow;

use super::values::{KubeVersion, MinorVersion, string_value};

/// How many Kubernetes minors a Talos release supports, the newest included
/// (`SupportedKubernetesVersions` in Talos v1.13.9's `constants.go`).
pub const SUPPORTED_KUBERNETES_MINORS: u32 = 6;

/// The newest Talos minor capstan knows the support window of (the reference data's v1.13.9).
pub const NEWEST_KNOWN_TALOS: MinorVersion = MinorVersion {
    major: 1,
    minor: 13,
};

/// Talos 1.13 defaults to Kubernetes 1.36: the newest Kubernetes minor of Talos `1.N` is
/// `1.(N + 23)`.
const NEWEST_KUBERNETES_MINOR_OFFSET: u32 = 23;

/// A Talos release, `vMAJOR.MINOR.PATCH` (e.g. `v1.13.9`), as Talos names its tags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TalosVersion {
    /// Major version (1).
    pub major: u32,
    /// Minor version: what the Kubernetes support window depends on.
    pub minor: u32,
    /// Patch version.
    pub patch: u32,
}

impl TalosVersion {
    /// The `MAJOR.MINOR` this release belongs to.
    pub fn minor_version(&self) -> MinorVersion {
        MinorVersion {
            major: self.major,
            minor: self.minor,
        }
    }
}

impl fmt::Display for TalosVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl FromStr for TalosVersion {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bare = text.strip_prefix('v').unwrap_or(text);
        let numbers: Option<Vec<u32>> = bare
            .split('.')
            .map(|part| {
                let all_digits = !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
                all_digits.then(|| part.parse().ok()).flatten()
            })
            .collect();
        match numbers.as_deref() {
            Some([major, minor, patch]) => Ok(Self {
                major: *major,
                minor: *minor,
                patch: *patch,
            }),
            _ => Err(format!(
                "`{text}` is not a Talos version: write vMAJOR.MINOR.PATCH, e.g. `v1.13.9`"
            )),
        }
    }
}

string_value!(
    TalosVersion,
    "TalosVersion",
    Some(r"^v?[0-9]+\.[0-9]+\.[0-9]+$"),
    "Talos Linux release, vMAJOR.MINOR.PATCH, e.g. v1.13.9"
);

/// A Talos release paired with a Kubernetes release it does not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionSupport {
    /// The Kubernetes minor is outside the Talos release's window.
    #[error(
        "Talos {talos} does not support Kubernetes {kubernetes}: it supports Kubernetes {oldest} to {newest}"
    )]
    KubernetesOutsideWindow {
        /// The Talos release asked for.
        talos: TalosVersion,
        /// The Kubernetes release asked for.
        kubernetes: KubeVersion,
        /// The oldest Kubernetes minor that Talos release supports.
        oldest: MinorVersion,
        /// The newest Kubernetes minor that Talos release supports.
        newest: MinorVersion,
    },
    /// A Talos release newer than capstan knows (or not 1.x): its window is not known.
    #[error(
        "Talos {talos} (with Kubernetes {kubernetes}) is not a release capstan knows: it knows Talos v1.0 to v{}.{}",
        NEWEST_KNOWN_TALOS.major,
        NEWEST_KNOWN_TALOS.minor
    )]
    UnknownTalos {
        /// The Talos release asked for.
        talos: TalosVersion,
        /// The Kubernetes release asked for.
        kubernetes: KubeVersion,
    },
}

/// The Kubernetes minors `talos` supports, oldest and newest included; `None` for a release
/// capstan does not know.
pub fn supported_kubernetes(talos: TalosVersion) -> Option<(MinorVersion, MinorVersion)> {
    if talos.major != NEWEST_KNOWN_TALOS.major || talos.minor > NEWEST_KNOWN_TALOS.minor {
        return None;
    }
    let newest = talos.minor + NEWEST_KUBERNETES_MINOR_OFFSET;
    let oldest = newest + 1 - SUPPORTED_KUBERNETES_MINORS;
    Some((
        MinorVersion {
            major: 1,
            minor: oldest,
        },
        MinorVersion {
            major: 1,
            minor: newest,
        },
    ))
}

/// Whether Talos `talos` runs Kubernetes `kubernetes`.
///
/// # Errors
///
/// [`VersionSupport`] naming both releases and, for a known Talos release, the Kubernetes
/// minors it supports.
pub fn check_support(talos: TalosVersion, kubernetes: KubeVersion) -> Result<(), VersionSupport> {
    let Some((oldest, newest)) = supported_kubernetes(talos) else {
        return Err(VersionSupport::UnknownTalos { talos, kubernetes });
    };
    let minor = kubernetes.minor_version();
    if kubernetes.k3s_release.is_some() || minor < oldest || minor > newest {
        return Err(VersionSupport::KubernetesOutsideWindow {
            talos,
            kubernetes,
            oldest,
            newest,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn talos(text: &str) -> TalosVersion {
        text.parse().expect("a Talos version")
    }

    fn kube(text: &str) -> KubeVersion {
        text.parse().expect("a Kubernetes version")
    }

    #[test]
    fn talos_1_13_runs_the_six_kubernetes_minors_up_to_1_36() {
        for minor in 31..=36 {
            let version = kube(&format!("1.{minor}.0"));
            assert_eq!(
                check_support(talos("v1.13.9"), version),
                Ok(()),
                "1.{minor}"
            );
        }
        assert_eq!(check_support(talos("v1.13.0"), kube("1.36.3")), Ok(()));
    }

    #[test]
    fn a_kubernetes_minor_outside_the_window_is_refused_naming_both_and_the_window() {
        for version in ["1.30.14", "1.37.0", "2.36.0"] {
            let err = check_support(talos("v1.13.9"), kube(version)).expect_err(version);
            assert_eq!(
                err.to_string(),
                format!(
                    "Talos v1.13.9 does not support Kubernetes {version}: it supports Kubernetes 1.31 to 1.36"
                )
            );
        }
    }

    #[test]
    fn the_window_moves_with_the_talos_minor() {
        assert_eq!(
            supported_kubernetes(talos("v1.12.4")),
            Some(("1.30".parse().unwrap(), "1.35".parse().unwrap()))
        );
        assert!(check_support(talos("v1.12.4"), kube("1.36.0")).is_err());
    }

    #[test]
    fn a_talos_release_newer_than_capstan_knows_is_refused_not_guessed() {
        let err = check_support(talos("v1.14.0"), kube("1.37.0")).expect_err("unknown");
        assert_eq!(
            err.to_string(),
            "Talos v1.14.0 (with Kubernetes 1.37.0) is not a release capstan knows: it knows Talos v1.0 to v1.13"
        );
        assert!(check_support(talos("v2.0.0"), kube("1.36.0")).is_err());
    }

    #[test]
    fn a_k3s_release_is_not_a_talos_kubernetes() {
        assert!(check_support(talos("v1.13.9"), kube("v1.36.2+k3s1")).is_err());
    }

    #[test]
    fn talos_versions_parse_with_or_without_their_v_and_print_with_it() {
        assert_eq!(talos("1.13.9").to_string(), "v1.13.9");
        assert!("v1.13".parse::<TalosVersion>().is_err());
        assert!("v1.13.x".parse::<TalosVersion>().is_err());
    }
}
