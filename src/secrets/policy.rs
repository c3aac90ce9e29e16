//! Which secret sources a repository file may name: a rule per source, checked on the text
//! alone (no I/O), so a revision can be judged before anything of it is used.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use crate::spec::SecretSource;

/// The largest secret (a file, or a variable's value) capstan reads. A kubeconfig with its
/// inline certificates is a few KiB and a CA bundle a few dozen; anything larger is not one
/// of ours, and reading it whole would let a mistake exhaust the daemon's memory.
pub const MAX_SECRET_BYTES: u64 = 256 * 1024;

/// The prefix of the variables a repository may name unless `--secrets-env-prefix` says
/// otherwise.
pub const DEFAULT_ENV_PREFIX: &str = "CAPSTAN_";

/// A secret source of a repository file, by what it is for and whose it is: the owner's kind
/// and name decide the only variable and the only folder it may come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretUse<'a> {
    /// `proxmox.NAME.tokenFrom`: a Proxmox API token's secret.
    ProxmoxToken(&'a str),
    /// `proxmox.NAME.caFile`: the CA a Proxmox connection trusts (not a secret, but it decides
    /// where the token may be sent, so it is the operator's file too).
    ProxmoxCa(&'a str),
    /// `datastores.NAME.adminPasswordFrom`: a datastore server's admin password.
    DatastorePassword(&'a str),
    /// `managementClusters.NAME.kubeconfigFrom`: a management cluster's kubeconfig.
    ManagementKubeconfig(&'a str),
    /// `spec.kubernetes.datastore.endpointFrom` of the cluster NAME: its kine DSN.
    KineDsn(&'a str),
    /// `notifications.providers.NAME.addressFrom`: a receiver's address (a webhook URL is a
    /// credential).
    NotificationAddress(&'a str),
    /// `notifications.providers.NAME.signingKeyFrom`: the key a generic receiver's payloads
    /// are signed with.
    NotificationSigningKey(&'a str),
    /// `spec.kubernetes.registries.credentials.REGISTRY.passwordFrom` of the cluster
    /// `cluster`: the password its nodes present to the registry host `registry`.
    RegistryPassword {
        /// The cluster (the owner).
        cluster: &'a str,
        /// The registry host (`HOST[:PORT]`).
        registry: &'a str,
    },
}

impl SecretUse<'_> {
    /// The field that names the source, as validation errors write it.
    pub fn field(&self) -> String {
        match self {
            SecretUse::ProxmoxToken(name) => format!("proxmox.{name}.tokenFrom"),
            SecretUse::ProxmoxCa(name) => format!("proxmox.{name}.caFile"),
            SecretUse::DatastorePassword(name) => format!("datastores.{name}.adminPasswordFrom"),
            SecretUse::ManagementKubeconfig(name) => {
                format!("managementClusters.{name}.kubeconfigFrom")
            }
            SecretUse::KineDsn(_) => "spec.kubernetes.datastore.endpointFrom".to_owned(),
            SecretUse::NotificationAddress(name) => {
                format!("notifications.providers.{name}.addressFrom")
            }
            SecretUse::NotificationSigningKey(name) => {
                format!("notifications.providers.{name}.signingKeyFrom")
            }
            SecretUse::RegistryPassword { registry, .. } => {
                format!("spec.kubernetes.registries.credentials.{registry}.passwordFrom")
            }
        }
    }

    /// What the secret is, in a sentence.
    pub fn describe(&self) -> String {
        match self {
            SecretUse::ProxmoxToken(name) => format!("the token of Proxmox connection `{name}`"),
            SecretUse::ProxmoxCa(name) => format!("the CA file of Proxmox connection `{name}`"),
            SecretUse::DatastorePassword(name) => {
                format!("the admin password of datastore server `{name}`")
            }
            SecretUse::ManagementKubeconfig(name) => {
                format!("the kubeconfig of management cluster `{name}`")
            }
            SecretUse::KineDsn(name) => format!("the kine DSN of cluster `{name}`"),
            SecretUse::NotificationAddress(name) => {
                format!("the address of notification provider `{name}`")
            }
            SecretUse::NotificationSigningKey(name) => {
                format!("the signing key of notification provider `{name}`")
            }
            SecretUse::RegistryPassword { cluster, registry } => {
                format!("the password cluster `{cluster}` presents to registry `{registry}`")
            }
        }
    }

    /// The folder under `--secrets-dir` that holds the owner's files (`proxmox/homelab`).
    pub fn folder(&self) -> PathBuf {
        let (kind, name) = match self {
            SecretUse::ProxmoxToken(name) | SecretUse::ProxmoxCa(name) => ("proxmox", name),
            SecretUse::DatastorePassword(name) => ("datastores", name),
            SecretUse::ManagementKubeconfig(name) => ("managementClusters", name),
            SecretUse::KineDsn(name) | SecretUse::RegistryPassword { cluster: name, .. } => {
                ("clusters", name)
            }
            SecretUse::NotificationAddress(name) | SecretUse::NotificationSigningKey(name) => {
                ("notifications", name)
            }
        };
        Path::new(kind).join(name)
    }

    /// The only environment variable the secret may come from (`None`: a file only).
    ///
    /// Owner names are DNS-1123 labels, so upper-casing them and writing `-` as `_` gives each
    /// owner its own name, and the kind words (none a prefix of another) keep kinds apart:
    /// no two owners ever share a variable.
    pub fn variable(&self, prefix: &str) -> Option<String> {
        let (kind, name, field) = match self {
            SecretUse::ProxmoxToken(name) => ("PROXMOX", name, "TOKEN"),
            SecretUse::ProxmoxCa(_) => return None,
            SecretUse::DatastorePassword(name) => ("DATASTORE", name, "PASSWORD"),
            SecretUse::ManagementKubeconfig(name) => ("MANAGEMENT", name, "KUBECONFIG"),
            SecretUse::KineDsn(name) => ("CLUSTER", name, "DATASTORE_ENDPOINT"),
            SecretUse::NotificationAddress(name) => ("NOTIFICATION", name, "ADDRESS"),
            SecretUse::NotificationSigningKey(name) => ("NOTIFICATION", name, "SIGNING_KEY"),
            SecretUse::RegistryPassword { cluster, registry } => {
                // The host's word sits between the owner and a field word no other kind
                // ends with; within a cluster, validation refuses two hosts of one word.
                let cluster = cluster.to_ascii_uppercase().replace('-', "_");
                let host = crate::spec::registries::variable_word(registry);
                return Some(format!(
                    "{prefix}CLUSTER_{cluster}_REGISTRY_{host}_PASSWORD"
                ));
            }
        };
        let name = name.to_ascii_uppercase().replace('-', "_");
        Some(format!("{prefix}{kind}_{name}_{field}"))
    }
}

/// Why a source is not allowed, and what to write instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// What is refused.
    pub message: String,
    /// How to fix it (which flag or name allows it).
    pub hint: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}; {}", self.message, self.hint)
    }
}

/// The policy flags are unusable.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// `--secrets-env-prefix` is empty or not a variable name's beginning.
    #[error(
        "--secrets-env-prefix `{prefix}` must be upper-case letters, digits and `_` (e.g. `CAPSTAN_`)"
    )]
    Prefix {
        /// What was given.
        prefix: String,
    },
    /// `--secrets-dir` cannot be resolved.
    #[error("--secrets-dir {path} cannot be resolved")]
    Dir {
        /// What was given.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// `--secrets-dir` is a file.
    #[error("--secrets-dir {path} is not a folder")]
    NotAFolder {
        /// What was given.
        path: PathBuf,
    },
}

