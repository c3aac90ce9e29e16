//! A preview planned on a thread of its own, within [`Limits`]: when the time is up, the
//! planner is told to stop (it looks at every batch it predicts) and the preview is a refusal
//! that says so. The daemon's side of [`capstan_core::preview`] (`capstan preview` and
//! `run --previews` both use it): this keeps the time that [`build_within`] may not read.
//!
//! # Guarantees
//! - Returns a preview in about `limits.time`, whatever the head holds: past it the planner
//!   stops within a batch. A panic while planning is a refusal, not the caller's panic.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

use jiff::Timestamp;

use crate::observed::Observed;
use crate::preview::{Limits, PLANNING_LIMITS, Preview, Refusal, RevisionFiles, build_within};
use crate::secrets::Admission;

/// [`crate::preview::build`] within `limits`, on a thread of its own.
pub fn build_limited(
    base: &RevisionFiles,
    head: &RevisionFiles,
    observed: &Observed,
    now: Timestamp,
    admission: &Admission,
    limits: &Limits,
) -> Preview {
    let stop = AtomicBool::new(false);
    let stop = &stop;
    std::thread::scope(|scope| {
        let (done, finished) = mpsc::channel();
        let planning = scope.spawn(move || {
            let preview = build_within(base, head, observed, now, admission, limits, stop);
            // The caller may have stopped waiting: nobody to tell then.
            let _ = done.send(());
            preview
        });
        if finished.recv_timeout(limits.time).is_err() {
            // Past the time (or the thread is gone): the planner stops at its next batch.
            stop.store(true, Ordering::Relaxed);
        }
        planning.join().unwrap_or_else(|_| failed(base, head, now))
    })
}

/// The refusal of a change whose planning panicked.
fn failed(base: &RevisionFiles, head: &RevisionFiles, now: Timestamp) -> Preview {
    let message = "planning this change failed (see capstan's log): refused".to_owned();
    Preview {
        base: base.revision.clone(),
        head: head.revision.clone(),
        now,
        summary: format!("refused: {message}"),
        stages: Vec::new(),
        refusals: vec![Refusal {
            cluster: None,
            rule: PLANNING_LIMITS.to_owned(),
            location: None,
            field: None,
            message,
            fix: None,
            on_base: false,
        }],
        fleet_diff: String::new(),
        clusters: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{RepoFiles, SourceText};

    /// The example repository, with `prod`'s workers set to `workers`, as a revision.
    fn example_revision(revision: &str, workers: u32) -> RevisionFiles {
        let file = |path: &str, text: &str| SourceText {
            path: path.to_owned(),
            text: text.to_owned(),
        };
        let prod = include_str!("../examples-repo/clusters/prod.yaml").replacen(
            "      replicas: 3",
            &format!("      replicas: {workers}"),
            1,
        );
        RevisionFiles {
            revision: revision.to_owned(),
            files: RepoFiles {
                fleet: file(
                    "capstan.yaml",
                    include_str!("../examples-repo/capstan.yaml"),
                ),
                clusters: vec![
                    file(
                        "clusters/platform.yaml",
                        include_str!("../examples-repo/clusters/platform.yaml"),
                    ),
                    file("clusters/prod.yaml", &prod),
                ],
            },
        }
    }

    #[test]
    fn a_preview_within_its_limits_on_its_own_thread_is_the_preview() {
        let base = example_revision("main@sha1:1", 3);
        let head = example_revision("more@sha1:2", 5);
        let observed = Observed::nothing();
        let now = Timestamp::UNIX_EPOCH;
        let admission = Admission::against_base();
        let limited = build_limited(&base, &head, &observed, now, &admission, &Limits::default());
        let direct = crate::preview::build(&base, &head, &observed, now, &admission);
        assert_eq!(
            serde_json::to_value(&limited).expect("json"),
            serde_json::to_value(&direct).expect("json")
        );
    }
}
