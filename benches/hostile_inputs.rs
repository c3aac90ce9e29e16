//! What a hostile pull request costs before it is refused (issue 34, items 5 and 6): the
//! validation of a cluster file whose `timeZone` is a megabyte long, and previews of windows
//! made costly to search (32 allow and 32 deny windows, at the moment Rome's clocks jump
//! forward) within their `--preview-timeout`. Prints the median wall time of each; nothing is
//! asserted (the tests assert the refusals: `tests/preview/windows.rs`,
//! `crates/core/src/spec/maintenance.rs`).
//!
//! Run: `cargo bench --bench hostile_inputs`.

use std::time::{Duration, Instant};

use capstan::preview::{Limits, RevisionFiles};
use capstan::secrets::Admission;
use capstan::spec::{self, RepoFiles, SourceText};
use capstan::timed_preview::build_limited;
use capstan_testkit::fixtures;

const RUNS: usize = 5;

/// Just after Rome's clocks jump forward (2026-03-29, 02:00 → 03:00 local).
const SPRING_FORWARD: &str = "2026-03-29T01:30:00Z";

const PROD: &str = include_str!("../examples-repo/clusters/prod.yaml");
const WINDOW: &str = "maintenanceWindow: {schedule: \"0 0 1 * * Sat\", duration: 4h}";

fn main() {
    let megabyte_zone = repository(&PROD.replace(
        WINDOW,
        &format!(
            "{WINDOW}\n  maintenance: {{timeZone: Europe/{}}}",
            "R".repeat(1 << 20)
        ),
    ));
    let took = median(|| {
        let loaded = spec::load(&megabyte_zone);
        assert!(loaded.diagnostics.has_errors());
    });
    println!("validation of a 1 MB timeZone: {}", millis(took));

    let base = revision("main", repository(PROD));
    let observed = fixtures::built(
        spec::load(&base.files)
            .desired
            .as_ref()
            .expect("examples-repo is valid"),
    );
    let now = SPRING_FORWARD.parse().expect("a time");
    for (schedule, timeout) in [
        ("* * * * * *", Duration::from_secs(2)),
        ("0 * * * * *", Duration::from_millis(50)),
        ("0 * * * * *", Duration::MAX),
    ] {
        let head = revision("head", repository(&many_windows(schedule)));
        let limits = Limits {
            time: timeout,
            ..Limits::default()
        };
        let mut summary = String::new();
        let took = median(|| {
            let preview = build_limited(
                &base,
                &head,
                &observed,
                now,
                &Admission::against_base(),
                &limits,
            );
            summary = preview.summary;
        });
        let timeout = if timeout == Duration::MAX {
            "no timeout".to_owned()
        } else {
            format!("--preview-timeout {}", millis(timeout))
        };
        let summary: String = summary.chars().take(90).collect();
        println!(
            "preview of 32 + 32 windows `{schedule}` at a spring-forward, {timeout}: {} ({summary}…)",
            millis(took)
        );
    }
}

/// prod with 32 allow and 32 deny windows opening on `schedule` in Rome, its workers on a new
/// template.
fn many_windows(schedule: &str) -> String {
    let windows = |kind: &str| {
        let one = format!("{{schedule: \"{schedule}\", duration: 1m}}");
        format!("    {kind}: [{}]\n", vec![one; 32].join(", "))
    };
    PROD.replace(
        WINDOW,
        &format!(
            "# {WINDOW}\n  maintenance:\n    timeZone: Europe/Rome\n{}{}",
            windows("allow"),
            windows("deny")
        ),
    )
    .replace(
        "template: debian13-k8s, cores: 4",
        "template: debian13-k8s-v2, cores: 4",
    )
}

/// The example fleet with `prod` as given.
fn repository(prod: &str) -> RepoFiles {
    let file = |path: &str, text: &str| SourceText {
        path: path.to_owned(),
        text: text.to_owned(),
    };
    RepoFiles {
        fleet: file(
            "capstan.yaml",
            include_str!("../examples-repo/capstan.yaml"),
        ),
        clusters: vec![
            file(
                "clusters/platform.yaml",
                include_str!("../examples-repo/clusters/platform.yaml"),
            ),
            file("clusters/prod.yaml", prod),
        ],
    }
}

fn revision(name: &str, files: RepoFiles) -> RevisionFiles {
    RevisionFiles {
        revision: format!("{name}@sha1:0"),
        files,
    }
}

/// The median wall time of [`RUNS`] runs of `work`.
fn median(mut work: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let started = Instant::now();
            work();
            started.elapsed()
        })
        .collect();
    times.sort();
    times[RUNS / 2]
}

fn millis(duration: Duration) -> String {
    format!("{:.1} ms", duration.as_secs_f64() * 1000.0)
}
