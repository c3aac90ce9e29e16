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
use super::git::{CommitFiles, GitError, GitFailure, Revision};
use crate::spec::{self, RepoFiles, SourceText};

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
) -> Result<CommitFiles, GitError> {
    let shown = revision.to_string();
    let read_error = |what: &str, err: &git2::Error| GitError::Read {
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
            let entry = root.get_path(&path).map_err(|_| GitError::MissingFleet {
                revision: shown.clone(),
                path: path.join(spec::FLEET_FILE).display().to_string(),
            })?;
            if entry.kind() != Some(git2::ObjectType::Tree) {
                return Err(GitError::NotAFile {
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
        .ok_or_else(|| GitError::MissingFleet {
            revision: shown.clone(),
            path: spec::FLEET_FILE.to_owned(),
        })?;
    if !is_regular_file(&fleet_entry) {
        return Err(GitError::NotAFile {
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
    fn blob_text(&mut self, entry: &git2::TreeEntry<'_>, path: &str) -> Result<String, GitError> {
        let read_error = |err: &git2::Error| GitError::Read {
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
            return Err(GitError::FileTooLarge {
                revision: self.revision.to_owned(),
                path: path.to_owned(),
                size,
                limit: self.limits.max_file_bytes,
            });
        }
        self.total += size;
        if self.total > self.limits.max_tree_bytes {
            return Err(GitError::TreeTooLarge {
                revision: self.revision.to_owned(),
                limit: self.limits.max_tree_bytes,
            });
        }
        let blob = self
            .mirror
            .find_blob(entry.id())
            .map_err(|err| read_error(&err))?;
        String::from_utf8(blob.content().to_vec()).map_err(|_| GitError::NotText {
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
fn relative_path(path: &Path) -> Result<PathBuf, GitError> {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(GitError::OutsidePath {
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
