//! Reading a secret a repository file names, under the operator's [`SecretPolicy`]: the rule
//! again, then the file system's facts (symbolic links, file type, size).

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::spec::SecretSource;

use super::policy::{MAX_SECRET_BYTES, Refusal, SecretPolicy, SecretUse};

/// A secret could not be read. Messages name the field, the variable or the file and how to
/// fix it, never a value.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// The policy does not allow the source.
    #[error("{field}: {refusal}")]
    Refused {
        /// The field naming the source.
        field: String,
        /// Why, and what is allowed.
        refusal: Refusal,
    },
    /// The variable is not set.
    #[error("{field}: the environment variable {variable} is not set in capstan's environment")]
    Unset {
        /// The field naming the source.
        field: String,
        /// The variable.
        variable: String,
    },
    /// The file cannot be found or opened.
    #[error("{field}: cannot open {path}")]
    Open {
        /// The field naming the source.
        field: String,
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// A symbolic link leads out of `--secrets-dir`.
    #[error(
        "{field}: {path} leads outside the daemon's --secrets-dir through a symbolic link; refused"
    )]
    Escapes {
        /// The field naming the source.
        field: String,
        /// The file as named.
        path: PathBuf,
    },
    /// Not a regular file (a folder, a FIFO, a device).
    #[error("{field}: {path} is not a regular file")]
    NotAFile {
        /// The field naming the source.
        field: String,
        /// The file.
        path: PathBuf,
    },
    /// Larger than [`MAX_SECRET_BYTES`].
    #[error("{field}: {what} is larger than {MAX_SECRET_BYTES} bytes; refused")]
    TooLarge {
        /// The field naming the source.
        field: String,
        /// The variable or file.
        what: String,
    },
    /// Reading the file failed.
    #[error("{field}: cannot read {path}")]
    Read {
        /// The field naming the source.
        field: String,
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The secret is not UTF-8 text.
    #[error("{field}: {what} is not UTF-8 text")]
    NotText {
        /// The field naming the source.
        field: String,
        /// The variable or file.
        what: String,
    },
    /// The secret is empty (or only whitespace).
    #[error("{field}: {what} is empty")]
    Empty {
        /// The field naming the source.
        field: String,
        /// The variable or file.
        what: String,
    },
}

/// How the reader looks a variable up: `main`'s view of the process environment.
type Lookup = dyn Fn(&str) -> Option<String> + Send + Sync;

/// Reads the secrets repository files name, as the policy allows. Cheap to clone.
#[derive(Clone)]
pub struct SecretReader {
    policy: Arc<SecretPolicy>,
    env: Arc<Lookup>,
}

impl std::fmt::Debug for SecretReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretReader")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl Default for SecretReader {
    /// The default policy over an empty environment: reads nothing but what a test gives it.
    fn default() -> Self {
        SecretReader::new(Arc::new(SecretPolicy::default()), |_| None)
    }
}

impl SecretReader {
    /// A reader of `policy`'s sources, looking variables up through `env` (`main` passes the
    /// process environment: nothing below it reads the environment itself).
    pub fn new(
        policy: Arc<SecretPolicy>,
        env: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        SecretReader {
            policy,
            env: Arc::new(env),
        }
    }

    /// The policy this reader enforces.
    pub fn policy(&self) -> &Arc<SecretPolicy> {
        &self.policy
    }

    /// The secret `use_` names in `source`, without surrounding whitespace; the redactor knows
    /// it from now on.
    ///
    /// # Errors
    /// When the policy refuses the source, the variable is unset, the file is missing, leads
    /// out of `--secrets-dir`, is not a regular file or is too large, or the secret is empty.
    pub fn read(&self, use_: SecretUse<'_>, source: &SecretSource) -> Result<String, SecretError> {
        let field = use_.field();
        self.policy
            .check(use_, source)
            .map_err(|refusal| SecretError::Refused {
                field: field.clone(),
                refusal,
            })?;
        let (raw, what) = match source {
            SecretSource::Env(variable) => {
                let value = (self.env)(variable).ok_or_else(|| SecretError::Unset {
                    field: field.clone(),
                    variable: variable.clone(),
                })?;
                let what = format!("the environment variable {variable}");
                if value.len() as u64 > MAX_SECRET_BYTES {
                    return Err(SecretError::TooLarge { field, what });
                }
                (value, what)
            }
            SecretSource::File(path) => {
                let resolved = self.file(use_, path)?;
                (read_bounded(&field, &resolved)?, path.display().to_string())
            }
        };
        let value = raw.trim();
        if value.is_empty() {
            return Err(SecretError::Empty { field, what });
        }
        crate::redact::remember(value);
        Ok(value.to_owned())
    }

