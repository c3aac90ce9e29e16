//! How a VM says it is capstan's: its name, its description and its tags (pure).
//!
//! Ownership is written from the very first API call that creates a VM: the clone call carries
//! the name (`capstan-<cluster>-<pool>-<suffix>`) and a description holding one marker line;
//! a config call right after adds the tags. The tags make recognition O(1) from
//! `/cluster/resources`; the description is the fallback for a VM left untagged by a crash
//! between the two calls.
//!
//! # Invariants
//! - Every tag produced here matches Proxmox's `pve-tag` format `[a-z0-9_][a-z0-9_\-\+\.]*`.
//! - `parse_tags(encode_tags(o, t)) == Ok(Some(o, t))` and the same for descriptions.
//! - Whoever may tag a VM (or edit its description) in Proxmox writes what is read here: a
//!   cluster or pool name read back is one the spec could have declared (a DNS-1123 label,
//!   short enough for a VM name) and a spec hash is a short run of letters and digits, or the
//!   VM is refused ([`RefusedOwner`]), never read as anyone's. Paths, labels and status
//!   entries are built from these names.

use jiff::Timestamp;

use crate::model::{NodeName, Ownership, Role};
use crate::spec::validate::fits_vm_name;
use crate::spec::values::is_dns1123_label;

/// The tag every capstan VM carries.
pub const OWNER_TAG: &str = "capstan";
/// Prefix of every VM name capstan gives.
pub const NAME_PREFIX: &str = "capstan-";
/// The marker that starts the ownership line in a VM's description.
pub const DESCRIPTION_MARKER: &str = "capstan.dev/owner:";

const CLUSTER_TAG: &str = "cluster-";
const ROLE_TAG: &str = "role-";
const POOL_TAG: &str = "pool-";
const SPEC_TAG: &str = "spec-";
const CREATED_TAG: &str = "created-";

/// Who owns a VM and since when, as read back from Proxmox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmOwner {
    /// Cluster, role, pool and spec hash.
    pub ownership: Ownership,
    /// When capstan created the VM (absent when an older writer left it out).
    pub created: Option<Timestamp>,
}

/// A VM marked as capstan's whose tag (or description field) holds a value capstan never
/// writes: someone who may tag VMs in Proxmox wrote it. The VM is nobody's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} is not {reason}", shown(.found))]
pub struct RefusedOwner {
    /// The tag (`cluster-…`) or description field (`cluster=…`) as found.
    pub found: String,
    /// What the value must be.
    pub reason: &'static str,
}

/// Longest spec hash accepted (capstan writes 12 hex digits).
const MAX_SPEC_HASH_LEN: usize = 64;
/// How much of a refused value a message quotes.
const SHOWN_CHARS: usize = 80;

/// `found` quoted and escaped (it came from someone else), cut to [`SHOWN_CHARS`].
fn shown(found: &str) -> String {
    let cut: String = found.chars().take(SHOWN_CHARS).collect();
    if cut.len() < found.len() {
        format!("{cut:?}…")
    } else {
        format!("{cut:?}")
    }
}

/// `ownership` if every value is one capstan could have written; `field` shows how the
/// source spells a field (`cluster-` in tags, `cluster=` in a description).
fn checked(ownership: Ownership, field: fn(&str) -> String) -> Result<Ownership, RefusedOwner> {
    let refuse = |key: &str, value: &str, reason: &'static str| RefusedOwner {
        found: format!("{}{value}", field(key)),
        reason,
    };
    if !is_dns1123_label(&ownership.cluster) {
        return Err(refuse("cluster", &ownership.cluster, DNS_LABEL));
    }
    if !is_dns1123_label(&ownership.pool) {
        return Err(refuse("pool", &ownership.pool, DNS_LABEL));
    }
    if !fits_vm_name(&ownership.cluster, &ownership.pool) {
        return Err(refuse(
            "pool",
            &ownership.pool,
            "short enough, with the cluster's name, for a VM name of 63 characters",
        ));
    }
    let hash = &ownership.spec_hash;
    if hash.len() > MAX_SPEC_HASH_LEN
        || !hash
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
    {
        return Err(refuse(
            "spec",
            hash,
            "a spec hash (lowercase letters and digits, at most 64)",
        ));
    }
    Ok(ownership)
}

const DNS_LABEL: &str =
    "a DNS-1123 label (lowercase letters, digits and `-`, at most 63 characters)";