/// Where secret files are: the folder as given (made absolute, so paths keep the symbolic
/// links a Kubernetes Secret volume is made of) and as resolved (to tell an escape).
#[derive(Debug, Clone)]
struct SecretsDir {
    given: PathBuf,
    canonical: PathBuf,
}

/// The operator's rule for secret sources: variables only `<prefix><KIND>_<NAME>_<FIELD>`,
/// files only under `<secrets-dir>/<kind>/<name>/`, never a variable the daemon's own flags
/// read. The default allows `CAPSTAN_` variables and no file.
#[derive(Debug, Clone)]
pub struct SecretPolicy {
    env_prefix: String,
    dir: Option<SecretsDir>,
    reserved: BTreeSet<String>,
}

impl Default for SecretPolicy {
    fn default() -> Self {
        SecretPolicy {
            env_prefix: DEFAULT_ENV_PREFIX.to_owned(),
            dir: None,
            reserved: BTreeSet::new(),
        }
    }
}

impl SecretPolicy {
    /// Variables with `env_prefix`, files under `dir` (resolved now).
    ///
    /// # Errors
    /// When the prefix is not a variable name's beginning, or `dir` is not a folder.
    pub fn new(env_prefix: &str, dir: Option<&Path>) -> Result<Self, PolicyError> {
        let valid_prefix = !env_prefix.is_empty()
            && env_prefix
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
        if !valid_prefix {
            return Err(PolicyError::Prefix {
                prefix: env_prefix.to_owned(),
            });
        }
        let dir = dir
            .map(|path| {
                let failed = |source| PolicyError::Dir {
                    path: path.to_owned(),
                    source,
                };
                let canonical = std::fs::canonicalize(path).map_err(failed)?;
                if !canonical.is_dir() {
                    return Err(PolicyError::NotAFolder {
                        path: path.to_owned(),
                    });
                }
                let given = std::path::absolute(path).map_err(failed)?;
                Ok(SecretsDir { given, canonical })
            })
            .transpose()?;
        Ok(SecretPolicy {
            env_prefix: env_prefix.to_owned(),
            dir,
            reserved: BTreeSet::new(),
        })
    }