    /// The file `use_` names at `path`, resolved: a regular file inside `--secrets-dir` (after
    /// every symbolic link), in its owner's folder, at most [`MAX_SECRET_BYTES`].
    ///
    /// # Errors
    /// As [`SecretReader::read`].
    pub fn file(&self, use_: SecretUse<'_>, path: &Path) -> Result<PathBuf, SecretError> {
        let field = use_.field();
        let full = self
            .policy
            .check_file(use_, path)
            .map_err(|refusal| SecretError::Refused {
                field: field.clone(),
                refusal,
            })?;
        let resolved = std::fs::canonicalize(&full).map_err(|source| SecretError::Open {
            field: field.clone(),
            path: full.clone(),
            source,
        })?;
        // A link inside the folder may point anywhere: only where it lands counts.
        if !self
            .policy
            .canonical_dir()
            .is_some_and(|dir| resolved.starts_with(dir))
        {
            return Err(SecretError::Escapes {
                field,
                path: path.to_owned(),
            });
        }
        let metadata = std::fs::metadata(&resolved).map_err(|source| SecretError::Open {
            field: field.clone(),
            path: full.clone(),
            source,
        })?;
        if !metadata.is_file() {
            return Err(SecretError::NotAFile { field, path: full });
        }
        if metadata.len() > MAX_SECRET_BYTES {
            return Err(SecretError::TooLarge {
                field,
                what: full.display().to_string(),
            });
        }
        Ok(resolved)
    }
}

