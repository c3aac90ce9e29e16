//! A lab forge whose repository is a bare copy of a [`Fleet`]'s, and `capstan preview
//! --pr` posting to it through the real binary.

use std::path::{Path, PathBuf};

use capstan_lab::forge::{ForgeOptions, SimForge};

use crate::fixture::{Fleet, NOW, git};
use capstan_testkit::cli::Run;

/// The token the lab forge accepts.
pub const TOKEN: &str = "lab-forge-token-0123456789";
/// The forge repository.
pub const OWNER: &str = "acme";
/// The forge repository's name.
pub const NAME: &str = "fleet";

/// A forge API previews are posted to, each served by the lab forge over the same pulls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    /// GitHub Enterprise Server's REST API (`/api/v3`).
    Github,
    /// GitLab's (`/api/v4`): merge requests, notes, commit statuses.
    Gitlab,
}

/// The forges the posting tests run against.
pub const FORGES: [Flavour; 2] = [Flavour::Github, Flavour::Gitlab];

impl Flavour {
    /// `--forge`'s value.
    pub fn name(self) -> &'static str {
        match self {
            Flavour::Github => "github",
            Flavour::Gitlab => "gitlab",
        }
    }

    /// `--forge-url` for `forge`.
    pub fn api(self, forge: &SimForge) -> String {
        match self {
            Flavour::Github => format!("{}/api/v3", forge.http_url()),
            Flavour::Gitlab => format!("{}/api/v4", forge.http_url()),
        }
    }

    /// The status state of a refused change.
    pub fn failure(self) -> &'static str {
        match self {
            Flavour::Github => "failure",
            Flavour::Gitlab => "failed",
        }
    }

    /// The ref the forge keeps at pull request `pr`'s head.
    pub fn head_ref(self, pr: u64) -> String {
        match self {
            Flavour::Github => format!("refs/pull/{pr}/head"),
            Flavour::Gitlab => format!("refs/merge-requests/{pr}/head"),
        }
    }

    /// How many comments (notes) were edited: GitHub's `PATCH`, GitLab's `PUT`.
    pub fn edits(self, forge: &SimForge) -> usize {
        let verb = match self {
            Flavour::Github => "PATCH",
            Flavour::Gitlab => "PUT",
        };
        forge.requests().iter().filter(|r| r.method == verb).count()
    }
}

/// A fleet, its bare remote and a forge serving pull requests on it.
pub struct OnForge {
    /// The fleet (its working repository).
    pub fleet: Fleet,
    /// The forge.
    pub forge: SimForge,
    bare: tempfile::TempDir,
}

impl OnForge {
    /// The lab forge with one pull request, "Scale prod": branch `scale` takes prod's
    /// workers from 3 to 4. Returns the forge, the pull request and its head commit.
    pub async fn scale_pull() -> (OnForge, u64, String) {
        OnForge::with_pull("Scale prod", "scale", "replicas: 3", "replicas: 4").await
    }

    /// The lab forge with one pull request, "Skip a minor": branch `minor` takes prod from
    /// 1.36.2 to 1.38.0, which capstan refuses.
    pub async fn minor_pull() -> (OnForge, u64, String) {
        OnForge::with_pull(
            "Skip a minor",
            "minor",
            "version: 1.36.2",
            "version: 1.38.0",
        )
        .await
    }

    async fn with_pull(title: &str, branch: &str, from: &str, to: &str) -> (OnForge, u64, String) {
        let fleet = Fleet::new();
        fleet.branch(branch, "clusters/prod.yaml", from, to);
        let on = OnForge::start(fleet).await;
        let pr = on.forge.open_pull(title, branch, "main").expect("pull");
        let head = on.forge.pull(pr).expect("pull").head_sha;
        (on, pr, head)
    }

    /// Pushes every branch of `fleet` to a fresh bare repository and serves a forge on it.
    pub async fn start(fleet: Fleet) -> OnForge {
        let bare = tempfile::tempdir().expect("temp dir");
        git(bare.path(), &["init", "--quiet", "--bare"]);
        let bare_path = bare.path().display().to_string();
        git(fleet.path(), &["push", "--quiet", &bare_path, "--all"]);
        let forge = SimForge::start(ForgeOptions {
            owner: OWNER.to_owned(),
            name: NAME.to_owned(),
            token: TOKEN.to_owned(),
            login: "capstan-bot".to_owned(),
            git_dir: bare.path().to_path_buf(),
        })
        .await
        .expect("the forge starts");
        OnForge { fleet, forge, bare }
    }

    /// The bare repository pull requests point into.
    pub fn bare(&self) -> &Path {
        self.bare.path()
    }

    /// Commits an edit of `file` on `branch` of the fleet and pushes it to the bare remote;
    /// returns the new commit.
    pub fn push_edit(&self, branch: &str, file: &str, from: &str, to: &str) -> String {
        let work = self.fleet.path();
        git(work, &["checkout", "--quiet", branch]);
        let path = work.join(file);
        let text = std::fs::read_to_string(&path).expect("read");
        assert_eq!(text.matches(from).count(), 1, "{from} once in {file}");
        std::fs::write(&path, text.replacen(from, to, 1)).expect("write");
        git(work, &["commit", "--quiet", "-am", "an edit"]);
        let head = git(work, &["rev-parse", "HEAD"]);
        git(work, &["checkout", "--quiet", "main"]);
        let bare = self.bare().display().to_string();
        git(work, &["push", "--quiet", "--force", &bare, branch]);
        head
    }

    /// `capstan preview` of `head` onto `main`, read from the bare remote, posted to pull
    /// request `pr` of the forge's GitHub Enterprise API.
    pub async fn post(&self, head: &str, pr: u64) -> Run {
        self.post_as(Flavour::Github, head, pr).await
    }

    /// `capstan preview` of `head` onto `main` posted to pull request `pr` through the
    /// `flavour` API of the forge.
    pub async fn post_as(&self, flavour: Flavour, head: &str, pr: u64) -> Run {
        let api = flavour.api(&self.forge);
        self.post_to(head, pr, (flavour.name(), &api), &[]).await
    }

    /// `capstan preview` of `head` onto `main` posted to pull request `pr` through `api`
    /// (`(flavour, base URL)`), with `env` added to the environment.
    pub async fn post_to(
        &self,
        head: &str,
        pr: u64,
        (kind, api): (&str, &str),
        env: &[(&str, String)],
    ) -> Run {
        let mut args: Vec<String> = [
            "preview",
            "--base",
            "main",
            "--now",
            NOW,
            "--forge",
            kind,
            "--forge-url",
            api,
            "--head",
            head,
        ]
        .iter()
        .map(|a| (*a).to_owned())
        .collect();
        args.extend([
            "--repo".to_owned(),
            self.bare().display().to_string(),
            "--observed".to_owned(),
            self.fleet.snapshot().display().to_string(),
            "--forge-repo".to_owned(),
            format!("{OWNER}/{NAME}"),
            "--pr".to_owned(),
            pr.to_string(),
        ]);
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect();
        tokio::task::spawn_blocking(move || capstan_with_token(&args, &env))
            .await
            .expect("capstan ran")
    }
}

/// Runs the binary with `args`, `env` and the forge token in `CAPSTAN_FORGE_TOKEN`.
pub fn capstan_with_token(args: &[String], env: &[(String, String)]) -> Run {
    Run::of(
        capstan_testkit::cli::command()
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .env("CAPSTAN_FORGE_TOKEN", TOKEN)
            .env("CAPSTAN_LOG", "info"),
    )
}

/// The reference description of GitHub's REST API the forge is judged against.
pub fn reference() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/github-api-subset.json")
}
