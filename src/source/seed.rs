//! A Git remote made from a folder, for `capstan demo`: a bare repository whose first commit
//! holds the folder's files, and a working clone for the user to edit, commit and push from.

use std::path::{Path, PathBuf};

/// Making the remote or the clone failed.
#[derive(Debug, thiserror::Error)]
pub enum SeedError {
    /// A file or folder could not be read.
    #[error("cannot read {path}")]
    Read {
        /// What.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The bare repository could not be made.
    #[error("cannot make the repository {path}")]
    Init {
        /// Where.
        path: PathBuf,
        /// What libgit2 said.
        #[source]
        source: git2::Error,
    },
    /// The first commit could not be written.
    #[error("cannot commit {folder} into {path}")]
    Commit {
        /// The folder committed.
        folder: PathBuf,
        /// The repository.
        path: PathBuf,
        /// What libgit2 said.
        #[source]
        source: git2::Error,
    },
    /// The clone could not be made.
    #[error("cannot clone {remote} into {path}")]
    Clone {
        /// The remote.
        remote: PathBuf,
        /// Where.
        path: PathBuf,
        /// What libgit2 said.
        #[source]
        source: git2::Error,
    },
}

/// Makes a bare repository at `bare` whose branch `branch` has one commit holding the files
/// of `folder` (recursively; links are skipped). Returns the commit id.
///
/// # Errors
/// When the folder cannot be read or the repository cannot be written.
pub fn seed_remote(folder: &Path, bare: &Path, branch: &str) -> Result<String, SeedError> {
    let repo = git2::Repository::init_opts(
        bare,
        git2::RepositoryInitOptions::new()
            .bare(true)
            .initial_head(branch),
    )
    .map_err(|source| SeedError::Init {
        path: bare.to_owned(),
        source,
    })?;
    let commit_error = |source| SeedError::Commit {
        folder: folder.to_owned(),
        path: bare.to_owned(),
        source,
    };
    let tree = write_tree(&repo, folder)?;
    let tree = repo.find_tree(tree).map_err(commit_error)?;
    let signature =
        git2::Signature::now("capstan demo", "demo@capstan.invalid").map_err(commit_error)?;
    let commit = repo
        .commit(
            Some(&format!("refs/heads/{branch}")),
            &signature,
            &signature,
            "The example fleet: two clusters on a lab\n",
            &tree,
            &[],
        )
        .map_err(commit_error)?;
    Ok(commit.to_string())
}

fn write_tree(repo: &git2::Repository, folder: &Path) -> Result<git2::Oid, SeedError> {
    let read_error = |source| SeedError::Read {
        path: folder.to_owned(),
        source,
    };
    let commit_error = |source| SeedError::Commit {
        folder: folder.to_owned(),
        path: repo.path().to_owned(),
        source,
    };
    let mut builder = repo.treebuilder(None).map_err(commit_error)?;
    let mut entries: Vec<_> = std::fs::read_dir(folder)
        .map_err(read_error)?
        .collect::<Result<_, _>>()
        .map_err(read_error)?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for entry in entries {
        let file_type = entry.file_type().map_err(read_error)?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if file_type.is_dir() {
            let subtree = write_tree(repo, &entry.path())?;
            builder
                .insert(name, subtree, i32::from(git2::FileMode::Tree))
                .map_err(commit_error)?;
        } else if file_type.is_file() {
            let blob = repo.blob_path(&entry.path()).map_err(commit_error)?;
            builder
                .insert(name, blob, i32::from(git2::FileMode::Blob))
                .map_err(commit_error)?;
        }
    }
    builder.write().map_err(commit_error)
}

/// Clones `remote` (a local path) into `path`, checking out `branch`.
///
/// # Errors
/// When the clone fails.
pub fn clone_for_user(remote: &Path, path: &Path, branch: &str) -> Result<(), SeedError> {
    git2::build::RepoBuilder::new()
        .branch(branch)
        .clone(&remote.display().to_string(), path)
        .map(|_| ())
        .map_err(|source| SeedError::Clone {
            remote: remote.to_owned(),
            path: path.to_owned(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seeded_remote_holds_the_folder_and_its_clone_checks_it_out() {
        let dir = tempfile::tempdir().expect("temp dir");
        let folder = dir.path().join("folder");
        std::fs::create_dir_all(folder.join("clusters")).expect("mkdir");
        std::fs::write(folder.join("capstan.yaml"), "fleet").expect("write");
        std::fs::write(folder.join("clusters/a.yaml"), "a").expect("write");
        let bare = dir.path().join("remote.git");
        let commit = seed_remote(&folder, &bare, "main").expect("seeded");
        assert_eq!(commit.len(), 40);
        let clone = dir.path().join("clone");
        clone_for_user(&bare, &clone, "main").expect("cloned");
        assert_eq!(
            std::fs::read_to_string(clone.join("clusters/a.yaml"))
                .ok()
                .as_deref(),
            Some("a")
        );
    }
}