/// The name of a capstan VM: `capstan-<cluster>-<pool>-<suffix>`.
pub fn vm_name(cluster: &str, pool: &str, suffix: &str) -> NodeName {
    NodeName(format!("{NAME_PREFIX}{cluster}-{pool}-{suffix}").into())
}

/// Whether a VM name looks like one capstan gives (a hint to read its description).
pub fn has_capstan_name(name: &str) -> bool {
    name.starts_with(NAME_PREFIX)
}

/// Whether `tag` is a valid Proxmox tag (`[a-z0-9_][a-z0-9_\-\+\.]*`).
pub fn is_valid_tag(tag: &str) -> bool {
    let mut chars = tag.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    first_ok
        && chars.all(|c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '-' | '+' | '.')
        })
}

/// `ownership_tags` followed by the facts capstan recorded on the VM before (its `capstan-…`
/// tags: a static address, "prepared"), read from its tag list `existing`. Whoever rewrites
/// a VM's tags keeps these: an address tag lost after its address was configured would let
/// another machine take the address the VM still uses.
pub fn with_recorded_facts(mut ownership_tags: Vec<String>, existing: &str) -> Vec<String> {
    let facts: Vec<String> = split_tags(existing)
        .into_iter()
        .filter(|tag| tag.starts_with(NAME_PREFIX) && !ownership_tags.contains(tag))
        .collect();
    ownership_tags.extend(facts);
    ownership_tags
}