    /// This policy, never allowing `variables` (those the daemon's own flags read secrets
    /// from: the forge token, `--git-token-from env:VAR`, ...).
    #[must_use]
    pub fn reserving(mut self, variables: impl IntoIterator<Item = String>) -> Self {
        self.reserved.extend(variables);
        self
    }

    /// The resolved secrets folder, if files are allowed.
    pub(super) fn canonical_dir(&self) -> Option<&Path> {
        self.dir.as_ref().map(|dir| dir.canonical.as_path())
    }

    /// Whether `use_` may be read from `source`.
    ///
    /// # Errors
    /// The [`Refusal`], saying which name or folder would be allowed.
    pub fn check(&self, use_: SecretUse<'_>, source: &SecretSource) -> Result<(), Refusal> {
        match source {
            SecretSource::Env(variable) => self.check_variable(use_, variable),
            SecretSource::File(path) => self.check_file(use_, path).map(drop),
        }
    }

    fn check_variable(&self, use_: SecretUse<'_>, variable: &str) -> Result<(), Refusal> {
        let folder = use_.folder();
        let Some(expected) = use_.variable(&self.env_prefix) else {
            return Err(Refusal {
                message: format!("{} is a file, not an environment variable", use_.describe()),
                hint: format!(
                    "put it under the daemon's --secrets-dir, in {}/",
                    folder.display()
                ),
            });
        };
        if self.reserved.contains(variable) {
            return Err(Refusal {
                message: format!(
                    "the environment variable {variable} holds one of the daemon's own secrets"
                ),
                hint: format!("give {} its own variable, {expected}", use_.describe()),
            });
        }
        if variable == expected {
            return Ok(());
        }
        Err(Refusal {
            message: format!(
                "the daemon does not let {} come from the environment variable {variable}",
                use_.describe()
            ),
            hint: format!(
                "name it {expected}: a secret comes only from the variable named after its owner \
                 (prefix `{}`, the daemon's --secrets-env-prefix), or from a file under the \
                 daemon's --secrets-dir, in {}/",
                self.env_prefix,
                folder.display()
            ),
        })
    }

