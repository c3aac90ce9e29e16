//! Scalar value types of the cluster language: versions, durations, cron schedules, address
//! ranges and names. Each parses from the string a user writes and prints back the same way, so
//! a file round-trips and the JSON Schema can describe it as a string with a pattern.

use std::borrow::Cow;
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;
use std::time::Duration;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Implements `Serialize`/`Deserialize` through `Display`/`FromStr`, so the error a user sees is
/// the `FromStr` error, and `JsonSchema` as a string with the given pattern and description.
macro_rules! string_value {
    ($ty:ty, $name:literal, $pattern:expr, $description:literal) => {
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = String::deserialize(deserializer)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }

        impl JsonSchema for $ty {
            fn schema_name() -> Cow<'static, str> {
                Cow::Borrowed($name)
            }

            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                let pattern: Option<&str> = $pattern;
                match pattern {
                    Some(pattern) => json_schema!({
                        "type": "string",
                        "pattern": pattern,
                        "description": $description,
                    }),
                    None => json_schema!({"type": "string", "description": $description}),
                }
            }
        }
    };
}
pub(crate) use string_value;

/// A Kubernetes release, `MAJOR.MINOR.PATCH` (e.g. `1.36.2`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KubeVersion {
    /// Major version (always 1 today).
    pub major: u32,
    /// Minor version: moves one at a time, each approved in `capstan.yaml`.
    pub minor: u32,
    /// Patch version: moves freely.
    pub patch: u32,
    /// K3s's own release of this Kubernetes version, the `N` of `+k3sN` (K3s clusters only).
    pub k3s_release: Option<u32>,
}

impl KubeVersion {
    /// The `MAJOR.MINOR` this release belongs to.
    pub fn minor_version(&self) -> MinorVersion {
        MinorVersion {
            major: self.major,
            minor: self.minor,
        }
    }
}

impl fmt::Display for KubeVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        match self.k3s_release {
            Some(release) => write!(f, "+k3s{release}"),
            None => Ok(()),
        }
    }
}

impl FromStr for KubeVersion {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bare = text.strip_prefix('v').unwrap_or(text);
        let (numbers, k3s_release) = match bare.split_once('+') {
            Some((numbers, build)) => (numbers, Some(k3s_release(build))),
            None => (bare, None),
        };
        match (parse_numbers(numbers).as_deref(), k3s_release) {
            (Some([major, minor, patch]), None | Some(Some(_))) => Ok(Self {
                major: *major,
                minor: *minor,
                patch: *patch,
                k3s_release: k3s_release.flatten(),
            }),
            _ => Err(format!(
                "`{text}` is not a Kubernetes version: write MAJOR.MINOR.PATCH, e.g. `1.36.2` (K3s: `v1.36.2+k3s1`)"
            )),
        }
    }
}

/// The number `N` of a `k3sN` build suffix; `None` for any other suffix.
fn k3s_release(build: &str) -> Option<u32> {
    let digits = build.strip_prefix("k3s")?;
    let all_digits = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
    all_digits.then(|| digits.parse().ok()).flatten()
}

string_value!(
    KubeVersion,
    "KubeVersion",
    Some(r"^v?[0-9]+\.[0-9]+\.[0-9]+(\+k3s[0-9]+)?$"),
    "Kubernetes release, MAJOR.MINOR.PATCH; a K3s release adds its build, e.g. v1.36.2+k3s1"
);

/// A Kubernetes minor release, `MAJOR.MINOR` (e.g. `1.36`), as listed in `approvedMinors`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MinorVersion {
    /// Major version.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

impl MinorVersion {
    /// The minor that follows this one (1.36 → 1.37).
    pub fn next(&self) -> MinorVersion {
        MinorVersion {
            major: self.major,
            minor: self.minor + 1,
        }
    }
}

impl fmt::Display for MinorVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl FromStr for MinorVersion {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match parse_numbers(text).as_deref() {
            Some([major, minor]) => Ok(Self {
                major: *major,
                minor: *minor,
            }),
            _ => Err(format!(
                "`{text}` is not a Kubernetes minor version: write MAJOR.MINOR, e.g. `1.36` (quote it in YAML)"
            )),
        }
    }
}

string_value!(
    MinorVersion,
    "MinorVersion",
    Some(r"^[0-9]+\.[0-9]+$"),
    "Kubernetes minor release, MAJOR.MINOR"
);

fn parse_numbers(text: &str) -> Option<Vec<u32>> {
    text.split('.')
        .map(|part| {
            let all_digits = !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
            all_digits.then(|| part.parse().ok()).flatten()
        })
        .collect()
}

/// A duration written the human way: `30s`, `10m`, `4h`, `30d`, `1h 30m`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct HumanDuration(pub Duration);

