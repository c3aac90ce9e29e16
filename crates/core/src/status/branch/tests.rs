use super::*;
use crate::model::{NodeName, Role};
use crate::status::conditions;

fn at(text: &str) -> Timestamp {
    text.parse().expect("time")
}

fn node(name: &str, role: Role, ready: bool) -> NodeStatus {
    NodeStatus {
        name: NodeName(name.into()),
        role,
        pool: if role == Role::Worker {
            "general"
        } else {
            "control-plane"
        }
        .to_owned(),
        vm_id: 101,
        proxmox_node: "pve1".to_owned(),
        ready: Some(ready),
        version: Some("1.36.3".parse().expect("version")),
        cordoned: false,
    }
}

fn cluster(phase: Phase, ready_workers: usize, transitions: Timestamp) -> ClusterStatus {
    let mut nodes = vec![node("capstan-prod-cp-a", Role::ControlPlane, true)];
    for index in 0..3 {
        nodes.push(node(
            &format!("capstan-prod-general-{index}"),
            Role::Worker,
            index < ready_workers,
        ));
    }
    ClusterStatus {
        phase,
        conditions: vec![Condition {
            kind: conditions::READY.to_owned(),
            status: if phase == Phase::Ready {
                "True"
            } else {
                "False"
            }
            .to_owned(),
            reason: "Converged".to_owned(),
            message: format!("phase {phase}"),
            last_transition_time: transitions,
        }],
        version: Some("1.36.3".parse().expect("version")),
        certificate_expiry: Some(at("2027-05-01T10:00:00Z")),
        kubeconfig_fingerprint: Some("sha256:0123456789ab".to_owned()),
        flux_kubeconfig_fingerprint: Some("sha256:0123456789ab".to_owned()),
        nodes,
        declared_nodes: Some(4),
        refusals: Vec::new(),
        waiting_on: Vec::new(),
        next_steps: Vec::new(),
        last_step: Some(StepRecord {
            action: crate::plan::ActionKind::from_name("join-node").expect("action"),
            machine: Some(NodeName("capstan-prod-general-2".into())),
            message: "joined".to_owned(),
            succeeded: true,
            failures: 0,
            at: transitions,
            revision: Some("main@sha1:1111111111111111111111111111111111111111".to_owned()),
            refusal: None,
        }),
        suspended: Vec::new(),
        converged: None,
    }
}

fn fleet(phase: Phase, ready_workers: usize, now: Timestamp) -> FleetStatus {
    FleetStatus {
        revision: Some("main@sha1:2222222222222222222222222222222222222222".to_owned()),
        updated: Some(now),
        clusters: BTreeMap::from([("prod".to_owned(), cluster(phase, ready_workers, now))]),
        ..FleetStatus::default()
    }
}

fn files_of(status: &FleetStatus, previous: &BTreeMap<String, ClusterFile>) -> Files {
    render(&cluster_files(status, previous), status)
}

#[test]
fn an_unchanged_fleet_renders_byte_identical_files_whatever_the_time() {
    let earlier = files_of(
        &fleet(Phase::Ready, 3, at("2026-05-01T00:00:00Z")),
        &BTreeMap::new(),
    );
    let later = files_of(
        &fleet(Phase::Ready, 3, at("2026-05-09T13:00:00Z")),
        &BTreeMap::new(),
    );
    assert_eq!(earlier, later);
    assert_eq!(
        earlier.keys().collect::<Vec<_>>(),
        ["README.md", "clusters/prod.yaml"]
    );
    let prod = &earlier["clusters/prod.yaml"];
    for expected in [
        "phase: Ready",
        "nodesReady: 4",
        "nodesDeclared: 4",
        "kubeconfigFingerprint: sha256:0123456789ab",
        "converged: main@sha1:2222",
        "actedOn: main@sha1:1111",
        "proxmoxNode: pve1",
    ] {
        assert!(prod.contains(expected), "{expected} in:\n{prod}");
    }
    assert!(
        earlier["README.md"]
            .contains("| [prod](clusters/prod.yaml) | Ready | v1.36.3 | 4/4 | 2027-05-01 | — |"),
        "{}",
        earlier["README.md"]
    );
}

#[test]
fn the_converged_revision_is_where_the_cluster_last_became_ready() {
    let mut status = fleet(Phase::Ready, 3, at("2026-05-01T00:00:00Z"));
    let first = cluster_files(&status, &BTreeMap::new());
    status.revision = Some("main@sha1:3333333333333333333333333333333333333333".to_owned());
    let still_ready = cluster_files(&status, &first);
    assert_eq!(
        still_ready["prod"].revisions.converged.as_deref(),
        Some("main@sha1:2222222222222222222222222222222222222222"),
        "a push that leaves prod Ready does not rewrite its file"
    );
    let mut updating = status.clone();
    if let Some(prod) = updating.clusters.get_mut("prod") {
        prod.phase = Phase::Updating;
    }
    let moving = cluster_files(&updating, &still_ready);
    assert_eq!(
        moving["prod"].revisions.converged,
        still_ready["prod"].revisions.converged
    );
    let ready_again = cluster_files(&status, &moving);
    assert_eq!(
        ready_again["prod"].revisions.converged.as_deref(),
        Some("main@sha1:3333333333333333333333333333333333333333")
    );
}

