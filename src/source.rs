//! Where the desired state comes from: a repository folder on disk. Reads `capstan.yaml` and
//! the cluster files it points to, and hands their texts to `spec` (which does no I/O).
//!
//! Later this module also follows a Git remote (poll, file-system events, webhook) and reports
//! the revision it read.

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
