//! The cluster definition language: parse, default and validate the files of a repository into
//! the desired state of every cluster.
//!
//! Pure: this module reads no file, clock or environment. `source` reads the repository and
//! hands the texts over as [`RepoFiles`].
//!
//! # Guarantees
//! - Every error of a repository is reported in one pass: each file is parsed on its own, and
//!   the rules of `validate` never stop at the first finding.
//! - A cluster whose file has errors is left out of [`Desired::clusters`] and marks the desired
//!   state [`Desired::incomplete`], so a broken file is never mistaken for a deleted cluster.

mod addresses;
pub mod authentication;
mod authentication_rules;
pub mod bounds;
mod delivery;
pub mod diagnostic;
mod distribution;
pub mod hardware;
mod hardware_rules;
mod k3s;
mod labels;
mod limits;
pub mod locate;
mod machine;
mod maintenance;
mod network;
pub mod network_rules;
mod node_addresses;
pub mod notifications;
mod parse;
mod patch;
pub mod patches;
mod policies;
pub mod registries;
pub mod remediation;
mod replace;
pub mod scheduling;
mod secret_source;
mod stages;
mod talos;
pub mod talos_versions;
pub mod types;
pub mod validate;
pub mod values;

use std::collections::BTreeMap;

pub use diagnostic::{Diagnostic, Diagnostics, Severity, SourceFile, bounded};
pub use distribution::Capabilities;
pub use k3s::is_database_name;
pub use notifications::{
    Alert, EventKind, EventSeverity, NotificationProvider, Notifications, ProviderKind,
};
pub use parse::parse_document;
pub use types::*;
pub use values::{
    AddressRange, CronSchedule, HumanDuration, KubeVersion, MinorVersion, TimeZoneName,
};

/// Name of the fleet file at the repository root.
pub const FLEET_FILE: &str = "capstan.yaml";

/// One file's path (relative to the repository root) and text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceText {
    /// Path relative to the repository root, with `/` separators.
    pub path: String,
    /// The file's content.
    pub text: String,
}

/// The texts of a repository that matter to capstan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoFiles {
    /// `capstan.yaml`.
    pub fleet: SourceText,
    /// Every `*.yaml`/`*.yml` file directly in the fleet's `clustersDir`, sorted by path.
    pub clusters: Vec<SourceText>,
}

impl RepoFiles {
    /// A short identifier of this exact content, `dir:` and 12 hex digits of a sha1 over every
    /// path and text: what status reports as the revision acted on when the repository is a
    /// plain folder (a Git source reports its commit instead).
    pub fn content_revision(&self) -> String {
        use sha1::{Digest, Sha1};
        let mut hasher = Sha1::new();
        for file in std::iter::once(&self.fleet).chain(&self.clusters) {
            hasher.update(file.path.as_bytes());
            hasher.update([0]);
            hasher.update(file.text.as_bytes());
            hasher.update([0]);
        }
        let hex: String = hasher
            .finalize()
            .iter()
            .take(6)
            .map(|b| format!("{b:02x}"))
            .collect();
        format!("dir:{hex}")
    }
}

/// The desired state of a repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Desired {
    /// `capstan.yaml`.
    pub fleet: Fleet,
    /// Every valid cluster by name.
    pub clusters: BTreeMap<String, Cluster>,
    /// Some cluster file had errors: a cluster missing from `clusters` may still be declared, so
    /// nothing may be deleted for being absent.
    pub incomplete: bool,
    /// Files with errors, by path, each with the cluster it declares when its `metadata.name`
    /// is a DNS-1123 label no valid file declares: that cluster is declared, so not removed,
    /// but nothing of it is applied until the file is fixed. An invalid file's name is never
    /// used otherwise (it may be anything: a path, quotes, newlines). (A file too broken to be
    /// parsed only sets [`Desired::incomplete`].)
    pub invalid: BTreeMap<String, Option<String>>,
}

impl Desired {
    /// The path of the invalid file that declares cluster `name`, if one does.
    pub fn invalid_file_of(&self, name: &str) -> Option<&str> {
        self.invalid
            .iter()
            .find(|(_, declared)| declared.as_deref() == Some(name))
            .map(|(path, _)| path.as_str())
    }
}

/// What loading a repository gives: the desired state when `capstan.yaml` is usable, and every
/// finding.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// `None` when `capstan.yaml` itself has errors: then nothing is known about the fleet.
    pub desired: Option<Desired>,
    /// Errors and warnings of every file.
    pub diagnostics: Diagnostics,
}

impl Loaded {
    /// Whether the repository has no errors.
    pub fn is_valid(&self) -> bool {
        !self.diagnostics.has_errors()
    }
}