#[test]
fn the_message_has_one_line_per_changed_cluster_and_the_revision_trailer() {
    let now = at("2026-05-01T00:00:00Z");
    let before = cluster_files(&fleet(Phase::Updating, 2, now), &BTreeMap::new());
    let after = cluster_files(&fleet(Phase::Ready, 3, now), &before);
    let message = commit_message(
        &before,
        &after,
        Some("main@sha1:2222222222222222222222222222222222222222"),
        true,
    );
    assert_eq!(
        message,
        "prod: Updating → Ready (4/4 nodes, v1.36.3) [skip ci]\n\n\
         Capstan-Revision: main@sha1:2222222222222222222222222222222222222222\n"
    );
    assert_eq!(
        revision_of(&message).as_deref(),
        Some("main@sha1:2222222222222222222222222222222222222222")
    );
    assert!(
        is_urgent(&before, &after),
        "turning Ready is written at once"
    );
    assert!(!is_urgent(&after, &after));
    let gone = commit_message(&after, &BTreeMap::new(), None, false);
    assert_eq!(gone, "prod: no longer declared\n");
    let mut two = after.clone();
    let mut edge = after["prod"].clone();
    edge.name = "edge".to_owned();
    two.insert("edge".to_owned(), edge);
    assert_eq!(
        commit_message(&before, &two, None, false),
        "2 clusters changed: edge, prod\n\n\
         edge: Ready (4/4 nodes, v1.36.3)\n\
         prod: Updating → Ready (4/4 nodes, v1.36.3)\n"
    );
}

#[test]
fn capstan_owns_the_readme_and_the_cluster_files_only() {
    assert!(is_capstan_file("README.md"));
    assert!(is_capstan_file("clusters/prod.yaml"));
    assert!(!is_capstan_file("clusters/notes.md"));
    assert!(!is_capstan_file("clusters/old/prod.yaml"));
    assert!(!is_capstan_file("NOTES.md"));
}

#[test]
fn a_restarted_daemon_that_ran_no_step_yet_keeps_the_last_step_on_the_branch() {
    let now = at("2026-05-01T00:00:00Z");
    let before = cluster_files(&fleet(Phase::Ready, 3, now), &BTreeMap::new());
    let mut restarted = fleet(Phase::Ready, 3, now);
    if let Some(prod) = restarted.clusters.get_mut("prod") {
        prod.last_step = None;
    }
    assert_eq!(cluster_files(&restarted, &before), before);
}

#[test]
fn a_cluster_whose_name_is_not_a_dns_label_gets_no_file_and_no_path() {
    let now = at("2026-05-02T01:00:00Z");
    let mut status = fleet(Phase::Ready, 2, now);
    let hostile = "x/../../y\"} 1\ninjected_metric{a=\"b\"} 42\n#";
    let entry = status.clusters.values().next().cloned().expect("a cluster");
    status.clusters.insert(hostile.to_owned(), entry);
    let files = files_of(&status, &BTreeMap::new());
    for path in files.keys() {
        assert!(is_writable_path(path), "{path:?}");
    }
    assert!(
        !files.values().any(|text| text.contains("injected_metric")),
        "{files:#?}"
    );
    assert_eq!(unwritable_clusters(&status).collect::<Vec<_>>(), [hostile]);
    assert!(!is_writable_path("clusters/../x.yaml"));
    assert!(!is_writable_path("clusters/a/b.yaml"));
    assert!(is_writable_path("clusters/prod.yaml"));
}

#[test]
fn the_branch_keeps_since_when_a_cluster_is_converged_for_a_restarted_daemon() {
    let now = at("2026-05-01T10:00:00Z");
    let since = at("2026-05-01T09:00:00Z");
    let mut status = fleet(Phase::Ready, 3, now);
    if let Some(prod) = status.clusters.get_mut("prod") {
        prod.converged = Some(crate::plan::Converged {
            revision: "main@sha1:2222222222222222222222222222222222222222".to_owned(),
            since,
        });
    }
    let files = files_of(&status, &BTreeMap::new());
    assert!(
        files["clusters/prod.yaml"].contains("convergedSince: \"2026-05-01T09:00:00Z\""),
        "{}",
        files["clusters/prod.yaml"]
    );
    // Read back at the revision of the commit that holds it.
    let read = fleet_status(&files, Some("main@sha1:3333".to_owned()));
    assert_eq!(
        read.clusters["prod"].converged,
        Some(crate::plan::Converged {
            revision: "main@sha1:3333".to_owned(),
            since,
        })
    );
    // A cluster that is not Ready is converged at no revision, whatever a file says.
    let mut updating = fleet(Phase::Updating, 2, now);
    if let Some(prod) = updating.clusters.get_mut("prod") {
        prod.converged = status.clusters["prod"].converged.clone();
    }
    let read = fleet_status(&files_of(&updating, &BTreeMap::new()), None);
    assert_eq!(read.clusters["prod"].converged, None);
}
