//! A preview planned on a thread of its own, within [`Limits`]: when the time is up, the
//! planner is told to stop (it looks at every batch it predicts) and the preview is a refusal
//! that says so. Not pure: this keeps the time that [`super::build_within`] may not read.
//!
//! # Guarantees
//! - Returns a preview in about `limits.time`, whatever the head holds: past it the planner
//!   stops within a batch. A panic while planning is a refusal, not the caller's panic.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

use jiff::Timestamp;

use super::{Limits, Preview, Refusal, RevisionFiles, build_within};
use crate::observed::Observed;
use crate::secrets::Admission;

/// [`super::build_admitted`] within `limits`, on a thread of its own.
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
        refusals: vec![Refusal {
            cluster: None,
            rule: super::PLANNING_LIMITS.to_owned(),
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
