//! Git for the tests, with the stock `git` CLI: one `git` runner, a look inside a bare
//! repository, and a [`Remote`] (a bare repository the servers serve and a clone to change it
//! from: commit, push, force-push).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use capstan::source::{GitCredentials, GitOptions, GitSource, Limits, Redactor, SourceMetrics};

/// Runs `git` in `dir` as the test's author (with `main` the default branch and `file://`
/// submodules allowed); its trimmed stdout. Fails the test when git fails.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .args([
            "-c",
            "user.name=Test",
            "-c",
            "user.email=test@example.com",
            "-c",
            "init.defaultBranch=main",
            "-c",
            "protocol.file.allow=always",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(
        output.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// A repository for `capstan preview`: `capstan.yaml` copied from `fleet_from`, branch `main`
/// holding `clusters/<cluster>.yaml` as `base`, and branch `head` (checked out) changing it to
/// `changed`.
pub fn preview_repo(
    fleet_from: &Path,
    cluster: &str,
    base: &str,
    head: &str,
    changed: &str,
) -> tempfile::TempDir {
    let repo = tempfile::tempdir().expect("repo");
    std::fs::create_dir_all(repo.path().join("clusters")).expect("clusters dir");
    std::fs::copy(
        fleet_from.join("capstan.yaml"),
        repo.path().join("capstan.yaml"),
    )
    .expect("copy capstan.yaml");
    let file = repo.path().join(format!("clusters/{cluster}.yaml"));
    std::fs::write(&file, base).expect("write the base");
    git(repo.path(), &["init", "--quiet"]);
    git(repo.path(), &["add", "."]);
    git(repo.path(), &["commit", "--quiet", "-m", "base"]);
    git(repo.path(), &["checkout", "--quiet", "-b", head]);
    std::fs::write(&file, changed).expect("write the change");
    git(repo.path(), &["commit", "--quiet", "-am", head]);
    repo
}

/// `git` in the bare repository `bare`, or `None` when it fails (e.g. no such branch).
pub fn bare_git(bare: &Path, args: &[&str]) -> Option<String> {
    let output = Command::new("git")
        .arg("--git-dir")
        .arg(bare)
        .args(args)
        .output()
        .expect("git runs");
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// A bare repository `fleet.git` under [`Remote::root`] and a clone to change it from.
pub struct Remote {
    dir: tempfile::TempDir,
}

impl Default for Remote {
    fn default() -> Self {
        Remote::new()
    }
}

impl Remote {
    /// A remote whose first commit holds `capstan.yaml` ([`crate::fleet::FleetYaml::new`]) and
    /// `clusters/`.
    pub fn new() -> Remote {
        Remote::with_fleet(&crate::fleet::FleetYaml::new().render())
    }

    /// A remote whose first commit holds `fleet` as `capstan.yaml`, and `clusters/`.
    pub fn with_fleet(fleet: &str) -> Remote {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("srv");
        std::fs::create_dir_all(&root).expect("srv");
        git(&root, &["init", "-q", "--bare", "-b", "main", "fleet.git"]);
        git(
            dir.path(),
            &[
                "clone",
                "-q",
                root.join("fleet.git").to_str().expect("path"),
                "work",
            ],
        );
        let remote = Remote { dir };
        remote.write("capstan.yaml", fleet);
        remote.write("clusters/README.md", "one file per cluster\n");
        remote.commit_and_push("first commit");
        remote
    }

    /// The folder the servers serve (holding `fleet.git`).
    pub fn root(&self) -> PathBuf {
        self.dir.path().join("srv")
    }

    /// The bare repository.
    pub fn bare(&self) -> PathBuf {
        self.root().join("fleet.git")
    }

    /// The bare repository as a `file://` URL.
    pub fn file_url(&self) -> String {
        format!("file://{}", self.bare().display())
    }

    /// The working clone.
    pub fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    /// The clone's `HEAD`.
    pub fn head(&self) -> String {
        git(&self.work(), &["rev-parse", "HEAD"])
    }

    /// Writes a file in the clone.
    pub fn write(&self, path: &str, text: &str) {
        let path = self.work().join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }

    /// Commits everything and pushes to `main`; returns the commit id.
    pub fn commit_and_push(&self, message: &str) -> String {
        let work = self.work();
        git(&work, &["add", "-A"]);
        git(&work, &["commit", "-q", "--allow-empty", "-m", message]);
        git(&work, &["push", "-q", "origin", "HEAD:main"]);
        self.head()
    }

    /// Pushes the clone's HEAD to `branch` too; returns the commit id.
    pub fn push_to(&self, branch: &str) -> String {
        let work = self.work();
        git(&work, &["push", "-q", "origin", &format!("HEAD:{branch}")]);
        self.head()
    }

    /// Rewrites the last commit and force-pushes it; returns the new commit id.
    pub fn amend_and_force_push(&self, message: &str) -> String {
        let work = self.work();
        git(&work, &["add", "-A"]);
        git(
            &work,
            &["commit", "-q", "--amend", "--allow-empty", "-m", message],
        );
        git(&work, &["push", "-q", "--force", "origin", "HEAD:main"]);
        self.head()
    }

    /// Options to follow `url`'s `main`, mirrors under a temporary folder of this remote.
    pub fn options(&self, url: &str, credentials: GitCredentials) -> GitOptions {
        GitOptions {
            url: url.to_owned(),
            branch: "main".to_owned(),
            path: None,
            mirror_root: self.dir.path().join("mirrors"),
            credentials,
            limits: Limits::default(),
        }
    }
}

/// A source following `options`, with its own counters and redactor.
pub fn open(options: GitOptions) -> (GitSource, Arc<SourceMetrics>) {
    let metrics = Arc::new(SourceMetrics::default());
    let source =
        GitSource::open(options, Redactor::default(), Arc::clone(&metrics)).expect("mirror opens");
    (source, metrics)
}
