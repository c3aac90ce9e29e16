//! A Git repository holding `examples-repo/` on `main`, with a branch per scenario, and an
//! observed-state snapshot in which `main` has converged.

use std::path::{Path, PathBuf};

use capstan::observed::Observed;
use capstan::plan::{self, Policy};
use capstan::spec;

use capstan_testkit::cli::{Run, ScratchRepo, capstan};
pub use capstan_testkit::git;

/// A Wednesday noon: prod's maintenance window (Saturdays 01:00 UTC) is closed.
pub const NOW: &str = "2026-04-29T12:00:00Z";

/// The repository and the snapshot.
pub struct Fleet {
    repo: ScratchRepo,
    snapshot: tempfile::TempDir,
}

impl Fleet {
    /// `examples-repo/` committed on `main`, and `main` converged in the snapshot.
    pub fn new() -> Fleet {
        let repo = ScratchRepo::from_examples();
        repo.remove("observed.example.json");
        git(repo.path(), &["init", "--quiet"]);
        git(repo.path(), &["add", "."]);
        git(repo.path(), &["commit", "--quiet", "-m", "the fleet"]);
        let snapshot = tempfile::tempdir().expect("temp dir");
        let observed = converged(repo.path());
        std::fs::write(
            snapshot.path().join("observed.json"),
            serde_json::to_string_pretty(&observed).expect("snapshot as JSON"),
        )
        .expect("write the snapshot");
        Fleet { repo, snapshot }
    }

    /// The repository folder.
    pub fn path(&self) -> &Path {
        self.repo.path()
    }

    /// Puts a `web` pod (guarded by the PodDisruptionBudget `default/web`, `minAvailable:
    /// 3`) and a `calico-node` DaemonSet pod on each of prod's workers in the snapshot.
    pub fn with_web_pods(&self) -> &Self {
        use capstan::workloads::{DisruptionBudget, IntOrPercent, ObservedPod};
        let path = self.snapshot();
        let text = std::fs::read_to_string(&path).expect("read the snapshot");
        let mut observed: Observed = serde_json::from_str(&text).expect("a snapshot");
        let prod = observed.clusters.get_mut("prod").expect("prod exists");
        let workers: Vec<_> = prod
            .nodes
            .keys()
            .filter(|name| name.as_str().contains("-general-"))
            .cloned()
            .collect();
        assert_eq!(workers.len(), 3, "prod has three workers");
        for (index, node) in workers.into_iter().enumerate() {
            let pod = |namespace: &str, name: String, app: &str, owner: &str| ObservedPod {
                namespace: namespace.to_owned(),
                name,
                labels: [("app".to_owned(), app.to_owned())].into(),
                ready: true,
                owner_kind: Some(owner.to_owned()),
            };
            prod.pods.insert(
                node,
                vec![
                    pod("default", format!("web-{index}"), "web", "ReplicaSet"),
                    pod(
                        "kube-system",
                        format!("calico-node-{index}"),
                        "calico-node",
                        "DaemonSet",
                    ),
                ],
            );
        }
        prod.disruption_budgets.push(DisruptionBudget {
            namespace: "default".to_owned(),
            name: "web".to_owned(),
            match_labels: [("app".to_owned(), "web".to_owned())].into(),
            min_available: Some(IntOrPercent::Count(3)),
            max_unavailable: None,
            current_healthy: None,
            disruptions_allowed: None,
        });
        std::fs::write(
            &path,
            serde_json::to_string_pretty(&observed).expect("snapshot as JSON"),
        )
        .expect("write the snapshot");
        self
    }

