//! A repository folder on disk: reads `capstan.yaml` and the cluster files it points to, and
//! hands their texts to `spec` (which does no I/O).
//!
//! # Guarantees
//! - A symbolic link is never followed: a linked cluster file is skipped with a warning, a
//!   linked `capstan.yaml` is refused (a `clusters/x.yaml -> /etc/shadow` link must not be read).
//! - No file larger than [`Limits::max_file_bytes`] is read.
//!
//! [`watch`] signals changes to the folder at once (file-system events).

use std::path::{Path, PathBuf};

use super::Limits;
use crate::spec::{self, RepoFiles, SourceText};

/// Reading the repository failed.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The folder has no `capstan.yaml`.
    #[error("{repo} has no {file}: is this a capstan repository? (see examples-repo/)", file = spec::FLEET_FILE)]
    MissingFleet {
        /// The repository folder.
        repo: PathBuf,
    },
    /// The folder cannot be watched for changes.
    #[error("cannot watch {repo} for changes")]
    Watch {
        /// The repository folder.
        repo: PathBuf,
        /// What the file-system watcher said.
        #[source]
        source: notify::Error,
    },
    /// `capstan.yaml` is a symbolic link, which is never followed.
    #[error("{path} is a symbolic link: capstan never follows links out of a repository")]
    Symlink {
        /// The link.
        path: PathBuf,
    },
    /// A file is larger than the limit.
    #[error("{path} holds {size} bytes, more than the limit of {limit} bytes per file")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// A file or folder could not be read.
    #[error("cannot read {path}")]
    Read {
        /// What was being read.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
}

/// Reads `capstan.yaml` and every `*.yaml`/`*.yml` file directly in its `clustersDir`.
///
/// A missing `clustersDir` reads as no clusters (validation then reports what that means).
///
/// # Errors
/// [`SourceError::MissingFleet`] without `capstan.yaml`; [`SourceError::Read`] on I/O errors.
pub fn read_repo(repo: &Path) -> Result<RepoFiles, SourceError> {
    read_repo_within(repo, &Limits::default())
}

/// [`read_repo`] with explicit size limits.
///
/// # Errors
/// As [`read_repo`], plus [`SourceError::TooLarge`] and [`SourceError::Symlink`].
pub fn read_repo_within(repo: &Path, limits: &Limits) -> Result<RepoFiles, SourceError> {
    let fleet_path = repo.join(spec::FLEET_FILE);
    let fleet_text = match read_regular_file(&fleet_path, limits) {
        Ok(Some(text)) => text,
        Ok(None) => return Err(SourceError::Symlink { path: fleet_path }),
        Err(SourceError::Read { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Err(SourceError::MissingFleet {
                repo: repo.to_owned(),
            });
        }
        Err(err) => return Err(err),
    };
    let clusters_dir = spec::clusters_dir_of(&fleet_text);
    let clusters = read_cluster_files(repo, &clusters_dir, limits)?;
    Ok(RepoFiles {
        fleet: SourceText {
            path: spec::FLEET_FILE.to_owned(),
            text: fleet_text,
        },
        clusters,
    })
}

/// Reads a file unless it is a symbolic link (`Ok(None)`), refusing files over the limit.
fn read_regular_file(path: &Path, limits: &Limits) -> Result<Option<String>, SourceError> {
    let metadata = std::fs::symlink_metadata(path).map_err(|source| SourceError::Read {
        path: path.to_owned(),
        source,
    })?;
    if metadata.file_type().is_symlink() {
        return Ok(None);
    }
    if metadata.len() > limits.max_file_bytes {
        return Err(SourceError::TooLarge {
            path: path.to_owned(),
            size: metadata.len(),
            limit: limits.max_file_bytes,
        });
    }
    std::fs::read_to_string(path)
        .map(Some)
        .map_err(|source| SourceError::Read {
            path: path.to_owned(),
            source,
        })
}

fn read_cluster_files(
    repo: &Path,
    clusters_dir: &Path,
    limits: &Limits,
) -> Result<Vec<SourceText>, SourceError> {
    let dir = repo.join(clusters_dir);
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(SourceError::Read { path: dir, source }),
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| SourceError::Read {
            path: dir.clone(),
            source,
        })?;
        let path = entry.path();
        let is_yaml = matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml")
        );
        let file_type = entry.file_type().map_err(|source| SourceError::Read {
            path: path.clone(),
            source,
        })?;
        if file_type.is_symlink() {
            tracing::warn!(path = %path.display(), "cluster file is a symbolic link: skipped, links are never followed");
            continue;
        }
        if !is_yaml || !file_type.is_file() {
            continue;
        }
        let Some(text) = read_regular_file(&path, limits)? else {
            continue;
        };
        let relative = clusters_dir.join(entry.file_name());
        files.push(SourceText {
            path: relative.to_string_lossy().replace('\\', "/"),
            text,
        });
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

