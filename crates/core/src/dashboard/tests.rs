use std::collections::BTreeMap;

use jiff::Timestamp;

use super::*;
use crate::model::{NodeName, Role};
use crate::observed::StepDuration;
use crate::plan::ActionKind;
use crate::status::{ClusterStatus, Condition, NodeStatus, WaitingOn};

const HOSTILE: &str = "<script>alert(1)</script>\"'&";

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + seconds).expect("a valid time")
}

fn cluster(phase: Phase) -> ClusterStatus {
    ClusterStatus {
        phase,
        conditions: vec![Condition {
            kind: conditions_blocked(),
            status: "True".to_owned(),
            reason: "StepFailing".to_owned(),
            message: format!("join-node keeps failing: {HOSTILE}"),
            last_transition_time: at(0),
        }],
        version: None,
        certificate_expiry: None,
        kubeconfig_fingerprint: None,
        flux_kubeconfig_fingerprint: None,
        nodes: vec![NodeStatus {
            name: NodeName::from("prod-w-1"),
            role: Role::Worker,
            pool: "workers".to_owned(),
            vm_id: 101,
            proxmox_node: "pve1".to_owned(),
            ready: Some(true),
            version: None,
            cordoned: false,
        }],
        declared_nodes: Some(4),
        refusals: Vec::new(),
        waiting_on: vec![WaitingOn {
            step: Some(ActionKind::JoinNode),
            resource: format!("node {HOSTILE} to become Ready"),
            since: Some(at(10)),
        }],
        next_steps: Vec::new(),
        last_step: None,
        suspended: Vec::new(),
        converged: None,
    }
}

fn conditions_blocked() -> String {
    crate::status::conditions::BLOCKED.to_owned()
}

fn fleet(name: &str, phase: Phase) -> FleetStatus {
    FleetStatus {
        revision: Some(format!("main@sha1:{}", "a".repeat(40))),
        clusters: BTreeMap::from([(name.to_owned(), cluster(phase))]),
        repository_errors: vec![format!("clusters/x.yaml: {HOSTILE}")],
        ..FleetStatus::default()
    }
}

fn view<'a>(status: &'a FleetStatus, history: &'a StepHistory) -> View<'a> {
    View {
        status,
        observed: None,
        plan: None,
        desired: None,
        history,
        links: None,
        previews: &[],
        generation: 7,
        now: at(600),
    }
}

#[test]
fn a_hostile_cluster_name_and_error_are_escaped_on_both_pages() {
    let status = fleet(HOSTILE, Phase::Blocked);
    let history = StepHistory::default();
    let fleet = fleet_page(&view(&status, &history));
    let cluster = cluster_page(&view(&status, &history), HOSTILE).expect("the cluster is known");
    for page in [&fleet, &cluster] {
        assert!(!page.contains("<script>alert"), "raw markup in:\n{page}");
        assert!(!page.contains("\"'&"), "unescaped quotes in:\n{page}");
        assert!(
            page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{page}"
        );
    }
}

#[test]
fn every_phase_has_a_word_and_a_symbol_on_the_card() {
    let history = StepHistory::default();
    for phase in [
        Phase::Pending,
        Phase::Provisioning,
        Phase::Ready,
        Phase::Updating,
        Phase::Blocked,
        Phase::Deleting,
    ] {
        let (symbol, word) = phase_label(phase);
        assert_eq!(word, phase.to_string(), "the word is the phase's name");
        assert!(!symbol.is_empty());
        let status = fleet("prod", phase);
        let page = fleet_page(&view(&status, &history));
        assert!(
            page.contains(&format!(
                "<span aria-hidden=\"true\">{symbol}</span> {word}"
            )),
            "{phase} is said in words on its card:\n{page}"
        );
    }
}

#[test]
fn an_unknown_cluster_is_the_not_found_page() {
    let status = fleet("prod", Phase::Ready);
    let history = StepHistory::default();
    let page = cluster_page(&view(&status, &history), "../etc/passwd").expect_err("unknown");
    assert!(page.contains("<h1>Not found</h1>"), "{page}");
    assert!(!page.contains("passwd"), "the path is not echoed:\n{page}");
}

