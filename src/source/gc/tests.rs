use std::sync::Arc;

use super::*;
use crate::source::{GitCredentials, GitOptions, GitSource, Limits, Redactor, SourceMetrics};

/// Objects of one round's commit: the commit, its tree, capstan.yaml and the fillers.
const FILLERS: usize = 20;
const PER_ROUND: usize = 3 + FILLERS;

/// A remote whose `main` is replaced by a commit of unrelated history each round (what a
/// force-push of a rewritten repository does).
struct Remote {
    dir: tempfile::TempDir,
    repo: git2::Repository,
}

impl Remote {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let repo = git2::Repository::init_bare(dir.path().join("fleet.git")).expect("bare repo");
        Remote { dir, repo }
    }

    fn url(&self) -> String {
        format!("file://{}", self.dir.path().join("fleet.git").display())
    }

    /// Force-pushes a root commit of `round`'s own files.
    fn force_push_round(&self, round: usize) {
        self.push_round(round, false);
    }

    /// Pushes a commit of `round`'s own files: a root commit, or on top of the tip.
    fn push_round(&self, round: usize, on_tip: bool) {
        let mut tree = self.repo.treebuilder(None).expect("tree builder");
        let text = format!("# round {round}\n");
        let yaml = self.repo.blob(text.as_bytes()).expect("blob");
        tree.insert("capstan.yaml", yaml, 0o100_644)
            .expect("insert");
        for filler in 0..FILLERS {
            let blob = self
                .repo
                .blob(format!("round {round}, filler {filler}\n").as_bytes())
                .expect("blob");
            tree.insert(format!("filler-{filler}.txt"), blob, 0o100_644)
                .expect("insert");
        }
        let tree = self
            .repo
            .find_tree(tree.write().expect("tree"))
            .expect("tree");
        let who = git2::Signature::now("test", "test@example.invalid").expect("signature");
        let parent = on_tip.then(|| {
            self.repo
                .find_reference("refs/heads/main")
                .and_then(|r| r.peel_to_commit())
                .expect("a tip")
        });
        let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
        let commit = self
            .repo
            .commit(None, &who, &who, &format!("round {round}"), &tree, &parents)
            .expect("commit");
        self.repo
            .reference("refs/heads/main", commit, true, "force-push")
            .expect("force-push");
    }
}

fn follow(remote: &Remote, mirrors: &Path, policy: GcPolicy) -> GitSource {
    let options = GitOptions {
        url: remote.url(),
        branch: "main".to_owned(),
        path: None,
        mirror_root: mirrors.to_owned(),
        credentials: GitCredentials::default(),
        limits: Limits::default(),
    };
    GitSource::open(
        options,
        Redactor::default(),
        Arc::new(SourceMetrics::default()),
    )
    .expect("mirror")
    .with_gc(policy)
}

/// Every object the mirror's object database holds (an object in two packs counts twice).
fn objects(source: &GitSource) -> usize {
    let repo = git2::Repository::open_bare(source.mirror_path()).expect("mirror");
    let mut count = 0;
    repo.odb()
        .expect("odb")
        .foreach(|_| {
            count += 1;
            true
        })
        .expect("objects");
    count
}

/// Polls, then reads the tip's capstan.yaml.
fn poll_and_read(source: &mut GitSource) -> String {
    let revision = source.poll().expect("poll").revision().clone();
    source.read(&revision).expect("read").files.fleet.text
}

/// The mirror's pack indexes.
fn indexes(path: &Path) -> usize {
    std::fs::read_dir(path.join("objects/pack"))
        .expect("pack folder")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "idx"))
        })
        .count()
}

const NO_COLLECTION: GcPolicy = GcPolicy {
    max_packs: usize::MAX,
    max_loose_objects: usize::MAX,
    grace: Duration::ZERO,
};