/// Splits a Proxmox tag list (`a;b`, also `,` or space separated) into tags.
pub fn split_tags(raw: &str) -> Vec<String> {
    raw.split([';', ',', ' '])
        .map(str::trim)
        .filter(|tag| !tag.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The tags that mark a VM as owned: `capstan`, `cluster-<c>`, `role-<r>`, `pool-<p>`,
/// `spec-<hash>`, `created-<unix seconds>`. Values that would break the tag format are
/// lower-cased and stripped of other characters (cluster and pool names are DNS labels, so
/// this never changes them in practice).
pub fn encode_tags(ownership: &Ownership, created: Timestamp) -> Vec<String> {
    vec![
        OWNER_TAG.to_owned(),
        format!("{CLUSTER_TAG}{}", tag_safe(&ownership.cluster)),
        format!("{ROLE_TAG}{}", ownership.role.as_str()),
        format!("{POOL_TAG}{}", tag_safe(&ownership.pool)),
        format!("{SPEC_TAG}{}", tag_safe(&ownership.spec_hash)),
        format!("{CREATED_TAG}{}", created.as_second()),
    ]
}

/// Reads ownership back from tags. `Ok(None)` unless the `capstan` tag and every one of
/// cluster, role, pool and spec are present.
///
/// # Errors
/// When a value is not one capstan writes (see [`RefusedOwner`]).
pub fn parse_tags(tags: &[String]) -> Result<Option<VmOwner>, RefusedOwner> {
    if !tags.iter().any(|tag| tag == OWNER_TAG) {
        return Ok(None);
    }
    let value = |prefix: &str| {
        tags.iter()
            .find_map(|tag| tag.strip_prefix(prefix))
            .filter(|value| !value.is_empty())
    };
    let read = || {
        Some(Ownership {
            cluster: value(CLUSTER_TAG)?.into(),
            role: parse_role(value(ROLE_TAG)?)?,
            pool: value(POOL_TAG)?.into(),
            spec_hash: value(SPEC_TAG)?.into(),
        })
    };
    let Some(ownership) = read() else {
        return Ok(None);
    };
    let ownership = checked(ownership, |key| format!("{key}-"))?;
    let created = value(CREATED_TAG)
        .and_then(|seconds| seconds.parse::<i64>().ok())
        .and_then(|seconds| Timestamp::from_second(seconds).ok());
    Ok(Some(VmOwner { ownership, created }))
}

/// Marks the description line that says what the VM was built from.
pub const BUILT_FROM_MARKER: &str = "capstan.dev/built-from:";

/// The VM description: a line for people, the marker line for capstan and, when given, what
/// the VM was built from (so a replacement can say which field changed).
pub fn encode_description(
    ownership: &Ownership,
    created: Timestamp,
    built_from: Option<&str>,
) -> String {
    let mut text = format!(
        "Managed by capstan: do not edit the next lines.\n{DESCRIPTION_MARKER} cluster={} role={} pool={} spec={} created={}\n",
        ownership.cluster,
        ownership.role.as_str(),
        ownership.pool,
        ownership.spec_hash,
        created
    );
    if let Some(built_from) = built_from {
        text.push_str(&format!(
            "{BUILT_FROM_MARKER} {}\n",
            built_from.replace('\n', " ")
        ));
    }
    text
}

/// Marks the description line that records the operator's tags capstan set on the VM
/// (`machine.tags`), so a later change removes those and no one else's.
pub const TAGS_MARKER: &str = "capstan.dev/tags:";

/// `description` with its tags record set to `tags` (the line replaced, or added; none when
/// `tags` is empty).
pub fn with_tags_record(description: &str, tags: &[String]) -> String {
    let mut text: String = description
        .lines()
        .filter(|line| !line.trim().starts_with(TAGS_MARKER))
        .map(|line| format!("{line}\n"))
        .collect();
    if !tags.is_empty() {
        text.push_str(&format!("{TAGS_MARKER} {}\n", tags.join(";")));
    }
    text
}

/// The operator's tags capstan recorded as set (see [`with_tags_record`]); only valid tags.
pub fn recorded_tags(description: &str) -> Vec<String> {
    description
        .lines()
        .find_map(|line| line.trim().strip_prefix(TAGS_MARKER))
        .map(split_tags)
        .unwrap_or_default()
        .into_iter()
        .filter(|tag| is_valid_tag(tag))
        .collect()
}

pub use capstan_core::spec::hardware::is_capstan_tag;

/// What the VM was built from, as [`encode_description`] wrote it.
pub fn parse_built_from(description: &str) -> Option<&str> {
    description
        .lines()
        .find_map(|line| line.trim().strip_prefix(BUILT_FROM_MARKER))
        .map(str::trim)
}

/// Reads ownership back from a description; `Ok(None)` when it has no complete marker line.
///
/// # Errors
/// When a value is not one capstan writes (see [`RefusedOwner`]).
pub fn parse_description(description: &str) -> Result<Option<VmOwner>, RefusedOwner> {
    let Some(line) = description
        .lines()
        .find_map(|line| line.trim().strip_prefix(DESCRIPTION_MARKER))
    else {
        return Ok(None);
    };
    let field = |key: &str| {
        line.split_whitespace()
            .find_map(|pair| pair.strip_prefix(key)?.strip_prefix('='))
            .filter(|value| !value.is_empty())
    };
    let read = || {
        Some(Ownership {
            cluster: field("cluster")?.into(),
            role: parse_role(field("role")?)?,
            pool: field("pool")?.into(),
            spec_hash: field("spec")?.into(),
        })
    };
    let Some(ownership) = read() else {
        return Ok(None);
    };
    let ownership = checked(ownership, |key| format!("{key}="))?;
    let created = field("created").and_then(|text| text.parse::<Timestamp>().ok());
    Ok(Some(VmOwner { ownership, created }))
}

fn parse_role(text: &str) -> Option<Role> {
    match text {
        "control-plane" => Some(Role::ControlPlane),
        "worker" => Some(Role::Worker),
        _ => None,
    }
}

fn tag_safe(value: &str) -> String {
    value
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .filter(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '-' | '.'))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner() -> Ownership {
        Ownership {
            cluster: "prod".into(),
            role: Role::ControlPlane,
            pool: "cp".into(),
            spec_hash: "0123456789ab".into(),
        }
    }

    fn created() -> Timestamp {
        "2026-11-30T10:00:00Z".parse().expect("timestamp")
    }

    #[test]
    fn the_tags_record_is_replaced_in_place_and_read_back() {
        let description = encode_description(&owner(), created(), Some("template=x"));
        let recorded = with_tags_record(&description, &["team-a".into(), "storage".into()]);
        assert!(recorded.starts_with(&description));
        assert_eq!(recorded_tags(&recorded), vec!["team-a", "storage"]);
        let changed = with_tags_record(&recorded, &["team-b".into()]);
        assert_eq!(recorded_tags(&changed), vec!["team-b"]);
        assert_eq!(parse_built_from(&changed), Some("template=x"));
        assert_eq!(with_tags_record(&changed, &[]), description);
        assert!(is_capstan_tag("capstan-ip-10.0.0.1") && is_capstan_tag("cluster-prod"));
        assert!(!is_capstan_tag("team-a"));
    }

    #[test]
    fn tags_round_trip_and_are_valid_pve_tags() {
        let tags = encode_tags(&owner(), created());
        assert!(tags.iter().all(|tag| is_valid_tag(tag)), "{tags:?}");
        assert_eq!(
            parse_tags(&tags),
            Ok(Some(VmOwner {
                ownership: owner(),
                created: Some(created())
            }))
        );
    }

    #[test]
    fn tags_survive_proxmox_joining_and_reordering_them() {
        let mut tags = encode_tags(&owner(), created());
        tags.reverse();
        let joined = tags.join(";");
        let parsed = parse_tags(&split_tags(&joined))
            .expect("valid")
            .expect("owned");
        assert_eq!(parsed.ownership, owner());
    }

    #[test]
    fn incomplete_or_foreign_tags_are_not_ownership() {
        assert_eq!(parse_tags(&split_tags("capstan;cluster-prod")), Ok(None));
        assert_eq!(
            parse_tags(&split_tags(
                "cluster-prod;role-worker;pool-general;spec-abc"
            )),
            Ok(None),
            "without the capstan tag a VM is not ours"
        );
        assert_eq!(
            parse_tags(&split_tags(
                "capstan;cluster-prod;role-boss;pool-general;spec-abc"
            )),
            Ok(None)
        );
    }

    #[test]
    fn descriptions_round_trip_even_inside_other_text() {
        let text = format!(
            "Notes by an operator.\n{}More notes.",
            encode_description(&owner(), created(), Some("template=debian13-k8s cores=4"))
        );
        assert_eq!(
            parse_built_from(&text),
            Some("template=debian13-k8s cores=4")
        );
        assert_eq!(parse_built_from("Notes only"), None);
        assert_eq!(
            parse_description(&text),
            Ok(Some(VmOwner {
                ownership: owner(),
                created: Some(created())
            }))
        );
        assert_eq!(parse_description("just a VM"), Ok(None));
        assert_eq!(
            parse_description("capstan.dev/owner: cluster=prod role=worker"),
            Ok(None)
        );
    }

    #[test]
    fn names_no_spec_could_declare_are_refused_naming_the_tag() {
        let long = "a".repeat(200);
        let fits_alone = "b".repeat(40);
        for (tags, found) in [
            (
                "capstan;cluster-..;role-worker;pool-general;spec-abc",
                "cluster-..",
            ),
            (
                "capstan;cluster-prod;role-worker;pool-.hidden;spec-abc",
                "pool-.hidden",
            ),
            (
                "capstan;cluster-a.b;role-worker;pool-general;spec-abc",
                "cluster-a.b",
            ),
            (
                "capstan;cluster-prod;role-worker;pool-x+y;spec-abc",
                "pool-x+y",
            ),
            (
                "capstan;cluster-prod-;role-worker;pool-general;spec-abc",
                "cluster-prod-",
            ),
            (
                "capstan;cluster-prod;role-worker;pool-general;spec-a.b",
                "spec-a.b",
            ),
        ] {
            let refused = parse_tags(&split_tags(tags)).expect_err(tags);
            assert_eq!(refused.found, found, "{tags}");
            assert!(
                refused
                    .to_string()
                    .starts_with(&format!("{found:?} is not")),
                "{refused}"
            );
        }
        let tags = format!("capstan;cluster-{long};role-worker;pool-general;spec-abc");
        let refused = parse_tags(&split_tags(&tags)).expect_err("too long");
        assert!(refused.to_string().contains('…'), "cut: {refused}");
        assert!(refused.to_string().len() < 200, "{refused}");
        let tags = format!("capstan;cluster-{fits_alone};role-worker;pool-{fits_alone};spec-abc");
        assert!(
            parse_tags(&split_tags(&tags)).is_err(),
            "no VM name could hold both"
        );
        let hostile = "capstan.dev/owner: cluster=../../etc role=worker pool=general spec=abc";
        assert_eq!(
            parse_description(hostile).expect_err("refused").found,
            "cluster=../../etc"
        );
    }

    #[test]
    fn tag_validity_follows_the_pve_tag_format() {
        assert!(is_valid_tag("capstan"));
        assert!(is_valid_tag("spec-0123abc"));
        assert!(is_valid_tag("_x+y.z"));
        assert!(!is_valid_tag("-leading-dash"));
        assert!(!is_valid_tag("Upper"));
        assert!(!is_valid_tag("a b"));
        assert!(!is_valid_tag(""));
    }

    #[test]
    fn names_follow_the_capstan_scheme() {
        let name = vm_name("prod", "general", "7f3k2");
        assert_eq!(name.as_str(), "capstan-prod-general-7f3k2");
        assert!(has_capstan_name(name.as_str()));
        assert!(!has_capstan_name("web01"));
    }
}