#[test]
fn the_timeline_table_lists_each_step_with_its_duration_and_result() {
    let status = fleet("prod", Phase::Updating);
    let mut history = StepHistory::default();
    let machine = || Some(NodeName::from("prod-w-4"));
    let rev = "main@sha1:b";
    let create = history.started("prod", ActionKind::CreateMachine, machine(), rev, at(0));
    history.ended("prod", create, Outcome::Succeeded, at(42));
    let prepare = history.started("prod", ActionKind::PrepareNode, machine(), rev, at(42));
    history.ended(
        "prod",
        prepare,
        Outcome::Failed(format!("{HOSTILE} exit 1")),
        at(47),
    );
    let again = history.started("prod", ActionKind::PrepareNode, machine(), rev, at(50));
    history.ended("prod", again, Outcome::Succeeded, at(230));
    history.started("prod", ActionKind::JoinNode, machine(), rev, at(230));
    let page = cluster_page(&view(&status, &history), "prod").expect("known");
    let table = page
        .split("<table class=\"steps\">")
        .nth(1)
        .and_then(|rest| rest.split("</table>").next())
        .expect("the timeline's table");
    let rows: Vec<&str> = table.split("<tr data-action=").skip(1).collect();
    assert_eq!(rows.len(), 4, "{table}");
    placed_by_the_stylesheet_alone(&page);
    let expect = [
        ("create-machine", "42 s", "✓ succeeded"),
        ("prepare-node", "5 s", "✕ failed: &lt;script&gt;"),
        ("prepare-node", "3 min 00 s", "✓ succeeded"),
        ("join-node", "6 min 10 s so far", "▶ running"),
    ];
    for (row, (action, took, result)) in rows.iter().zip(expect) {
        assert!(row.starts_with(&format!("\"{action}\"")), "{row}");
        assert!(
            row.contains(&format!("<td class=\"duration\">{took}</td>")),
            "{action} took {took}: {row}"
        );
        assert!(row.contains(result), "{action} {result}: {row}");
    }
}

#[test]
fn commit_links_are_made_for_known_forges_only_and_never_carry_credentials() {
    let sha = "0123456789abcdef0123456789abcdef01234567";
    let revision = format!("main@sha1:{sha}");
    let cases = [
        (
            "https://github.com/acme/fleet.git",
            None,
            Some(format!("https://github.com/acme/fleet/commit/{sha}")),
        ),
        (
            "git@gitlab.com:acme/infra/fleet.git",
            None,
            Some(format!(
                "https://gitlab.com/acme/infra/fleet/-/commit/{sha}"
            )),
        ),
        (
            "https://user:secret@github.com/acme/fleet",
            None,
            Some(format!("https://github.com/acme/fleet/commit/{sha}")),
        ),
        (
            "http://127.0.0.1:3000/acme/fleet.git",
            Some(ForgeStyle::Gitea),
            Some(format!("http://127.0.0.1:3000/acme/fleet/commit/{sha}")),
        ),
        ("https://git.example/acme/fleet.git", None, None),
        ("file:///srv/fleet", Some(ForgeStyle::Github), None),
        ("https://github.com/acme/\"><x", None, None),
    ];
    for (remote, forge, expected) in cases {
        let link = CommitLinks::of_remote(remote, forge).and_then(|l| l.commit(&revision));
        assert_eq!(link, expected, "{remote}");
    }
    let links = CommitLinks::of_remote("https://github.com/acme/fleet", None).expect("known");
    assert_eq!(
        links.commit("dir:abc"),
        None,
        "a folder's revision names no commit"
    );
}

#[test]
fn the_history_keeps_a_bounded_number_of_runs_per_cluster() {
    let mut history = StepHistory::default();
    for i in 0..(history::KEPT_PER_CLUSTER + 10) {
        let id = history.started("prod", ActionKind::Cordon, None, "r", at(i as i64));
        history.ended("prod", id, Outcome::Succeeded, at(i as i64 + 1));
    }
    assert_eq!(history.of("prod").count(), history::KEPT_PER_CLUSTER);
    history.retain_clusters(|name| name != "prod");
    assert_eq!(history.of("prod").count(), 0);
}

