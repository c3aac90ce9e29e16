//! The daemon's own configuration file (`capstan run --config FILE`): settings the operator
//! gives the daemon, never the repository it follows, so a commit cannot change them.
//!
//! ```yaml
//! apiVersion: capstan.dev/v1alpha1
//! kind: DaemonConfig
//! source:
//!   verify:
//!     mode: head                # or `all`
//!     allowedSigners: allowed_signers   # SSH keys, git's gpg.ssh.allowedSignersFile format
//!     openpgpKeys: keys.asc             # OpenPGP public keys (armored or binary)
//!     allowRewrite: {from: <last verified commit>, to: <the new tip>}  # one rewrite, once
//! ```
//!
//! # Guarantees
//! - Unknown fields are refused, with `file:line:column` and the closest known name, as the
//!   repository's own validation reports them.
//! - Relative paths are taken relative to the configuration file's folder, so the file means
//!   the same whatever the daemon's working folder.
//! - New daemon-side settings join as new top-level sections; an absent section keeps its
//!   defaults.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::source::verify::{KeyFileError, Mode, Rewrite, Verifier, VerifyPolicy};

/// The `kind` the file must name.
const KIND: &str = "DaemonConfig";

/// Reading the configuration file failed.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read the daemon configuration {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a valid configuration (the diagnostic names line, column and field).
    #[error("{diagnostic}")]
    Invalid {
        /// What is wrong, where.
        diagnostic: Box<crate::spec::Diagnostic>,
    },
    /// Commit verification of a folder, which has no commits.
    #[error("source.verify needs a Git remote as --repo: a folder has no commits to verify")]
    VerifyNeedsRemote,
    /// The allowed keys of `source.verify` cannot be used.
    #[error("cannot read the allowed keys of source.verify")]
    Keys(#[source] KeyFileError),
}

/// The daemon's configuration, as read from `--config` (defaults without one).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DaemonConfig {
    /// Commit verification, when asked for.
    pub verify: Option<VerifyPolicy>,
}

/// The file, as written.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct File {
    /// Checked by `parse_document`.
    #[serde(rename = "apiVersion")]
    _api_version: String,
    /// Checked by `parse_document`.
    #[serde(rename = "kind")]
    _kind: String,
    #[serde(default)]
    source: SourceSection,
}

/// `source:`: how the repository is followed.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SourceSection {
    verify: Option<VerifySection>,
}

/// `source.verify:`: which commits may be applied.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct VerifySection {
    mode: Mode,
    allowed_signers: Option<PathBuf>,
    openpgp_keys: Option<PathBuf>,
    max_commits: Option<u32>,
    since: Option<String>,
    allow_rewrite: Option<RewriteSection>,
}

/// `source.verify.allowRewrite:`: the one history rewrite the operator allows.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RewriteSection {
    from: String,
    to: String,
}

impl DaemonConfig {
    /// The commit verification `--config FILE` asks for (none without a file), its key files
    /// read now: a broken one stops the daemon before it starts, not at the first push.
    ///
    /// # Errors
    /// When the file is invalid, a key file cannot be used, or the repository is a folder.
    pub fn verifier_of(
        path: Option<&Path>,
        remote: bool,
    ) -> Result<Option<std::sync::Arc<Verifier>>, ConfigError> {
        let config = match path {
            Some(path) => DaemonConfig::load(path)?,
            None => DaemonConfig::default(),
        };
        let Some(policy) = config.verify else {
            return Ok(None);
        };
        if !remote {
            return Err(ConfigError::VerifyNeedsRemote);
        }
        let verifier = Verifier::new(policy);
        verifier.check_keys().map_err(ConfigError::Keys)?;
        Ok(Some(std::sync::Arc::new(verifier)))
    }

    /// Reads and validates the file at `path`.
    ///
    /// # Errors
    /// When the file cannot be read, is not YAML of this shape, or names no key file.
    pub fn load(path: &Path) -> Result<DaemonConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(path, &text)
    }

    /// Validates `text`, the contents of `path`.
    ///
    /// # Errors
    /// As [`DaemonConfig::load`].
    pub fn parse(path: &Path, text: &str) -> Result<DaemonConfig, ConfigError> {
        let source = crate::spec::SourceFile::new(&path.display().to_string(), text);
        let invalid =
            |diagnostic: Box<crate::spec::Diagnostic>| ConfigError::Invalid { diagnostic };
        let file: File = crate::spec::parse_document(&source, text, KIND).map_err(invalid)?;
        let folder = path.parent().unwrap_or(Path::new("."));
        let verify = match file.source.verify {
            None => None,
            Some(section) => Some(verify_policy(section, folder).map_err(
                |(field, message, hint)| {
                    invalid(Box::new(
                        source
                            .error(&format!("source.verify.{field}"), message)
                            .with_hint(hint),
                    ))
                },
            )?),
        };
        Ok(DaemonConfig { verify })
    }
}

