//! Where the desired state comes from: a repository folder on disk. Reads `capstan.yaml` and
//! the cluster files it points to, and hands their texts to `spec` (which does no I/O).
//!
//! [`watch`] signals changes to the folder at once (file-system events). A later issue adds a
//! Git remote (poll, webhook) that reports commits as revisions.

use std::path::{Path, PathBuf};

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
        /// Why.
        #[source]
        source: notify::Error,
    },
    /// A file or folder could not be read.
    #[error("cannot read {path}")]
    Read {
        /// What was being read.
        path: PathBuf,
        /// Why.
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
    let fleet_path = repo.join(spec::FLEET_FILE);
    let fleet_text = match std::fs::read_to_string(&fleet_path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return Err(SourceError::MissingFleet {
                repo: repo.to_owned(),
            });
        }
        Err(source) => {
            return Err(SourceError::Read {
                path: fleet_path,
                source,
            });
        }
    };
    let clusters_dir = spec::clusters_dir_of(&fleet_text);
    let clusters = read_cluster_files(repo, &clusters_dir)?;
    Ok(RepoFiles {
        fleet: SourceText {
            path: spec::FLEET_FILE.to_owned(),
            text: fleet_text,
        },
        clusters,
    })
}

fn read_cluster_files(repo: &Path, clusters_dir: &Path) -> Result<Vec<SourceText>, SourceError> {
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
        if !is_yaml || !path.is_file() {
            continue;
        }
        let text = std::fs::read_to_string(&path).map_err(|source| SourceError::Read {
            path: path.clone(),
            source,
        })?;
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