/// Reads the folder that holds cluster files from `capstan.yaml`'s text, before it is fully
/// validated, so `source` knows which files to read. Falls back to the default.
pub fn clusters_dir_of(fleet_text: &str) -> std::path::PathBuf {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Peek {
        clusters_dir: Option<std::path::PathBuf>,
    }
    serde_saphyr::from_str::<Peek>(fleet_text)
        .ok()
        .and_then(|peek| peek.clusters_dir)
        .unwrap_or_else(|| std::path::PathBuf::from("clusters"))
}

/// The `metadata.name` a cluster file declares, read without validating the rest (a file with
/// errors is still known by the name it gives). Not validated: a name, not a path.
pub fn declared_name(cluster_text: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Peek {
        metadata: Option<PeekMetadata>,
    }
    #[derive(serde::Deserialize)]
    struct PeekMetadata {
        name: Option<String>,
    }
    serde_saphyr::from_str::<Peek>(cluster_text)
        .ok()?
        .metadata?
        .name
}

/// Parses, defaults and validates a repository.
pub fn load(files: &RepoFiles) -> Loaded {
    let mut diagnostics = Diagnostics::default();
    let fleet_file = SourceFile::new(&files.fleet.path, &files.fleet.text);
    let fleet = match parse::parse_document::<Fleet>(&fleet_file, &files.fleet.text, "Fleet") {
        Ok(fleet) => {
            let findings = validate::fleet(&fleet, &fleet_file);
            let usable = !findings.iter().any(Diagnostic::is_error);
            diagnostics.0.extend(findings);
            usable.then_some(fleet)
        }
        Err(diagnostic) => {
            diagnostics.push(*diagnostic);
            None
        }
    };

    let mut parsed = Vec::new();
    let mut incomplete = false;
    for source in &files.clusters {
        let file = SourceFile::new(&source.path, &source.text);
        match parse::parse_document::<Cluster>(&file, &source.text, "Cluster") {
            Ok(cluster) => parsed.push((cluster, file)),
            Err(diagnostic) => {
                diagnostics.push(*diagnostic);
                incomplete = true;
            }
        }
    }

    let Some(fleet) = fleet else {
        // Cluster rules need the fleet (connections, approved minors); syntax was still checked.
        diagnostics.sort();
        return Loaded {
            desired: None,
            diagnostics,
        };
    };

    let mut valid = vec![true; parsed.len()];
    for (index, (cluster, file)) in parsed.iter().enumerate() {
        let findings = validate::cluster(&fleet, cluster, file);
        valid[index] = !findings.iter().any(Diagnostic::is_error);
        diagnostics.0.extend(findings);
    }
    // Rules across files report the later of two files: valid files come first, so a
    // collision with an invalid file (its name, endpoint or database) is reported on the
    // invalid one and never blocks a valid cluster.
    let mut order: Vec<usize> = (0..parsed.len()).collect();
    order.sort_by_key(|&index| !valid[index]);
    let checked: Vec<validate::Checked<'_>> = order
        .iter()
        .map(|&index| {
            let (cluster, file) = &parsed[index];
            validate::Checked {
                cluster,
                file,
                valid: valid[index],
            }
        })
        .collect();
    let findings = validate::across(&checked)
        .into_iter()
        .chain(stages::across(&checked))
        .chain(addresses::across(&checked))
        .chain(delivery::across(&checked));
    for (position, diagnostic) in findings {
        valid[order[position]] = false;
        diagnostics.push(diagnostic);
    }
    let specs = parsed.iter().map(|(cluster, file)| (&cluster.spec, file));
    for (index, diagnostic) in bounds::repository(specs, &valid) {
        valid[index] = false;
        diagnostics.push(diagnostic);
    }

    let mut clusters = BTreeMap::new();
    let mut invalid = BTreeMap::new();
    for ((cluster, file), ok) in parsed.into_iter().zip(valid) {
        if ok {
            clusters.insert(cluster.metadata.name.clone(), cluster);
        } else {
            incomplete = true;
            invalid.insert(file.name.clone(), Some(cluster.metadata.name.clone()));
        }
    }
    // A name that is no DNS-1123 label names no cluster capstan could have built, and a name
    // a valid file declares too (a duplicate) is that file's cluster.
    for declared in invalid.values_mut() {
        if declared
            .as_deref()
            .is_some_and(|name| !values::is_dns1123_label(name) || clusters.contains_key(name))
        {
            *declared = None;
        }
    }
    diagnostics.sort();
    Loaded {
        desired: Some(Desired {
            fleet,
            clusters,
            incomplete,
            invalid,
        }),
        diagnostics,
    }
}

