//! Reading one commit's files from a mirror's object database: `capstan.yaml` and the cluster
//! files of its `clustersDir`, under an optional sub-folder.
//!
//! # Guarantees
//! - Only blobs are read: a symbolic link is never followed (a linked cluster file is skipped
//!   and reported, a linked `capstan.yaml` refused); submodules are skipped and reported;
//!   nothing outside the sub-folder is read.
//! - A blob's size is read from its header and checked against the per-file and per-tree
//!   limits before its content is inflated.

use std::path::{Component, Path, PathBuf};

use super::Limits;
use super::credentials::Redactor;
use crate::spec::{self, RepoFiles, SourceText};

/// A failure of libgit2, its message redacted.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct GitFailure {
    message: String,
}

impl GitFailure {
    pub(crate) fn new(err: &git2::Error, redactor: &Redactor) -> Self {
        GitFailure {
            message: redactor.redact(err.message()),
        }
    }

    /// A message of our own about the remote (e.g. a refused host key), redacted.
    pub(crate) fn from_message(message: &str, redactor: &Redactor) -> Self {
        GitFailure {
            message: redactor.redact(message),
        }
    }

    /// For messages that cannot hold a credential (reading the local object database).
    pub(super) fn unredacted(err: &git2::Error) -> Self {
        GitFailure {
            message: err.message().to_owned(),
        }
    }
}

/// A commit of the tracked branch, shown as Flux shows it: `main@sha1:<40 hex>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revision {
    /// The branch.
    pub branch: String,
    /// The commit.
    pub commit: git2::Oid,
}

impl std::fmt::Display for Revision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@sha1:{}", self.branch, self.commit)
    }
}

/// The files of one commit.
#[derive(Debug, Clone)]
pub struct CommitFiles {
    /// The commit.
    pub revision: Revision,
    /// `capstan.yaml` and the cluster files.
    pub files: RepoFiles,
    /// Entries of the clusters folder that were not read, and why (links, submodules).
    pub skipped: Vec<String>,
}

/// Reading a commit's files from the mirror failed.
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    /// The commit or one of its objects could not be read from the mirror.
    #[error("cannot read {what} at {revision}")]
    Read {
        /// What.
        what: String,
        /// The revision.
        revision: String,
        /// What libgit2 said, credentials redacted.
        #[source]
        source: GitFailure,
    },
    /// The commit has no `capstan.yaml` where expected.
    #[error("{revision} has no {path}: is this a capstan repository (or is --path right)?")]
    MissingFleet {
        /// The revision.
        revision: String,
        /// Where it was looked for.
        path: String,
    },
    /// `capstan.yaml` is a symbolic link or not a file.
    #[error("{path} at {revision} is not a regular file (links are never followed)")]
    NotAFile {
        /// The revision.
        revision: String,
        /// The entry.
        path: String,
    },
    /// A path given or declared leaves the tree (`..`, absolute).
    #[error("path {path} leaves the repository")]
    OutsidePath {
        /// The path.
        path: String,
    },
    /// A file is larger than the per-file limit.
    #[error("{path} at {revision} holds {size} bytes, more than the limit of {limit} per file")]
    FileTooLarge {
        /// The revision.
        revision: String,
        /// The file.
        path: String,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The files read add up to more than the per-tree limit.
    #[error("the files at {revision} add up to more than the limit of {limit} bytes per tree")]
    TreeTooLarge {
        /// The revision.
        revision: String,
        /// The limit.
        limit: u64,
    },
    /// A file is not UTF-8 text.
    #[error("{path} at {revision} is not UTF-8 text")]
    NotText {
        /// The revision.
        revision: String,
        /// The file.
        path: String,
    },
}