#[test]
fn a_preview_comment_keeps_its_markdown_and_the_writers_tags_and_nothing_else_as_markup() {
    let markdown = "<!-- capstan-preview -->\n## prod: 1 change\n\n\
        <details><summary><b>capstan.yaml</b> changes</summary>\n\n```diff\n-a\n+<script>x</script>\n```\n</details>\n\n\
        | step | machine |\n|---|---|\n| join-node | <img src=x onerror=alert(1)> |\n\n\
        [fine](https://forge.example/pr/1) [bad](javascript:alert(1)) ![tracker](https://evil.example/p.png)\n\n\
        <a href=\"https://evil.example\">raw</a> é<b onclick=x>";
    let html = markdown_to_html(markdown);
    assert!(
        !html.contains("capstan-preview"),
        "comments dropped: {html}"
    );
    assert!(html.contains("<h2>prod: 1 change</h2>"), "{html}");
    assert!(
        html.contains("<details><summary><b>capstan.yaml</b> changes</summary>"),
        "{html}"
    );
    assert!(html.contains("<table>"), "{html}");
    assert!(html.contains("&lt;script&gt;x&lt;/script&gt;"), "{html}");
    assert!(
        html.contains("&lt;img src=x onerror=alert(1)&gt;"),
        "{html}"
    );
    assert!(
        html.contains("<a href=\"https://forge.example/pr/1\">fine</a>"),
        "{html}"
    );
    assert!(
        !html.contains("javascript:"),
        "the unsafe link is text: {html}"
    );
    assert!(html.contains("bad"), "{html}");
    assert!(!html.contains("<img"), "no image is fetched: {html}");
    assert!(html.contains("tracker"), "the image's text stays: {html}");
    assert!(
        html.contains("&lt;a href=\"https://evil.example\"&gt;raw&lt;/a&gt;")
            || html.contains("&lt;a href=&quot;https://evil.example&quot;&gt;raw&lt;/a&gt;"),
        "{html}"
    );
    assert!(
        html.contains("&lt;b onclick=x&gt;"),
        "a tag with attributes is text: {html}"
    );
}

#[test]
fn a_preview_page_shows_the_comment_and_an_unknown_pull_is_not_found() {
    let status = fleet("prod", Phase::Ready);
    let history = StepHistory::default();
    let previews = [PreviewComment {
        pull: 7,
        head: "refs/pull/7/head@sha1:c".to_owned(),
        markdown: format!("**prod**: `{HOSTILE}`"),
        at: at(0),
        fingerprint: "f".to_owned(),
    }];
    let mut view = view(&status, &history);
    view.previews = &previews;
    let page = preview_page(&view, 7).expect("known");
    assert!(page.contains("<strong>prod</strong>"), "{page}");
    assert!(
        page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{page}"
    );
    assert!(!page.contains("<script>alert"), "{page}");
    let fleet = fleet_page(&view);
    assert!(fleet.contains("<a href=\"/previews/7\">#7</a>"), "{fleet}");
    assert!(preview_page(&view, 8).is_err());
}

/// A predicted step of `action` on machine `prod-w-1`.
fn predicted(action: crate::plan::Action) -> crate::plan::Step {
    crate::plan::Step {
        action,
        target: crate::plan::Target {
            cluster: "prod".into(),
            machine: Some(NodeName::from("prod-w-1")),
            ..crate::plan::Target::default()
        },
        reason: "the pool's machine changed".to_owned(),
        disruptive: true,
        waits_on: None,
    }
}