    /// Whether `use_` may be read from the file `path` (relative paths are relative to
    /// `--secrets-dir`); the file's full path (not resolved: symbolic links are the reader's
    /// to check) when it may.
    ///
    /// # Errors
    /// The [`Refusal`] when no files are allowed, `path` holds `..`, lies outside
    /// `--secrets-dir`, or outside the owner's folder in it.
    pub fn check_file(&self, use_: SecretUse<'_>, path: &Path) -> Result<PathBuf, Refusal> {
        let folder = use_.folder();
        let elsewhere = match use_.variable(&self.env_prefix) {
            Some(variable) => format!(", or set the environment variable {variable}"),
            None => String::new(),
        };
        let Some(dir) = &self.dir else {
            return Err(Refusal {
                message: format!(
                    "the daemon reads no secret files, so {} cannot come from {}",
                    use_.describe(),
                    path.display()
                ),
                hint: format!(
                    "the operator starts capstan with --secrets-dir DIR and puts the file in \
                     DIR/{}/{elsewhere}",
                    folder.display()
                ),
            });
        };
        let inside = format!("{}/", dir.given.join(&folder).display());
        if path.components().any(|c| c == Component::ParentDir) {
            return Err(Refusal {
                message: format!("{} holds `..`", path.display()),
                hint: format!("name a file in {inside}{elsewhere}"),
            });
        }
        let relative = if path.is_absolute() {
            path.strip_prefix(&dir.given)
                .or_else(|_| path.strip_prefix(&dir.canonical))
                .map_err(|_| Refusal {
                    message: format!(
                        "{} is outside the daemon's --secrets-dir {}",
                        path.display(),
                        dir.given.display()
                    ),
                    hint: format!(
                        "put the file in {inside} (or write its path relative to --secrets-dir){elsewhere}"
                    ),
                })?
        } else {
            path
        };
        let relative: PathBuf = relative
            .components()
            .filter(|c| *c != Component::CurDir)
            .collect();
        if !relative.starts_with(&folder) || relative == folder {
            return Err(Refusal {
                message: format!(
                    "{} is not in {inside}, the folder of {}",
                    path.display(),
                    use_.describe()
                ),
                hint: format!(
                    "a secret file lies in its owner's folder so that no other object can name \
                     it: move it to {inside}{elsewhere}"
                ),
            });
        }
        Ok(dir.given.join(relative))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> SecretSource {
        SecretSource::Env(name.to_owned())
    }

    fn file(path: &str) -> SecretSource {
        SecretSource::File(PathBuf::from(path))
    }

    fn with_dir(dir: &Path) -> SecretPolicy {
        SecretPolicy::new("CAPSTAN_", Some(dir)).expect("policy")
    }

    #[test]
    fn each_owner_has_its_own_variable_and_no_two_owners_share_one() {
        let uses = [
            SecretUse::ProxmoxToken("homelab"),
            SecretUse::ProxmoxToken("homelab-token"),
            SecretUse::DatastorePassword("homelab"),
            SecretUse::ManagementKubeconfig("homelab"),
            SecretUse::KineDsn("homelab"),
            SecretUse::KineDsn("edge"),
            SecretUse::KineDsn("edge-2"),
            SecretUse::NotificationAddress("homelab"),
            SecretUse::NotificationSigningKey("homelab"),
            SecretUse::RegistryPassword {
                cluster: "homelab",
                registry: "mirror.example:5000",
            },
        ];
        let names: BTreeSet<String> = uses.iter().filter_map(|u| u.variable("CAPSTAN_")).collect();
        assert_eq!(names.len(), uses.len());
        assert_eq!(
            SecretUse::ProxmoxToken("homelab").variable("CAPSTAN_"),
            Some("CAPSTAN_PROXMOX_HOMELAB_TOKEN".to_owned())
        );
        assert_eq!(
            SecretUse::NotificationAddress("team-slack").variable("CAPSTAN_"),
            Some("CAPSTAN_NOTIFICATION_TEAM_SLACK_ADDRESS".to_owned())
        );
        assert_eq!(
            SecretUse::KineDsn("edge-2").variable("FLEET_"),
            Some("FLEET_CLUSTER_EDGE_2_DATASTORE_ENDPOINT".to_owned())
        );
        assert_eq!(
            SecretUse::RegistryPassword {
                cluster: "edge-2",
                registry: "mirror.example:5000"
            }
            .variable("CAPSTAN_"),
            Some("CAPSTAN_CLUSTER_EDGE_2_REGISTRY_MIRROR_EXAMPLE_5000_PASSWORD".to_owned())
        );
    }

    #[test]
    fn a_variable_without_the_prefix_or_of_another_owner_is_refused() {
        let policy = SecretPolicy::default();
        let token = SecretUse::ProxmoxToken("homelab");
        assert_eq!(
            policy.check(token, &env("CAPSTAN_PROXMOX_HOMELAB_TOKEN")),
            Ok(())
        );
        for refused in [
            "HOMELAB_TOKEN",
            "PATH",
            "CAPSTAN_FORGE_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
        ] {
            let refusal = policy.check(token, &env(refused)).expect_err(refused);
            assert!(
                refusal.hint.contains("CAPSTAN_PROXMOX_HOMELAB_TOKEN")
                    && refusal.hint.contains("--secrets-env-prefix"),
                "{refusal}"
            );
        }
        let edge = SecretUse::KineDsn("edge");
        assert!(
            policy
                .check(edge, &env("CAPSTAN_CLUSTER_PROD_DATASTORE_ENDPOINT"))
                .is_err(),
            "one cluster's endpointFrom never reads another's DSN"
        );
        assert!(
            policy
                .check(edge, &env("CAPSTAN_PROXMOX_HOMELAB_TOKEN"))
                .is_err(),
            "nor the Proxmox token"
        );
        let reserved =
            SecretPolicy::default().reserving(["CAPSTAN_PROXMOX_HOMELAB_TOKEN".to_owned()]);
        assert!(
            reserved
                .check(token, &env("CAPSTAN_PROXMOX_HOMELAB_TOKEN"))
                .is_err(),
            "a variable a daemon flag reads is never the repository's"
        );
    }

    #[test]
    fn files_are_refused_without_a_secrets_dir() {
        let refusal = SecretPolicy::default()
            .check(
                SecretUse::ManagementKubeconfig("management"),
                &file("/etc/capstan/management.kubeconfig"),
            )
            .expect_err("no --secrets-dir");
        assert!(refusal.hint.contains("--secrets-dir DIR"), "{refusal}");
        assert!(
            refusal.hint.contains("managementClusters/management"),
            "{refusal}"
        );
    }

    #[test]
    fn a_file_outside_the_owners_folder_or_climbing_out_is_refused() {
        let dir = tempfile::tempdir().expect("dir");
        let policy = with_dir(dir.path());
        let token = SecretUse::ProxmoxToken("homelab");
        let full = dir.path().join("proxmox/homelab/token");
        assert_eq!(
            policy.check_file(token, Path::new("proxmox/homelab/token")),
            Ok(std::path::absolute(&full).expect("absolute"))
        );
        assert!(
            policy
                .check(token, &SecretSource::File(full.clone()))
                .is_ok()
        );
        for refused in [
            "/etc/passwd".to_owned(),
            format!(
                "{}/proxmox/homelab/../../datastores/db/password",
                dir.path().display()
            ),
            "proxmox/homelab/../other/token".to_owned(),
            "../outside".to_owned(),
            "proxmox/homelab-2/token".to_owned(),
            "clusters/homelab/token".to_owned(),
            "proxmox/homelab".to_owned(),
            "token".to_owned(),
        ] {
            let refusal = policy.check(token, &file(&refused)).expect_err(&refused);
            assert!(
                refusal.hint.contains("proxmox/homelab/"),
                "{refused}: {refusal}"
            );
        }
    }

    #[test]
    fn the_prefix_must_begin_a_variable_name() {
        for bad in ["", "capstan_", "CAP STAN", "CAPSTAN-"] {
            assert!(SecretPolicy::new(bad, None).is_err(), "{bad:?}");
        }
        assert!(SecretPolicy::new("FLEET_", None).is_ok());
    }
}