    /// Gives every action of `actions` the median `median_ms` in the snapshot, as a daemon
    /// that measured five steps of each would.
    pub fn with_step_durations(&self, actions: &[&str], median_ms: u64) -> &Self {
        let path = self.snapshot();
        let text = std::fs::read_to_string(&path).expect("read the snapshot");
        let mut observed: Observed = serde_json::from_str(&text).expect("a snapshot");
        for action in actions {
            observed.step_durations.insert(
                (*action).to_owned(),
                capstan::observed::StepDuration {
                    median_ms,
                    samples: 5,
                    p90_ms: None,
                },
            );
        }
        std::fs::write(
            &path,
            serde_json::to_string_pretty(&observed).expect("snapshot as JSON"),
        )
        .expect("write the snapshot");
        self
    }

    /// The converged snapshot.
    pub fn snapshot(&self) -> PathBuf {
        self.snapshot.path().join("observed.json")
    }

    /// Makes `branch` from `main` with one edit of `file` (`from` must occur once), committed
    /// with the stock git CLI; the working tree goes back to `main`.
    pub fn branch(&self, branch: &str, file: &str, from: &str, to: &str) -> &Self {
        git(self.path(), &["checkout", "--quiet", "-b", branch, "main"]);
        self.repo.edit(file, from, to);
        git(self.path(), &["commit", "--quiet", "-am", branch]);
        git(self.path(), &["checkout", "--quiet", "main"]);
        self
    }

    /// A branch `branch` off `main` with every edit of `edits` made to `file`.
    pub fn branch_with(&self, branch: &str, file: &str, edits: &[(&str, &str)]) -> &Self {
        git(self.path(), &["checkout", "--quiet", "-b", branch, "main"]);
        for (from, to) in edits {
            self.repo.edit(file, from, to);
        }
        git(self.path(), &["commit", "--quiet", "-am", branch]);
        git(self.path(), &["checkout", "--quiet", "main"]);
        self
    }

    /// `capstan preview` of `head` onto `main`.
    pub fn preview(&self, head: &str, format: &str) -> Run {
        self.preview_with(head, format, &["--now", NOW])
    }

    /// `capstan preview` of `head` onto `main`, with `more` arguments (`--now` among them).
    pub fn preview_with(&self, head: &str, format: &str, more: &[&str]) -> Run {
        let repo = self.path().display().to_string();
        let snapshot = self.snapshot().display().to_string();
        let mut args = vec![
            "preview",
            "--repo",
            &repo,
            "--base",
            "main",
            "--head",
            head,
            "--observed",
            &snapshot,
            "--format",
            format,
        ];
        args.extend_from_slice(more);
        capstan(&args)
    }
}

/// What exists once every predicted step of the repository's plan has run (each step's
/// expected effect, as the planner's simulation applies it).
fn converged(repo: &Path) -> Observed {
    let files = capstan::source::read_repo(repo).expect("read the repository");
    let loaded = spec::load(&files);
    let desired = loaded.desired.expect("examples-repo is valid");
    let now: jiff::Timestamp = NOW.parse().expect("time");
    let mut observed = Observed::nothing();
    for _ in 0..10 {
        let plan = plan::plan(&desired, &observed, &Policy::of(&desired), now);
        let steps: Vec<_> = plan
            .clusters
            .iter()
            .flat_map(|c| c.predicted.clone())
            .collect();
        if steps.is_empty() {
            return observed;
        }
        for step in &steps {
            plan::expected_effect(&mut observed, step, now);
        }
    }
    panic!("examples-repo did not converge in the simulation");
}

/// Where `needle` is in `file` of the repository: `(line, column)`, from 1.
pub fn position(fleet: &Fleet, file: &str, needle: &str) -> (usize, usize) {
    let text = std::fs::read_to_string(fleet.path().join(file)).expect("read");
    text.lines()
        .enumerate()
        .find_map(|(index, line)| line.find(needle).map(|column| (index + 1, column + 1)))
        .expect("needle in file")
}

/// The JSON a run printed.
pub fn json(run: &Run) -> serde_json::Value {
    serde_json::from_str(&run.stdout).unwrap_or_else(|err| {
        panic!(
            "not JSON ({err}):\n{}\n--- stderr\n{}",
            run.stdout, run.stderr
        )
    })
}
