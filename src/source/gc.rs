//! Garbage collection of a bare mirror with libgit2 alone (the image has no `git`): once old
//! packs or loose objects pile up (each fetch adds a pack; force-pushes and deleted pull
//! requests leave objects no ref reaches), everything reachable from the refs is written into
//! one new pack, made durable, and only then are the packs and loose objects it supersedes
//! removed.
//!
//! # Guarantees
//! - Write new first, delete old last: a crash at any point leaves a readable mirror (before
//!   the new pack is whole, the old files are all there; after, the new pack holds every
//!   object a ref reaches, and an old pack's index is removed before its pack, so no index
//!   ever names a missing pack).
//! - Only files older than the grace period are counted or removed: a fetch running beside
//!   the collection (a preview's, into the same mirror) writes its pack before it moves its
//!   ref, and that pack is younger than the grace.
//! - A mirror with no ref is left alone, and any failure before the new pack is durable
//!   removes nothing.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// When a mirror is collected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcPolicy {
    /// Collect when more packs than this are older than `grace`.
    pub max_packs: usize,
    /// Collect when more loose objects than this are older than `grace`.
    pub max_loose_objects: usize,
    /// Files younger than this are neither counted nor removed.
    pub grace: Duration,
}

impl Default for GcPolicy {
    /// Twenty packs (twenty fetches that moved the tip: lookups stay quick, and a collection
    /// of a fleet repository takes milliseconds), a thousand loose objects, and an hour of
    /// grace (far longer than any fetch).
    fn default() -> Self {
        GcPolicy {
            max_packs: 20,
            max_loose_objects: 1000,
            grace: Duration::from_secs(60 * 60),
        }
    }
}

