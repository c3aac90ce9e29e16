//! The lab's own value types: durations and the DHCP range of its config file, and Kubernetes
//! release numbers as kubeadm and the kubelet read them. The lab parses these itself, from
//! their written formats, rather than borrowing capstan's validators: a wrong rule in capstan
//! must not pass capstan's tests by being the lab's rule too.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A duration in the lab config, written as `300ms`, `3s`, `1m` (humantime's format).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct LabDuration(pub Duration);

impl LabDuration {
    /// A duration of `millis` milliseconds (for defaults).
    pub const fn millis(millis: u64) -> Self {
        LabDuration(Duration::from_millis(millis))
    }
}

impl TryFrom<String> for LabDuration {
    type Error = String;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        humantime::parse_duration(&text)
            .map(LabDuration)
            .map_err(|err| {
                format!("`{text}` is not a duration ({err}): write e.g. `300ms` or `3s`")
            })
    }
}

impl From<LabDuration> for String {
    fn from(duration: LabDuration) -> String {
        humantime::format_duration(duration.0).to_string()
    }
}

/// An inclusive range of IPv4 addresses, written `FIRST-LAST` (the simulated DHCP range).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Ipv4Range {
    /// The first address handed out.
    pub first: Ipv4Addr,
    /// The last address handed out.
    pub last: Ipv4Addr,
}

impl Ipv4Range {
    /// Whether `address` is inside the range.
    pub fn contains(&self, address: Ipv4Addr) -> bool {
        self.first <= address && address <= self.last
    }
}

impl TryFrom<String> for Ipv4Range {
    type Error = String;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        let invalid = || {
            format!(
                "`{text}` is not an IPv4 range: write FIRST-LAST, e.g. `192.168.1.100-192.168.1.169`"
            )
        };
        let (first, last) = text.split_once('-').ok_or_else(invalid)?;
        let first: Ipv4Addr = first.trim().parse().map_err(|_| invalid())?;
        let last: Ipv4Addr = last.trim().parse().map_err(|_| invalid())?;
        if first > last {
            return Err(format!("`{text}`: the first address comes after the last"));
        }
        Ok(Ipv4Range { first, last })
    }
}

impl From<Ipv4Range> for String {
    fn from(range: Ipv4Range) -> String {
        format!("{}-{}", range.first, range.last)
    }
}

/// A Kubernetes release as kubeadm and the kubelet name it: `v1.36.2` (the `v` is optional on
/// input, as kubeadm's `--kubernetes-version` allows).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KubeVersion {
    /// Major version.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
    /// Patch version.
    pub patch: u32,
    /// K3s's build of it, the `N` of `+k3sN` (K3s nodes and servers report it).
    pub k3s: Option<u32>,
}

impl KubeVersion {
    /// `(major, minor)`: what version-skew rules compare.
    pub fn minor_version(&self) -> (u32, u32) {
        (self.major, self.minor)
    }

    /// Whether `self` is more than one minor ahead of `current` (kubeadm refuses such an
    /// upgrade: "Specified version to upgrade to ... is too high").
    pub fn skips_a_minor_from(&self, current: &KubeVersion) -> bool {
        (self.major, self.minor) > (current.major, current.minor + 1)
    }
}

impl fmt::Display for KubeVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        match self.k3s {
            Some(build) => write!(f, "+k3s{build}"),
            None => Ok(()),
        }
    }
}

impl FromStr for KubeVersion {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = || {
            format!(
                "version string \"{text}\" doesn't match expected regular expression: \"^v(\\d+\\.\\d+\\.\\d+)\""
            )
        };
        let bare = text.strip_prefix('v').unwrap_or(text);
        let (bare, k3s) = match bare.split_once('+') {
            Some((numbers, build)) => {
                let build = build
                    .strip_prefix("k3s")
                    .and_then(|n| n.parse().ok())
                    .ok_or_else(invalid)?;
                (numbers, Some(build))
            }
            None => (bare, None),
        };
        let mut numbers = bare.split('.');
        let mut next = || -> Result<u32, String> {
            numbers
                .next()
                .filter(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|part| part.parse().ok())
                .ok_or_else(invalid)
        };
        let version = KubeVersion {
            major: next()?,
            minor: next()?,
            patch: next()?,
            k3s,
        };
        match numbers.next() {
            None => Ok(version),
            Some(_) => Err(invalid()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_read_with_or_without_the_v() {
        let version: KubeVersion = "v1.36.2".parse().expect("valid");
        assert_eq!(version, "1.36.2".parse().expect("valid"));
        assert_eq!(version.to_string(), "1.36.2");
        for bad in [
            "1.36", "1.36.2.1", "v1.x.2", "", "1..2", "1.36.-2", "1.36.+2",
        ] {
            assert!(bad.parse::<KubeVersion>().is_err(), "{bad} must be refused");
        }
    }

    #[test]
    fn an_upgrade_two_minors_ahead_skips_one() {
        let current: KubeVersion = "1.35.4".parse().expect("valid");
        assert!(
            !"1.36.0"
                .parse::<KubeVersion>()
                .expect("valid")
                .skips_a_minor_from(&current)
        );
        assert!(
            "1.37.0"
                .parse::<KubeVersion>()
                .expect("valid")
                .skips_a_minor_from(&current)
        );
    }

    #[test]
    fn config_values_round_trip_through_text() {
        let range = Ipv4Range::try_from("192.168.1.100-192.168.1.169".to_owned()).expect("valid");
        assert_eq!(String::from(range), "192.168.1.100-192.168.1.169");
        assert!(Ipv4Range::try_from("192.168.1.9-192.168.1.1".to_owned()).is_err());
        let duration = LabDuration::try_from("300ms".to_owned()).expect("valid");
        assert_eq!(duration, LabDuration::millis(300));
        assert!(LabDuration::try_from("soon".to_owned()).is_err());
    }
}