#[test]
fn predicted_steps_follow_the_maintenance_window_at_their_medians_and_removals_are_marked() {
    use crate::plan::{Action, ClusterPlan, MachineRef, Resource, Waiting};
    let status = fleet("prod", Phase::Updating);
    let history = StepHistory::default();
    let machine = MachineRef {
        name: NodeName::from("prod-w-1"),
        vm_id: None,
        proxmox_node: "pve1".into(),
    };
    let ownership = crate::model::Ownership {
        cluster: "prod".into(),
        role: Role::Worker,
        pool: "workers".into(),
        spec_hash: "0123456789ab".into(),
    };
    let opens = at(1200);
    let plan = crate::plan::Plan {
        now: at(600),
        clusters: vec![ClusterPlan {
            name: "prod".to_owned(),
            phase: Phase::Updating,
            steps: Vec::new(),
            predicted: vec![
                predicted(Action::Drain {
                    node: NodeName::from("prod-w-1"),
                    deadline: at(9999),
                }),
                predicted(Action::DestroyMachine { machine, ownership }),
            ],
            blocked: Vec::new(),
            waiting_on: vec![Waiting {
                step: Some(ActionKind::Drain),
                machine: None,
                resource: Resource::MaintenanceWindow {
                    opens: Some(opens),
                    deny: None,
                    time_zone: None,
                    fit: None,
                },
                since: Some(at(0)),
            }],
            findings: Vec::new(),
            remediation_held: None,
            suspended: Vec::new(),
        }],
        findings: Vec::new(),
    };
    let mut observed = crate::observed::Observed::default();
    observed.step_durations.insert(
        "drain".to_owned(),
        StepDuration {
            median_ms: 90_000,
            samples: 3,
            p90_ms: None,
        },
    );
    let mut view = view(&status, &history);
    view.observed = Some(&observed);
    view.plan = Some(&plan);
    let page = cluster_page(&view, "prod").expect("known");
    assert!(
        page.contains("class=\"hold l-"),
        "the window's wait is shaded: {page}"
    );
    placed_by_the_stylesheet_alone(&page);
    assert!(
        page.contains("A maintenance window holds the predicted steps"),
        "{page}"
    );
    let table = page
        .split("<table class=\"steps\">")
        .nth(1)
        .expect("the timeline's table");
    let drain = table
        .split("<tr data-action=\"drain\">")
        .nth(1)
        .expect("drain");
    assert!(drain.contains("≈ 1 min 30 s (median)"), "{drain}");
    assert!(
        drain.contains(&format!("≈ {}", time(opens).into_string())),
        "it starts when the window opens: {drain}"
    );
    let destroy = table
        .split("<tr data-action=\"destroy-machine\">")
        .nth(1)
        .expect("destroy-machine");
    assert!(destroy.contains("not measured yet"), "{destroy}");
    assert!(destroy.contains("(removed)"), "{destroy}");
    assert!(
        page.contains("to be removed"),
        "the node is marked in the nodes table: {page}"
    );
}

/// `page` has no `style` attribute (the daemon's Content-Security-Policy would drop it), and
/// every placement class it uses (`l-`, `ml-`, `w-`) has its rule in the stylesheet.
fn placed_by_the_stylesheet_alone(page: &str) {
    assert!(!page.contains("style="), "{page}");
    let stylesheet = assets::stylesheet();
    let mut used = 0;
    for classes in page.split("class=\"").skip(1) {
        let classes = classes.split('"').next().unwrap_or_default();
        for class in classes.split_whitespace() {
            let Some((prefix, step)) = class.split_once('-') else {
                continue;
            };
            if ["l", "ml", "w"].contains(&prefix) && step.parse::<u32>().is_ok() {
                used += 1;
                assert!(stylesheet.contains(&format!(".{class}{{")), "{class}");
            }
        }
    }
    assert!(used >= 3, "the now line and a bar are placed: {page}");
}

#[test]
fn the_stylesheet_places_every_half_percent_from_zero_to_a_hundred() {
    let stylesheet = assets::stylesheet();
    assert!(stylesheet.starts_with(assets::CSS));
    for rule in [
        ".l-0{left:0%}",
        ".l-1{left:0.5%}",
        ".ml-75{margin-left:37.5%}",
        ".w-200{width:100%}",
    ] {
        assert!(stylesheet.contains(rule), "{rule}");
    }
    assert!(!stylesheet.contains(".w-201{"));
}