impl HumanDuration {
    /// Whether it is no time at all (an unset `soak`).
    pub fn is_zero(&self) -> bool {
        self.0.is_zero()
    }

    /// A duration of whole minutes (for defaults).
    pub const fn minutes(minutes: u64) -> Self {
        HumanDuration(Duration::from_secs(minutes * 60))
    }

    /// A duration of whole days (for defaults).
    pub const fn days(days: u64) -> Self {
        HumanDuration(Duration::from_secs(days * 86_400))
    }
}

impl fmt::Display for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", humantime::format_duration(self.0))
    }
}

impl FromStr for HumanDuration {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        humantime::parse_duration(text)
            .map(HumanDuration)
            .map_err(|_| {
                format!("`{text}` is not a duration: write e.g. `30s`, `10m`, `4h` or `30d`")
            })
    }
}

string_value!(
    HumanDuration,
    "Duration",
    Some(r"^\s*[0-9]+\s*[a-zA-Z]+(\s*[0-9]+\s*[a-zA-Z]+)*\s*$"),
    "Duration such as 30s, 10m, 4h or 30d"
);

/// A cron schedule with seconds, `SEC MIN HOUR DAY-OF-MONTH MONTH DAY-OF-WEEK [YEAR]` (e.g.
/// `0 0 1 * * Sat`: Saturdays at 01:00), or the crontab form of five fields without seconds,
/// `MIN HOUR DAY-OF-MONTH MONTH DAY-OF-WEEK` (e.g. `0 0 20 12 *`: 20 December at midnight). It
/// is read in the cluster's `maintenance.timeZone` (UTC by default).
#[derive(Debug, Clone)]
pub struct CronSchedule {
    text: String,
    schedule: cron::Schedule,
}

impl CronSchedule {
    /// The parsed schedule, to compute window starts.
    pub fn schedule(&self) -> &cron::Schedule {
        &self.schedule
    }

    /// How many times a minute it fires at most (its seconds field's values): a schedule
    /// that fires more than once a minute is refused where a window opens on it.
    pub fn fires_per_minute(&self) -> u32 {
        use cron::TimeUnitSpec as _;
        self.schedule.seconds().count()
    }
}

impl PartialEq for CronSchedule {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for CronSchedule {}

impl fmt::Display for CronSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FromStr for CronSchedule {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        // Five fields are the crontab form: it fires at second 0.
        let fields = text.split_whitespace().count();
        let with_seconds = if fields == 5 {
            Cow::Owned(format!("0 {text}"))
        } else {
            Cow::Borrowed(text)
        };
        cron::Schedule::from_str(&with_seconds)
            .map(|schedule| CronSchedule {
                text: text.to_owned(),
                schedule,
            })
            .map_err(|err| {
                format!(
                    "`{text}` is not a cron schedule ({err}): write five fields \
                     MIN HOUR DAY-OF-MONTH MONTH DAY-OF-WEEK (`0 0 20 12 *`) or six with \
                     seconds first (`0 0 1 * * Sat`)"
                )
            })
    }
}

string_value!(
    CronSchedule,
    "CronSchedule",
    None,
    "Cron schedule: MIN HOUR DAY-OF-MONTH MONTH DAY-OF-WEEK, or with seconds SEC MIN HOUR DAY-OF-MONTH MONTH DAY-OF-WEEK [YEAR]; read in maintenance.timeZone (UTC by default)"
);

/// An IANA time zone (`Europe/Rome`, `UTC`), looked up in the database bundled into capstan:
/// no file is read, so a site without `/usr/share/zoneinfo` reads schedules the same way.
#[derive(Debug, Clone)]
pub struct TimeZoneName {
    name: String,
    zone: jiff::tz::TimeZone,
}

impl TimeZoneName {
    /// UTC, the zone schedules are read in unless a cluster names another.
    pub fn utc() -> Self {
        TimeZoneName {
            name: "UTC".to_owned(),
            zone: jiff::tz::TimeZone::UTC,
        }
    }

    /// The zone, to read schedules in.
    pub fn zone(&self) -> &jiff::tz::TimeZone {
        &self.zone
    }

    /// Whether it is UTC (times are then written as before zones existed).
    pub fn is_utc(&self) -> bool {
        self.zone == jiff::tz::TimeZone::UTC
    }

    /// The name as written.
    pub fn as_str(&self) -> &str {
        &self.name
    }
}

impl Default for TimeZoneName {
    fn default() -> Self {
        TimeZoneName::utc()
    }
}