#[test]
fn force_pushes_of_unrelated_history_leave_a_bounded_mirror_whose_tip_reads() {
    let remote = Remote::new();
    let mirrors = tempfile::tempdir().expect("temp dir");
    let policy = GcPolicy {
        max_packs: 3,
        max_loose_objects: 10,
        grace: Duration::ZERO,
    };
    let mut source = follow(&remote, mirrors.path(), policy);
    let uncollected = tempfile::tempdir().expect("temp dir");
    let mut kept = follow(&remote, uncollected.path(), NO_COLLECTION);
    let rounds = 30;
    for round in 0..rounds {
        remote.force_push_round(round);
        assert_eq!(poll_and_read(&mut source), format!("# round {round}\n"));
        poll_and_read(&mut kept);
        // At most the old packs under the bound, the collected pack, and the new fetch's.
        assert!(
            objects(&source) <= (policy.max_packs + 2) * PER_ROUND,
            "round {round}: {} objects",
            objects(&source)
        );
    }
    assert_eq!(
        objects(&kept),
        rounds * PER_ROUND,
        "nothing is shed without collection"
    );
    // A daemon restarted on the collected mirror reads the tip from it.
    let reopened = follow(&remote, mirrors.path(), policy);
    let tip = reopened.mirrored_tip().expect("the mirrored tip");
    let files = reopened.read(&tip).expect("read");
    assert_eq!(files.files.fleet.text, format!("# round {}\n", rounds - 1));
}

#[test]
fn a_collection_interrupted_between_write_and_delete_leaves_a_readable_mirror() {
    let remote = Remote::new();
    let mirrors = tempfile::tempdir().expect("temp dir");
    let mut source = follow(&remote, mirrors.path(), NO_COLLECTION);
    for round in 0..6 {
        // The last push builds on the one before: what the refs reach spans two packs.
        remote.push_round(round, round == 5);
        poll_and_read(&mut source);
    }
    let path = source.mirror_path().to_owned();
    let before = objects(&source);

    // The new pack is written, durable, and then the process dies: nothing was removed.
    let old = superseded(&path, Duration::ZERO, SystemTime::now()).expect("list");
    let repo = git2::Repository::open_bare(&path).expect("mirror");
    let (_, packed) = write_pack(&repo, &path).expect("pack").expect("refs");
    assert_eq!(packed, 2 * PER_ROUND, "only what the refs reach");
    let reopened = follow(&remote, mirrors.path(), NO_COLLECTION);
    let tip = reopened.mirrored_tip().expect("tip");
    assert_eq!(
        reopened.read(&tip).expect("read").files.fleet.text,
        "# round 5\n"
    );
    assert_eq!(
        indexes(&path),
        old.packs.len() + 1,
        "the old packs are all kept"
    );
    assert_eq!(objects(&reopened), before + 2 * PER_ROUND);

    // Dies again halfway through the removal: an index gone, its pack left behind.
    let first = old.packs.first().expect("an old pack");
    std::fs::remove_file(first).expect("remove an index");
    let reopened = follow(&remote, mirrors.path(), NO_COLLECTION);
    assert_eq!(
        reopened.read(&tip).expect("read").files.fleet.text,
        "# round 5\n"
    );

    // The next collection finishes the job, orphan included.
    let policy = GcPolicy {
        max_packs: 0,
        ..NO_COLLECTION
    };
    let collected = collect_if_due(&repo, &path, &policy)
        .expect("collect")
        .expect("due");
    assert_eq!(collected.objects, 2 * PER_ROUND);
    assert!(
        !first.with_extension("pack").exists(),
        "the orphan pack is removed"
    );
    let reopened = follow(&remote, mirrors.path(), NO_COLLECTION);
    assert_eq!(objects(&reopened), 2 * PER_ROUND);
    assert_eq!(
        reopened.read(&tip).expect("read").files.fleet.text,
        "# round 5\n"
    );
    assert_eq!(indexes(&path), 1);
}

#[test]
fn files_younger_than_the_grace_are_neither_counted_nor_removed() {
    let remote = Remote::new();
    let mirrors = tempfile::tempdir().expect("temp dir");
    let mut source = follow(&remote, mirrors.path(), NO_COLLECTION);
    for round in 0..3 {
        remote.force_push_round(round);
        poll_and_read(&mut source);
    }
    let path = source.mirror_path();
    let young = superseded(path, Duration::from_secs(3600), SystemTime::now()).expect("list");
    assert!(young.packs.is_empty() && young.loose.is_empty());
    let policy = GcPolicy {
        max_packs: 0,
        max_loose_objects: 0,
        grace: Duration::from_secs(3600),
    };
    let repo = git2::Repository::open_bare(path).expect("mirror");
    assert_eq!(collect_if_due(&repo, path, &policy).expect("collect"), None);
    assert_eq!(objects(&source), 3 * PER_ROUND);
}