/// Collecting a mirror failed; nothing it held was removed unless said.
#[derive(Debug, thiserror::Error)]
pub enum GcError {
    /// The mirror's object folders could not be listed.
    #[error("cannot list {path}")]
    List {
        /// The folder.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The objects the refs reach could not be gathered or packed.
    #[error("cannot pack the objects the refs of {path} reach")]
    Pack {
        /// The mirror.
        path: PathBuf,
        /// What libgit2 said (about the local object database: no credential in it).
        #[source]
        source: git2::Error,
    },
    /// The new pack could not be made durable.
    #[error("cannot sync {path}")]
    Sync {
        /// The file or folder.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// A superseded file could not be removed (the new pack is durable: the mirror is whole).
    #[error("cannot remove the superseded {path}")]
    Remove {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The collected mirror could not be opened again (it is whole on disk; the next use
    /// opens it).
    #[error("cannot reopen the collected {path}")]
    Reopen {
        /// The mirror.
        path: PathBuf,
        /// What libgit2 said (about the local repository: no credential in it).
        #[source]
        source: git2::Error,
    },
}

/// What a collection did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Collected {
    /// Objects in the new pack.
    pub objects: usize,
    /// Packs removed.
    pub packs_removed: usize,
    /// Loose objects removed.
    pub loose_removed: usize,
}

/// The files a collection may supersede: those older than the grace.
#[derive(Debug, Default)]
pub(crate) struct Superseded {
    /// Each pack's index (`.idx`), whose `.pack` (and other companions) go with it.
    packs: Vec<PathBuf>,
    /// A `.pack` without an index: what an interrupted write or removal leaves.
    orphans: Vec<PathBuf>,
    loose: Vec<PathBuf>,
}

impl Superseded {
    fn is_due(&self, policy: &GcPolicy) -> bool {
        self.packs.len() > policy.max_packs || self.loose.len() > policy.max_loose_objects
    }
}

/// Collects the bare repository `repo` (at `path`) when `policy` says it is due and then
/// opens it afresh, since libgit2 would otherwise keep looking in the packs removed; `None`
/// when it was not due.
///
/// # Errors
/// As [`collect_if_due`], and [`GcError::Reopen`].
pub fn collect_and_reopen(
    repo: &mut git2::Repository,
    path: &Path,
    policy: &GcPolicy,
) -> Result<Option<Collected>, GcError> {
    let collected = collect_if_due(repo, path, policy)?;
    if collected.is_some() {
        *repo = git2::Repository::open_bare(path).map_err(|source| GcError::Reopen {
            path: path.to_owned(),
            source,
        })?;
    }
    Ok(collected)
}

/// Collects the mirror `repo` (at `path`) when `policy` says it is due; `None` when not.
///
/// # Errors
/// When the mirror cannot be listed or packed (nothing removed), or a superseded file
/// cannot be removed (the mirror is whole; the next collection tries again).
pub fn collect_if_due(
    repo: &git2::Repository,
    path: &Path,
    policy: &GcPolicy,
) -> Result<Option<Collected>, GcError> {
    let old = superseded(path, policy.grace, SystemTime::now())?;
    if !old.is_due(policy) {
        return Ok(None);
    }
    let Some((name, objects)) = write_pack(repo, path)? else {
        return Ok(None);
    };
    let (packs_removed, loose_removed) = remove(&old, &name)?;
    tracing::info!(
        mirror = %path.display(),
        objects,
        packs_removed,
        loose_removed,
        "git mirror collected"
    );
    Ok(Some(Collected {
        objects,
        packs_removed,
        loose_removed,
    }))
}

/// The packs and loose objects of the mirror at `path` last modified before `now - grace`.
pub(crate) fn superseded(
    path: &Path,
    grace: Duration,
    now: SystemTime,
) -> Result<Superseded, GcError> {
    let objects = path.join("objects");
    let is_old = |entry: &std::fs::DirEntry| {
        entry
            .metadata()
            .and_then(|meta| meta.modified())
            .is_ok_and(|modified| now.duration_since(modified).is_ok_and(|age| age >= grace))
    };
    let mut found = Superseded::default();
    for entry in list(&objects)? {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        // Loose objects live in `objects/<2 hex>/<38 hex>`.
        if name.len() == 2 && name.chars().all(|c| c.is_ascii_hexdigit()) {
            let folder = entry.path();
            found.loose.extend(
                list(&folder)?
                    .iter()
                    .filter(|e| is_old(e))
                    .map(|e| e.path()),
            );
        }
    }
    let packs = objects.join("pack");
    if packs.is_dir() {
        for entry in list(&packs)?.iter().filter(|e| is_old(e)) {
            let file = entry.path();
            match file.extension().and_then(|e| e.to_str()) {
                Some("idx") => found.packs.push(file),
                Some("pack") if !file.with_extension("idx").exists() => found.orphans.push(file),
                _ => {}
            }
        }
    }
    Ok(found)
}

fn list(folder: &Path) -> Result<Vec<std::fs::DirEntry>, GcError> {
    let error = |source| GcError::List {
        path: folder.to_owned(),
        source,
    };
    std::fs::read_dir(folder)
        .map_err(error)?
        .map(|entry| entry.map_err(error))
        .collect()
}

/// Writes one pack of every object the refs reach into the mirror's pack folder and syncs it
/// (files, then folder); returns its name (`pack-<name>.pack`) and object count, or `None`
/// when no ref points anywhere.
pub(crate) fn write_pack(
    repo: &git2::Repository,
    path: &Path,
) -> Result<Option<(String, usize)>, GcError> {
    let pack_error = |source| GcError::Pack {
        path: path.to_owned(),
        source,
    };
    let mut builder = repo.packbuilder().map_err(pack_error)?;
    let mut walk = repo.revwalk().map_err(pack_error)?;
    let mut tips = 0_usize;
    for reference in repo.references().map_err(pack_error)? {
        let reference = reference.map_err(pack_error)?;
        let Some(target) = reference.resolve().map_err(pack_error)?.target() else {
            continue;
        };
        // A ref to a commit brings its history; any other object (a tag, a tree) itself and
        // what it holds.
        match repo.find_commit(target) {
            Ok(_) => walk.push(target).map_err(pack_error)?,
            Err(_) => builder.insert_recursive(target, None).map_err(pack_error)?,
        }
        tips += 1;
    }
    if tips == 0 {
        return Ok(None);
    }
    builder.insert_walk(&mut walk).map_err(pack_error)?;
    let packs = path.join("objects").join("pack");
    builder.write(&packs, 0).map_err(pack_error)?;
    let name = builder
        .name()
        .map_err(pack_error)?
        .map(str::to_owned)
        .ok_or_else(|| pack_error(git2::Error::from_str("the new pack has no name")))?;
    for file in [
        packs.join(format!("pack-{name}.pack")),
        packs.join(format!("pack-{name}.idx")),
        packs.clone(),
    ] {
        sync(&file)?;
    }
    Ok(Some((name, builder.object_count())))
}

fn sync(path: &Path) -> Result<(), GcError> {
    std::fs::File::open(path)
        .and_then(|file| file.sync_all())
        .map_err(|source| GcError::Sync {
            path: path.to_owned(),
            source,
        })
}

/// Removes `old` but the pack called `kept` (a collection of a mirror already in one pack
/// writes that same pack again): each index before its pack.
pub(crate) fn remove(old: &Superseded, kept: &str) -> Result<(usize, usize), GcError> {
    let kept_index = format!("pack-{kept}.idx");
    let mut packs = 0;
    for index in &old.packs {
        if index
            .file_name()
            .is_some_and(|name| name == kept_index.as_str())
        {
            continue;
        }
        remove_file(index)?;
        for companion in ["pack", "rev", "mtimes", "keep"] {
            remove_file(&index.with_extension(companion))?;
        }
        packs += 1;
    }
    for orphan in &old.orphans {
        remove_file(orphan)?;
    }
    for object in &old.loose {
        remove_file(object)?;
    }
    Ok((packs, old.loose.len()))
}

/// Removes `path`; one already gone is no failure.
fn remove_file(path: &Path) -> Result<(), GcError> {
    match std::fs::remove_file(path) {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(GcError::Remove {
            path: path.to_owned(),
            source: err,
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests;