impl PartialEq for TimeZoneName {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for TimeZoneName {}

impl fmt::Display for TimeZoneName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

impl FromStr for TimeZoneName {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let database = bundled_time_zones();
        // A name is a short path of letters; anything else is refused before the lookup.
        let plausible = !text.is_empty()
            && text.len() <= 64
            && text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '_' | '-' | '+'));
        if plausible && let Ok(zone) = database.get(text) {
            return Ok(TimeZoneName {
                name: text.to_owned(),
                zone,
            });
        }
        let mut message = format!("`{text}` is not a time zone of the IANA database");
        // Only a plausible name is compared with the database's (a long one would cost its
        // length times every zone's).
        let closest = database
            .available()
            .filter(|_| plausible)
            .map(|name| {
                let name = name.as_str().to_owned();
                (
                    strsim::jaro_winkler(&name.to_lowercase(), &text.to_lowercase()),
                    name,
                )
            })
            .filter(|(score, _)| *score > 0.8)
            .max_by(|a, b| a.0.total_cmp(&b.0));
        match closest {
            Some((_, name)) => message.push_str(&format!(": did you mean `{name}`?")),
            None => message.push_str(": write an Area/City name such as `Europe/Rome`, or `UTC`"),
        }
        Err(message)
    }
}

/// The IANA database compiled into capstan (never the system's files: the planner reads none).
pub(crate) fn bundled_time_zones() -> &'static jiff::tz::TimeZoneDatabase {
    static DATABASE: std::sync::OnceLock<jiff::tz::TimeZoneDatabase> = std::sync::OnceLock::new();
    DATABASE.get_or_init(jiff::tz::TimeZoneDatabase::bundled)
}

string_value!(
    TimeZoneName,
    "TimeZone",
    None,
    "IANA time zone such as Europe/Rome (default UTC), from the database bundled into capstan"
);

/// A range of addresses a cluster must not use: `192.168.1.170-192.168.1.189`,
/// `192.168.1.160/28` or a single address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddressRange {
    /// First address of the range (inclusive).
    pub first: IpAddr,
    /// Last address of the range (inclusive).
    pub last: IpAddr,
}

impl AddressRange {
    /// Whether `address` lies in the range.
    pub fn contains(&self, address: IpAddr) -> bool {
        self.first <= address && address <= self.last
    }
}

impl fmt::Display for AddressRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.first == self.last {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}-{}", self.first, self.last)
        }
    }
}

impl FromStr for AddressRange {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = || {
            format!(
                "`{text}` is not an address range: write FIRST-LAST \
                 (`192.168.1.170-192.168.1.189`), a CIDR (`192.168.1.160/28`) or one address"
            )
        };
        if let Some((first, last)) = text.split_once('-') {
            let first: IpAddr = first.trim().parse().map_err(|_| invalid())?;
            let last: IpAddr = last.trim().parse().map_err(|_| invalid())?;
            if first.is_ipv4() != last.is_ipv4() || first > last {
                return Err(format!(
                    "`{text}`: the first address must not come after the last"
                ));
            }
            return Ok(AddressRange { first, last });
        }
        if let Ok(net) = text.parse::<ipnet::IpNet>() {
            return Ok(AddressRange {
                first: net.network(),
                last: net.broadcast(),
            });
        }
        let address: IpAddr = text.trim().parse().map_err(|_| invalid())?;
        Ok(AddressRange {
            first: address,
            last: address,
        })
    }
}

string_value!(
    AddressRange,
    "AddressRange",
    None,
    "Addresses: FIRST-LAST, a CIDR, or a single address"
);

/// Whether `name` is a DNS-1123 label: at most 63 lowercase letters, digits and `-`, starting
/// and ending with a letter or digit (what Kubernetes and Proxmox accept as a name).
pub fn is_dns1123_label(name: &str) -> bool {
    let bytes = name.as_bytes();
    let edge_ok = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes.iter().all(|&b| edge_ok(b) || b == b'-')
        && edge_ok(bytes[0])
        && edge_ok(bytes[bytes.len() - 1])
}

/// Whether `name` is a DNS-1123 subdomain: dot-separated labels, at most 253 characters.
pub fn is_dns1123_subdomain(name: &str) -> bool {
    name.len() <= 253 && name.split('.').all(is_dns1123_label)
}

/// Whether `name` is a Proxmox VE VM name (its `dns-name` format: labels of letters, digits
/// and `-`, not starting or ending with `-`, joined by `.`), at most 253 characters.
pub fn is_vm_name(name: &str) -> bool {
    let label = |label: &str| {
        let bytes = label.as_bytes();
        (1..=63).contains(&bytes.len())
            && bytes
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || *b == b'-')
            && bytes[0] != b'-'
            && bytes[bytes.len() - 1] != b'-'
    };
    name.len() <= 253 && name.split('.').all(label)
}