/// A file-system watch on a repository folder: each change to a file under it is signalled on
/// [`RepoWatcher::changed`], coalesced (a burst of writes wakes the reader once).
pub struct RepoWatcher {
    // Kept alive: dropping the watcher stops the events.
    _watcher: notify::RecommendedWatcher,
    changes: tokio::sync::mpsc::Receiver<()>,
}

impl RepoWatcher {
    /// Waits for the next change. Returns `false` when the watch ended.
    pub async fn changed(&mut self) -> bool {
        let woke = self.changes.recv().await.is_some();
        // Drain what piled up meanwhile: one re-read covers them all.
        while self.changes.try_recv().is_ok() {}
        woke
    }
}

/// Watches `repo` (recursively) for changes.
///
/// # Errors
/// [`SourceError::Watch`] when the platform refuses the watch.
pub fn watch(repo: &Path) -> Result<RepoWatcher, SourceError> {
    use notify::Watcher as _;
    let (sender, changes) = tokio::sync::mpsc::channel(1);
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let relevant = event.is_ok_and(|e| !e.kind.is_access());
        if relevant {
            // A full channel already holds a wake-up: dropping this one loses nothing.
            let _ = sender.try_send(());
        }
    })
    .map_err(|source| SourceError::Watch {
        repo: repo.to_owned(),
        source,
    })?;
    watcher
        .watch(repo, notify::RecursiveMode::Recursive)
        .map_err(|source| SourceError::Watch {
            repo: repo.to_owned(),
            source,
        })?;
    Ok(RepoWatcher {
        _watcher: watcher,
        changes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_change_to_a_cluster_file_wakes_the_watcher() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir(dir.path().join("clusters")).expect("mkdir");
        let mut watcher = watch(dir.path()).expect("watch");
        std::fs::write(dir.path().join("clusters/a.yaml"), "x").expect("write");
        let woke =
            tokio::time::timeout(std::time::Duration::from_secs(10), watcher.changed()).await;
        assert_eq!(woke.ok(), Some(true));
    }

    #[test]
    fn a_symlinked_cluster_file_is_never_read() {
        let dir = tempfile::tempdir().expect("temp dir");
        let secret = tempfile::NamedTempFile::new().expect("outside file");
        std::fs::write(secret.path(), "root:secret-hash").expect("write");
        std::fs::write(dir.path().join("capstan.yaml"), "a").expect("write");
        std::fs::create_dir(dir.path().join("clusters")).expect("mkdir");
        std::os::unix::fs::symlink(secret.path(), dir.path().join("clusters/x.yaml"))
            .expect("symlink");
        let files = read_repo(dir.path()).expect("read");
        assert!(files.clusters.is_empty(), "{:?}", files.clusters);
    }

    #[test]
    fn a_symlinked_fleet_file_is_refused() {
        let dir = tempfile::tempdir().expect("temp dir");
        let outside = tempfile::NamedTempFile::new().expect("outside file");
        std::os::unix::fs::symlink(outside.path(), dir.path().join("capstan.yaml"))
            .expect("symlink");
        let err = read_repo(dir.path()).expect_err("refused");
        assert!(matches!(err, SourceError::Symlink { .. }), "{err}");
    }

    #[test]
    fn a_file_over_the_limit_is_refused() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("capstan.yaml"), "a".repeat(100)).expect("write");
        let limits = Limits {
            max_file_bytes: 10,
            ..Limits::default()
        };
        let err = read_repo_within(dir.path(), &limits).expect_err("refused");
        assert!(
            err.to_string().contains("more than the limit of 10 bytes"),
            "{err}"
        );
    }

    #[test]
    fn the_content_revision_changes_with_any_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("capstan.yaml"), "a").expect("write");
        let before = read_repo(dir.path()).expect("read").content_revision();
        std::fs::create_dir(dir.path().join("clusters")).expect("mkdir");
        std::fs::write(dir.path().join("clusters/x.yaml"), "b").expect("write");
        let after = read_repo(dir.path()).expect("read").content_revision();
        assert_ne!(before, after);
        assert!(after.starts_with("dir:") && after.len() == 16);
    }
}