/// The file's text, reading at most one byte more than allowed (a file that grew since it was
/// checked is refused, not read whole).
fn read_bounded(field: &str, path: &Path) -> Result<String, SecretError> {
    let failed = |source| SecretError::Read {
        field: field.to_owned(),
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(failed)?;
    let mut bytes = Vec::new();
    file.take(MAX_SECRET_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(failed)?;
    let what = || path.display().to_string();
    if bytes.len() as u64 > MAX_SECRET_BYTES {
        return Err(SecretError::TooLarge {
            field: field.to_owned(),
            what: what(),
        });
    }
    String::from_utf8(bytes).map_err(|_| SecretError::NotText {
        field: field.to_owned(),
        what: what(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(dir: &Path, env: &'static [(&'static str, &'static str)]) -> SecretReader {
        let policy = SecretPolicy::new("CAPSTAN_", Some(dir)).expect("policy");
        SecretReader::new(Arc::new(policy), move |name| {
            env.iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        })
    }

    fn write(dir: &Path, relative: &str, text: &str) -> PathBuf {
        let path = dir.join(relative);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("folder");
        std::fs::write(&path, text).expect("write");
        path
    }

    #[test]
    fn an_allowed_variable_or_file_is_read_trimmed() {
        let dir = tempfile::tempdir().expect("dir");
        write(
            dir.path(),
            "clusters/edge/dsn",
            "mysql://u:p@tcp(db:3306)/k3s\n",
        );
        let reader = reader(dir.path(), &[("CAPSTAN_PROXMOX_HOMELAB_TOKEN", " 0f6c \n")]);
        assert_eq!(
            reader
                .read(
                    SecretUse::ProxmoxToken("homelab"),
                    &SecretSource::Env("CAPSTAN_PROXMOX_HOMELAB_TOKEN".to_owned())
                )
                .expect("read"),
            "0f6c"
        );
        assert_eq!(
            reader
                .read(
                    SecretUse::KineDsn("edge"),
                    &SecretSource::File(PathBuf::from("clusters/edge/dsn"))
                )
                .expect("read"),
            "mysql://u:p@tcp(db:3306)/k3s"
        );
    }

    #[test]
    fn a_refused_variable_is_not_even_looked_up() {
        let dir = tempfile::tempdir().expect("dir");
        let looked_up = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let seen = Arc::clone(&looked_up);
        let policy = SecretPolicy::new("CAPSTAN_", Some(dir.path())).expect("policy");
        let reader = SecretReader::new(Arc::new(policy), move |name| {
            seen.lock().expect("lock").push(name.to_owned());
            Some("other-clusters-dsn".to_owned())
        });
        let err = reader
            .read(
                SecretUse::KineDsn("edge"),
                &SecretSource::Env("CAPSTAN_CLUSTER_PROD_DATASTORE_ENDPOINT".to_owned()),
            )
            .expect_err("another cluster's variable");
        assert!(matches!(err, SecretError::Refused { .. }), "{err}");
        assert!(
            err.to_string()
                .contains("name it CAPSTAN_CLUSTER_EDGE_DATASTORE_ENDPOINT"),
            "{err}"
        );
        assert!(looked_up.lock().expect("lock").is_empty());
    }

    #[test]
    fn a_symbolic_link_out_of_the_secrets_dir_is_refused() {
        let dir = tempfile::tempdir().expect("dir");
        let outside = tempfile::tempdir().expect("outside");
        let target = write(outside.path(), "token", "stolen");
        std::fs::create_dir_all(dir.path().join("proxmox/homelab")).expect("folder");
        std::os::unix::fs::symlink(&target, dir.path().join("proxmox/homelab/token"))
            .expect("link");
        let err = reader(dir.path(), &[])
            .read(
                SecretUse::ProxmoxToken("homelab"),
                &SecretSource::File(PathBuf::from("proxmox/homelab/token")),
            )
            .expect_err("escapes");
        assert!(matches!(err, SecretError::Escapes { .. }), "{err}");
        assert!(!err.to_string().contains("stolen"));
    }

    #[test]
    fn a_link_inside_the_secrets_dir_is_followed_as_kubernetes_volumes_need() {
        // A Secret volume: `token -> ..data/token`, `..data -> ..2026_01_01/`.
        let dir = tempfile::tempdir().expect("dir");
        write(dir.path(), "..2026_01_01/proxmox/homelab/token", "0f6c");
        std::os::unix::fs::symlink("..2026_01_01", dir.path().join("..data")).expect("link");
        std::os::unix::fs::symlink("..data/proxmox", dir.path().join("proxmox")).expect("link");
        let value = reader(dir.path(), &[])
            .read(
                SecretUse::ProxmoxToken("homelab"),
                &SecretSource::File(PathBuf::from("proxmox/homelab/token")),
            )
            .expect("read through the links");
        assert_eq!(value, "0f6c");
    }

    #[test]
    fn a_file_too_large_or_not_regular_is_refused() {
        let dir = tempfile::tempdir().expect("dir");
        let big = "x".repeat(usize::try_from(MAX_SECRET_BYTES).expect("fits") + 1);
        write(dir.path(), "datastores/db/password", &big);
        std::fs::create_dir_all(dir.path().join("datastores/db/folder")).expect("folder");
        let reader = reader(dir.path(), &[]);
        let use_ = SecretUse::DatastorePassword("db");
        let err = reader
            .read(
                use_,
                &SecretSource::File(PathBuf::from("datastores/db/password")),
            )
            .expect_err("too large");
        assert!(matches!(err, SecretError::TooLarge { .. }), "{err}");
        let err = reader
            .read(
                use_,
                &SecretSource::File(PathBuf::from("datastores/db/folder")),
            )
            .expect_err("a folder");
        assert!(matches!(err, SecretError::NotAFile { .. }), "{err}");
        let err = reader
            .read(
                use_,
                &SecretSource::File(PathBuf::from("datastores/db/missing")),
            )
            .expect_err("missing");
        assert!(
            err.to_string()
                .starts_with("datastores.db.adminPasswordFrom: cannot open"),
            "{err}"
        );
    }
}