/// Whether `id` is a Proxmox VE storage id (`pve-storage-id`: a letter, then letters, digits,
/// `-`, `_`, `.`).
pub fn is_storage_id(id: &str) -> bool {
    let mut bytes = id.bytes();
    (2..=64).contains(&id.len())
        && bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_version_parses_three_numbers_and_an_optional_v() {
        assert_eq!(
            "1.36.2".parse(),
            Ok(KubeVersion {
                major: 1,
                minor: 36,
                patch: 2,
                k3s_release: None,
            })
        );
        assert_eq!(
            "v1.36.2"
                .parse::<KubeVersion>()
                .map(|v| v.to_string())
                .as_deref(),
            Ok("1.36.2")
        );
        for bad in ["1.36", "1.36.2.1", "1.x.2", "", "1..2", "1.36.-2"] {
            assert!(bad.parse::<KubeVersion>().is_err(), "{bad} must be refused");
        }
    }

    #[test]
    fn kube_version_keeps_a_k3s_release_and_prints_it_back() {
        let k3s: KubeVersion = "v1.36.2+k3s1".parse().expect("a K3s release");
        assert_eq!(k3s.k3s_release, Some(1));
        assert_eq!(k3s.minor_version().to_string(), "1.36");
        assert_eq!(k3s.to_string(), "1.36.2+k3s1");
        for bad in ["1.36.2+", "1.36.2+k3s", "1.36.2+rke2r1", "1.36.2+k3sx"] {
            assert!(bad.parse::<KubeVersion>().is_err(), "{bad} must be refused");
        }
    }

    #[test]
    fn minor_version_orders_numerically() {
        let a: MinorVersion = "1.9".parse().expect("valid");
        let b: MinorVersion = "1.10".parse().expect("valid");
        assert!(a < b);
        assert_eq!(a.next().to_string(), "1.10");
    }

    #[test]
    fn durations_read_as_users_write_them() {
        assert_eq!("10m".parse(), Ok(HumanDuration::minutes(10)));
        assert_eq!("30d".parse(), Ok(HumanDuration::days(30)));
        assert_eq!(HumanDuration::minutes(90).to_string(), "1h 30m");
        assert!("ten minutes".parse::<HumanDuration>().is_err());
    }

    #[test]
    fn cron_schedules_take_five_fields_or_six_with_seconds() {
        use cron::TimeUnitSpec;
        assert!("0 0 1 * * Sat".parse::<CronSchedule>().is_ok());
        let crontab: CronSchedule = "0 0 20 12 *".parse().expect("crontab form");
        assert_eq!(crontab.to_string(), "0 0 20 12 *");
        // Read as minute 0, hour 0, 20 December: not second 0, minute 0, 20:00 on the 12th.
        assert!(crontab.schedule().hours().includes(0));
        assert!(crontab.schedule().days_of_month().includes(20));
        assert!(crontab.schedule().months().includes(12));
        let err = "every saturday"
            .parse::<CronSchedule>()
            .expect_err("not cron");
        assert!(err.contains("MIN HOUR DAY-OF-MONTH"), "{err}");
    }

    #[test]
    fn time_zones_come_from_the_bundled_database_and_misspellings_get_a_hint() {
        let rome: TimeZoneName = "Europe/Rome".parse().expect("a zone");
        assert_eq!(rome.to_string(), "Europe/Rome");
        assert!(!rome.is_utc());
        assert!("UTC".parse::<TimeZoneName>().expect("utc").is_utc());
        let err = "Europe/Roma".parse::<TimeZoneName>().expect_err("unknown");
        assert_eq!(
            err,
            "`Europe/Roma` is not a time zone of the IANA database: did you mean `Europe/Rome`?"
        );
        let err = "../../etc/passwd"
            .parse::<TimeZoneName>()
            .expect_err("not a name");
        assert!(
            err.starts_with("`../../etc/passwd` is not a time zone"),
            "{err}"
        );
    }

    #[test]
    fn address_ranges_accept_dash_cidr_and_single_forms() {
        let range: AddressRange = "192.168.1.170-192.168.1.189".parse().expect("valid");
        assert!(range.contains("192.168.1.180".parse().expect("ip")));
        assert!(!range.contains("192.168.1.190".parse().expect("ip")));
        let cidr: AddressRange = "10.0.0.0/30".parse().expect("valid");
        assert_eq!(cidr.to_string(), "10.0.0.0-10.0.0.3");
        assert!("10.0.0.9-10.0.0.1".parse::<AddressRange>().is_err());
    }

    #[test]
    fn dns_labels_follow_rfc_1123() {
        assert!(is_dns1123_label("prod-1"));
        for bad in ["Prod", "-prod", "prod-", "pr_od", "", &"a".repeat(64)] {
            assert!(!is_dns1123_label(bad), "{bad}");
        }
        assert!(is_dns1123_subdomain("k8s-prod.lab.example"));
    }
}