/// A field, what is wrong with it and how to fix it.
type FieldProblem = (&'static str, String, String);

fn verify_policy(section: VerifySection, folder: &Path) -> Result<VerifyPolicy, FieldProblem> {
    if section.allowed_signers.is_none() && section.openpgp_keys.is_none() {
        return Err((
            "allowedSigners",
            "verification needs the allowed keys".to_owned(),
            "set `allowedSigners` (SSH) or `openpgpKeys` (OpenPGP), or both".to_owned(),
        ));
    }
    let max_commits = section
        .max_commits
        .unwrap_or(VerifyPolicy::DEFAULT_MAX_COMMITS);
    if max_commits == 0 {
        return Err((
            "maxCommits",
            "must be at least 1".to_owned(),
            format!("leave it out for {}", VerifyPolicy::DEFAULT_MAX_COMMITS),
        ));
    }
    let since = section
        .since
        .map(|text| commit_id("since", &text))
        .transpose()?;
    let allow_rewrite = section
        .allow_rewrite
        .map(|rewrite| {
            Ok::<_, FieldProblem>(Rewrite {
                from: commit_id("allowRewrite.from", &rewrite.from)?,
                to: commit_id("allowRewrite.to", &rewrite.to)?,
            })
        })
        .transpose()?;
    let resolve = |file: PathBuf| {
        if file.is_absolute() {
            file
        } else {
            folder.join(file)
        }
    };
    Ok(VerifyPolicy {
        mode: section.mode,
        allowed_signers: section.allowed_signers.map(resolve),
        openpgp_keys: section.openpgp_keys.map(resolve),
        max_commits,
        since,
        allow_rewrite,
    })
}

/// The commit `text` names, as a full commit id.
fn commit_id(field: &'static str, text: &str) -> Result<git2::Oid, FieldProblem> {
    git2::Oid::from_str(text)
        .ok()
        .filter(|_| text.len() == 40)
        .ok_or_else(|| {
            (
                field,
                format!("`{}` is not a full commit id", crate::redact::cap(text, 64)),
                "give the 40 hex digits `git rev-parse COMMIT` prints".to_owned(),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<DaemonConfig, ConfigError> {
        DaemonConfig::parse(Path::new("/etc/capstan/config.yaml"), text)
    }

    #[test]
    fn a_verify_section_resolves_key_files_next_to_the_config() {
        let config = parse(
            "apiVersion: capstan.dev/v1alpha1\nkind: DaemonConfig\nsource:\n  verify:\n    mode: all\n    allowedSigners: allowed_signers\n    openpgpKeys: /keys/team.asc\n",
        )
        .expect("valid");
        let verify = config.verify.expect("verify");
        assert_eq!(verify.mode, Mode::All);
        assert_eq!(
            verify.allowed_signers.as_deref(),
            Some(Path::new("/etc/capstan/allowed_signers"))
        );
        assert_eq!(
            verify.openpgp_keys.as_deref(),
            Some(Path::new("/keys/team.asc"))
        );
        assert_eq!(verify.max_commits, VerifyPolicy::DEFAULT_MAX_COMMITS);
    }

    #[test]
    fn allow_rewrite_names_two_full_commits() {
        let (from, to) = ("1".repeat(40), "2".repeat(40));
        let config = parse(&format!(
            "apiVersion: capstan.dev/v1alpha1\nkind: DaemonConfig\nsource:\n  verify:\n    mode: head\n    allowedSigners: keys\n    allowRewrite: {{from: {from}, to: {to}}}\n"
        ))
        .expect("valid");
        assert_eq!(
            config.verify.and_then(|v| v.allow_rewrite),
            Some(Rewrite {
                from: git2::Oid::from_str(&from).expect("oid"),
                to: git2::Oid::from_str(&to).expect("oid"),
            })
        );
        let err = parse(&format!(
            "apiVersion: capstan.dev/v1alpha1\nkind: DaemonConfig\nsource:\n  verify:\n    mode: head\n    allowedSigners: keys\n    allowRewrite: {{from: {from}, to: abc123}}\n"
        ))
        .expect_err("a short id");
        assert!(err.to_string().contains("allowRewrite.to"), "{err}");
    }

    #[test]
    fn no_source_section_verifies_nothing() {
        let config =
            parse("apiVersion: capstan.dev/v1alpha1\nkind: DaemonConfig\n").expect("valid");
        assert_eq!(config, DaemonConfig::default());
    }

    #[test]
    fn an_unknown_field_is_refused_with_its_line_column_and_a_suggestion() {
        let err = parse(
            "apiVersion: capstan.dev/v1alpha1\nkind: DaemonConfig\nsource:\n  verify:\n    mode: head\n    allowedSigner: keys\n",
        )
        .expect_err("unknown field");
        let text = err.to_string();
        assert!(
            text.starts_with("/etc/capstan/config.yaml:6:5: error:"),
            "{text}"
        );
        assert!(text.contains("allowedSigner"), "{text}");
        assert!(text.contains("did you mean `allowedSigners`?"), "{text}");
    }

    #[test]
    fn a_mode_other_than_head_or_all_is_refused() {
        let err = parse(
            "apiVersion: capstan.dev/v1alpha1\nkind: DaemonConfig\nsource:\n  verify:\n    mode: tip\n    allowedSigners: keys\n",
        )
        .expect_err("bad mode");
        let text = err.to_string();
        assert!(text.starts_with("/etc/capstan/config.yaml:5:"), "{text}");
        assert!(text.contains("tip"), "{text}");
    }

    #[test]
    fn verification_without_keys_is_refused() {
        let err = parse(
            "apiVersion: capstan.dev/v1alpha1\nkind: DaemonConfig\nsource:\n  verify: {mode: head}\n",
        )
        .expect_err("no keys");
        let text = err.to_string();
        assert!(text.contains("source.verify"), "{text}");
        assert!(text.contains("openpgpKeys"), "{text}");
    }

    #[test]
    fn the_wrong_kind_is_refused() {
        let err = parse("apiVersion: capstan.dev/v1alpha1\nkind: Fleet\n").expect_err("kind");
        assert!(err.to_string().contains("DaemonConfig"), "{err}");
    }
}