/// The JSON Schemas of the file kinds, by file name, generated from the types above.
pub fn json_schemas() -> Vec<(&'static str, serde_json::Value)> {
    vec![
        (
            "fleet.schema.json",
            schema_value(schemars::schema_for!(Fleet)),
        ),
        (
            "cluster.schema.json",
            schema_value(schemars::schema_for!(Cluster)),
        ),
    ]
}

fn schema_value(schema: schemars::Schema) -> serde_json::Value {
    schema.to_value()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example(path: &str) -> SourceText {
        let text = match path {
            "capstan.yaml" => include_str!("../../../../examples-repo/capstan.yaml"),
            "clusters/platform.yaml" => {
                include_str!("../../../../examples-repo/clusters/platform.yaml")
            }
            "clusters/talos.yaml" => include_str!("../../../../examples-repo/clusters/talos.yaml"),
            _ => include_str!("../../../../examples-repo/clusters/prod.yaml"),
        };
        SourceText {
            path: path.to_owned(),
            text: text.to_owned(),
        }
    }

    #[test]
    fn a_cluster_whose_file_has_errors_is_known_by_name_and_file() {
        let mut prod = example("clusters/prod.yaml");
        prod.text = prod.text.replace("      replicas: 3", "      replicas: 1");
        let files = RepoFiles {
            fleet: example("capstan.yaml"),
            clusters: vec![example("clusters/platform.yaml"), prod],
        };
        let desired = load(&files).desired.expect("the fleet is valid");
        assert!(desired.incomplete);
        assert_eq!(
            desired.clusters.keys().collect::<Vec<_>>(),
            ["platform"],
            "only valid files are desired"
        );
        assert_eq!(
            desired.invalid,
            BTreeMap::from([("clusters/prod.yaml".to_owned(), Some("prod".to_owned()))])
        );
    }

    #[test]
    fn the_example_talos_cluster_is_valid_because_the_example_fleet_names_its_iso_storage() {
        let files = RepoFiles {
            fleet: example("capstan.yaml"),
            clusters: vec![example("clusters/talos.yaml")],
        };
        let loaded = load(&files);
        assert!(!loaded.diagnostics.has_errors(), "{:?}", loaded.diagnostics);
        let desired = loaded.desired.expect("the fleet is valid");
        let talos = &desired.clusters["talos"].spec;
        assert_eq!(talos.kubernetes.distribution, Distribution::Talos);
        assert_eq!(
            talos.talos.as_ref().map(|t| t.version.to_string()),
            Some("v1.13.9".to_owned())
        );
        assert_eq!(
            desired.fleet.proxmox[&talos.proxmox].iso_storage.as_deref(),
            Some("local")
        );

        // The storage is what makes it valid: without it the file is refused, saying so.
        let mut fleet = example("capstan.yaml");
        fleet.text = fleet.text.replace("    isoStorage: local\n", "");
        let without = load(&RepoFiles {
            fleet,
            clusters: vec![example("clusters/talos.yaml")],
        });
        assert!(
            without
                .diagnostics
                .0
                .iter()
                .any(|d| d.is_error() && d.message.contains("names no `isoStorage`")),
            "{:?}",
            without.diagnostics
        );
    }

    /// The name of the report: a path, a quote, newlines and a metric line.
    const HOSTILE_NAME: &str = "x/../../y\"} 1\ninjected_metric{a=\"b\"} 42\n#";

    #[test]
    fn an_invalid_file_is_keyed_by_its_path_and_its_duplicates_block_no_valid_cluster() {
        // Sorted before prod.yaml, it claims prod's name-free endpoint under a hostile name.
        let hostile = SourceText {
            path: "clusters/a.yaml".to_owned(),
            text: example("clusters/prod.yaml").text.replace(
                "  name: prod\n",
                &format!(
                    "  name: {}\n",
                    serde_json::to_string(HOSTILE_NAME).expect("json")
                ),
            ),
        };
        assert_ne!(hostile.text, example("clusters/prod.yaml").text);
        let files = RepoFiles {
            fleet: example("capstan.yaml"),
            clusters: vec![hostile, example("clusters/prod.yaml")],
        };
        let loaded = load(&files);
        let desired = loaded.desired.expect("the fleet is valid");
        assert_eq!(
            desired.clusters.keys().collect::<Vec<_>>(),
            ["prod"],
            "an invalid file's endpoint blocks no valid cluster:\n{}",
            loaded.diagnostics
        );
        assert_eq!(
            desired.invalid.keys().collect::<Vec<_>>(),
            ["clusters/a.yaml"],
            "an invalid file is known by its path"
        );
        assert_eq!(desired.invalid_file_of(HOSTILE_NAME), None);
        let duplicate = loaded
            .diagnostics
            .0
            .iter()
            .find(|d| d.field.as_deref() == Some("spec.endpoint.host"))
            .expect("the collision is reported");
        assert_eq!(duplicate.file, "clusters/a.yaml", "on the invalid file");
    }

    #[test]
    fn an_invalid_file_with_a_valid_name_keeps_its_cluster_declared() {
        let mut prod = example("clusters/prod.yaml");
        prod.text = prod.text.replace("      replicas: 3", "      replicas: 1");
        let files = RepoFiles {
            fleet: example("capstan.yaml"),
            clusters: vec![prod],
        };
        let desired = load(&files).desired.expect("the fleet is valid");
        assert_eq!(desired.invalid_file_of("prod"), Some("clusters/prod.yaml"));
    }

    #[test]
    fn a_status_author_that_is_not_name_and_email_is_an_error() {
        let mut fleet = example("capstan.yaml");
        fleet.text = fleet.text.replace(
            "  branch: capstan-status\n",
            "  branch: capstan-status\n  author: capstan-bot\n  skipCI: true\n",
        );
        assert!(
            fleet.text.contains("author: capstan-bot"),
            "the example changed"
        );
        let files = RepoFiles {
            fleet,
            clusters: vec![example("clusters/platform.yaml")],
        };
        let diagnostics = load(&files).diagnostics;
        let errors: Vec<_> = diagnostics.0.iter().filter(|d| d.is_error()).collect();
        assert_eq!(errors.len(), 1, "{diagnostics}");
        assert_eq!(errors[0].field.as_deref(), Some("status.author"));
    }

    #[test]
    fn replace_forbid_with_on_drift_replace_is_a_warning_at_the_forbidding_field() {
        let mut prod = example("clusters/prod.yaml");
        prod.text = prod
            .text
            .replace(
                "    - pool: general\n",
                "    - pool: general\n      replace: forbid\n",
            )
            .replace(
                "    minWorkers: 2 ",
                "    onDrift: replace\n    blockedDrain: fail\n    minWorkers: 2 ",
            );
        assert!(
            prod.text.contains("onDrift: replace"),
            "the example changed"
        );
        let files = RepoFiles {
            fleet: example("capstan.yaml"),
            clusters: vec![prod],
        };
        let loaded = load(&files);
        let desired = loaded.desired.expect("the fleet is valid");
        let spec = &desired.clusters["prod"].spec;
        assert_eq!(spec.replace_policy(Some("general")), ReplacePolicy::Forbid);
        assert_eq!(spec.replace_policy(None), ReplacePolicy::Allow);
        assert_eq!(spec.rollout.blocked_drain, BlockedDrain::Fail);
        let warning = loaded
            .diagnostics
            .0
            .iter()
            .find(|d| d.field.as_deref() == Some("spec.workers[0].replace"))
            .expect("the contradiction is reported");
        assert!(!warning.is_error());
        let line = warning.line.expect("a line");
        let text_line = files.clusters[0].text.lines().nth(line - 1).unwrap_or("");
        assert!(text_line.contains("replace: forbid"), "{line}: {text_line}");
    }

    #[test]
    fn a_replace_policy_other_than_allow_or_forbid_is_refused_at_its_line() {
        let mut prod = example("clusters/prod.yaml");
        prod.text = prod
            .text
            .replace("  controlPlane:\n", "  controlPlane:\n    replace: never\n");
        let files = RepoFiles {
            fleet: example("capstan.yaml"),
            clusters: vec![prod],
        };
        let loaded = load(&files);
        let error = loaded
            .diagnostics
            .0
            .iter()
            .find(|d| d.is_error())
            .expect("refused");
        assert_eq!(error.file, "clusters/prod.yaml");
        assert!(error.line.is_some(), "{error:?}");
        assert!(error.message.contains("never"), "{}", error.message);
    }

    #[test]
    fn a_status_author_defaults_to_capstan_and_parses_as_name_and_email() {
        assert_eq!(
            types::parse_signature(types::CAPSTAN_SIGNATURE),
            Some(("capstan", "capstan@noreply.capstan.dev"))
        );
        assert_eq!(
            types::parse_signature("Platform Team <platform@example.com>"),
            Some(("Platform Team", "platform@example.com"))
        );
        for bad in ["capstan", "<a@b>", "x <>", "x <a b@c>", "x <a@b> y"] {
            assert_eq!(types::parse_signature(bad), None, "{bad}");
        }
    }
}