/// Reads `capstan.yaml` and the cluster files of `revision` from `mirror`'s object database,
/// under `path` (the root when `None`).
///
/// # Errors
/// When an object is missing, a limit is exceeded, or `capstan.yaml` is missing or a link.
pub(super) fn read_commit(
    mirror: &git2::Repository,
    revision: &Revision,
    path: Option<&Path>,
    limits: &Limits,
    redactor: &Redactor,
) -> Result<CommitFiles, TreeError> {
    let shown = revision.to_string();
    let read_error = |what: &str, err: &git2::Error| TreeError::Read {
        what: what.to_owned(),
        revision: shown.clone(),
        source: GitFailure::new(err, redactor),
    };
    let commit = mirror
        .find_commit(revision.commit)
        .map_err(|err| read_error("the commit", &err))?;
    let root = commit
        .tree()
        .map_err(|err| read_error("the commit's tree", &err))?;
    let base = match path {
        Some(path) if path != Path::new("") && path != Path::new(".") => {
            let path = relative_path(path)?;
            let entry = root.get_path(&path).map_err(|_| TreeError::MissingFleet {
                revision: shown.clone(),
                path: path.join(spec::FLEET_FILE).display().to_string(),
            })?;
            if entry.kind() != Some(git2::ObjectType::Tree) {
                return Err(TreeError::NotAFile {
                    revision: shown.clone(),
                    path: path.display().to_string(),
                });
            }
            mirror
                .find_tree(entry.id())
                .map_err(|err| read_error(&path.display().to_string(), &err))?
        }
        _ => root,
    };
    let mut reader = TreeReader {
        mirror,
        revision: &shown,
        limits,
        total: 0,
    };
    let fleet_entry = base
        .get_name(spec::FLEET_FILE)
        .ok_or_else(|| TreeError::MissingFleet {
            revision: shown.clone(),
            path: spec::FLEET_FILE.to_owned(),
        })?;
    if !is_regular_file(&fleet_entry) {
        return Err(TreeError::NotAFile {
            revision: shown.clone(),
            path: spec::FLEET_FILE.to_owned(),
        });
    }
    let fleet_text = reader.blob_text(&fleet_entry, spec::FLEET_FILE)?;
    let clusters_dir = relative_path(&spec::clusters_dir_of(&fleet_text))?;
    let mut clusters = Vec::new();
    let mut skipped = Vec::new();
    let dir_tree = if clusters_dir.as_os_str().is_empty() {
        Some(base.clone())
    } else {
        base.get_path(&clusters_dir)
            .ok()
            .filter(|e| e.kind() == Some(git2::ObjectType::Tree))
            .and_then(|e| mirror.find_tree(e.id()).ok())
    };
    if let Some(tree) = dir_tree {
        for entry in &tree {
            let Ok(name) = entry.name() else { continue };
            let is_yaml = name.ends_with(".yaml") || name.ends_with(".yml");
            if !is_yaml {
                continue;
            }
            let relative = clusters_dir.join(name).to_string_lossy().replace('\\', "/");
            if entry.filemode() == i32::from(git2::FileMode::Link) {
                tracing::warn!(path = %relative, revision = %shown, "cluster file is a symbolic link: skipped, links are never followed");
                skipped.push(format!("{relative}: a symbolic link, never followed"));
                continue;
            }
            if entry.filemode() == i32::from(git2::FileMode::Commit) {
                skipped.push(format!("{relative}: a submodule, ignored"));
                continue;
            }
            if !is_regular_file(&entry) {
                continue;
            }
            let text = reader.blob_text(&entry, &relative)?;
            clusters.push(SourceText {
                path: relative,
                text,
            });
        }
    }
    clusters.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(CommitFiles {
        revision: revision.clone(),
        files: RepoFiles {
            fleet: SourceText {
                path: spec::FLEET_FILE.to_owned(),
                text: fleet_text,
            },
            clusters,
        },
        skipped,
    })
}
/// Reads blobs, keeping the running total under the per-tree limit.
struct TreeReader<'a> {
    mirror: &'a git2::Repository,
    revision: &'a str,
    limits: &'a Limits,
    total: u64,
}

impl TreeReader<'_> {
    fn blob_text(&mut self, entry: &git2::TreeEntry<'_>, path: &str) -> Result<String, TreeError> {
        let read_error = |err: &git2::Error| TreeError::Read {
            what: path.to_owned(),
            revision: self.revision.to_owned(),
            source: GitFailure::unredacted(err),
        };
        // The header gives the size without inflating the blob.
        let odb = self.mirror.odb().map_err(|err| read_error(&err))?;
        let (size, _) = odb
            .read_header(entry.id())
            .map_err(|err| read_error(&err))?;
        let size = size as u64;
        if size > self.limits.max_file_bytes {
            return Err(TreeError::FileTooLarge {
                revision: self.revision.to_owned(),
                path: path.to_owned(),
                size,
                limit: self.limits.max_file_bytes,
            });
        }
        self.total += size;
        if self.total > self.limits.max_tree_bytes {
            return Err(TreeError::TreeTooLarge {
                revision: self.revision.to_owned(),
                limit: self.limits.max_tree_bytes,
            });
        }
        let blob = self
            .mirror
            .find_blob(entry.id())
            .map_err(|err| read_error(&err))?;
        String::from_utf8(blob.content().to_vec()).map_err(|_| TreeError::NotText {
            revision: self.revision.to_owned(),
            path: path.to_owned(),
        })
    }
}

fn is_regular_file(entry: &git2::TreeEntry<'_>) -> bool {
    let mode = entry.filemode();
    mode == i32::from(git2::FileMode::Blob) || mode == i32::from(git2::FileMode::BlobExecutable)
}

/// `path` as a path inside the tree: no root, no `..`; `.` components dropped.
fn relative_path(path: &Path) -> Result<PathBuf, TreeError> {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(TreeError::OutsidePath {
                    path: path.display().to_string(),
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_leaving_the_tree_are_refused() {
        assert!(relative_path(Path::new("../etc")).is_err());
        assert!(relative_path(Path::new("/etc")).is_err());
        assert_eq!(
            relative_path(Path::new("./fleet/prod")).ok(),
            Some(PathBuf::from("fleet/prod"))
        );
    }
}
