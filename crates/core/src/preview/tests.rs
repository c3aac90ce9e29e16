use super::*;
use crate::plan::Target;

/// Parses and validates only: what these tests need of an admission (the daemon's own is
/// tested with the secret policy and pins it checks).
struct Validated;

impl Admit for Validated {
    fn load(&self, files: &RepoFiles) -> Loaded {
        spec::load(files)
    }

    fn for_head(&self, _base: &Loaded) -> Self {
        Validated
    }
}

fn step(action: &str, machine: &str) -> Step {
    let node = crate::model::NodeName::from(machine);
    let action = match action {
        "cordon" => plan::Action::Cordon { node },
        _ => plan::Action::ResetNode {
            machine: plan::MachineRef {
                name: node,
                vm_id: None,
                proxmox_node: "pve1".into(),
            },
        },
    };
    Step {
        action,
        target: Target {
            cluster: "prod".into(),
            machine: Some(crate::model::NodeName::from(machine)),
            ..Target::default()
        },
        reason: String::new(),
        disruptive: false,
        waits_on: None,
    }
}

#[test]
fn head_steps_the_base_holds_are_pending_and_the_others_added() {
    let base = [step("cordon", "capstan-prod-general-1")];
    let head = [
        step("cordon", "capstan-prod-general-1"),
        step("cordon", "capstan-prod-general-2"),
        step("reset", "capstan-prod-general-1"),
    ];
    let marked: Vec<bool> = mark_pending(&head, &base)
        .iter()
        .map(|s| s.pending_on_base)
        .collect();
    assert_eq!(marked, [true, false, false]);
}

#[test]
fn a_base_step_matches_one_head_step_only() {
    let base = [step("cordon", "capstan-prod-general-1")];
    let head = [
        step("cordon", "capstan-prod-general-1"),
        step("cordon", "capstan-prod-general-1"),
    ];
    let marked: Vec<bool> = mark_pending(&head, &base)
        .iter()
        .map(|s| s.pending_on_base)
        .collect();
    assert_eq!(marked, [true, false]);
}

fn huge_cluster(name: &str, lines: usize) -> ClusterPreview {
    let diff: String = (0..lines)
        .map(|i| format!("+  line {i} of a very long cluster file\n"))
        .collect();
    ClusterPreview {
        name: name.to_owned(),
        file: Some(format!("clusters/{name}.yaml")),
        summary: "+1 worker".to_owned(),
        diff,
        changes: Vec::new(),
        config_diffs: Vec::new(),
        predicted: Vec::new(),
        refused: Vec::new(),
        drains: Vec::new(),
        estimate: None,
    }
}

#[test]
fn a_comment_too_long_collapses_the_largest_clusters_and_keeps_summary_and_refusals() {
    let refusal = Refusal {
        cluster: Some("prod".to_owned()),
        rule: "rule 4: upgrades".to_owned(),
        location: None,
        field: None,
        message: "1.38 skips 1.37".to_owned(),
        fix: None,
        on_base: false,
    };
    let preview = Preview {
        base: "main@sha1:1".to_owned(),
        head: "change@sha1:2".to_owned(),
        now: jiff::Timestamp::UNIX_EPOCH,
        summary: "prod: +1 worker; edge: +1 worker; small: +1 worker".to_owned(),
        stages: Vec::new(),
        refusals: vec![refusal],
        fleet_diff: String::new(),
        clusters: vec![
            huge_cluster("prod", 2000),
            huge_cluster("edge", 1500),
            huge_cluster("small", 3),
        ],
    };
    let full = comment::comment(&preview, usize::MAX);
    assert!(full.chars().count() > comment::GITHUB_COMMENT_LIMIT);
    let short = comment::comment(&preview, comment::GITHUB_COMMENT_LIMIT);
    assert!(short.chars().count() <= comment::GITHUB_COMMENT_LIMIT);
    assert!(short.starts_with(comment::MARKER));
    assert!(short.contains("prod: +1 worker; edge: +1 worker; small: +1 worker"));
    assert!(short.contains("1.38 skips 1.37"));
    assert!(short.contains("`capstan preview --format json` prints the full plan"));
    // The largest section went first; the small one keeps its diff.
    assert!(short.contains("<b>prod</b>: +1 worker (collapsed to fit this comment)"));
    assert!(short.contains("+  line 2 of a very long cluster file"));
    assert!(!short.contains("+  line 1999 of"));
}

/// The example repository, with `prod`'s workers set to `workers`, as a revision.
fn example_revision(revision: &str, workers: u32) -> RevisionFiles {
    let file = |path: &str, text: &str| spec::SourceText {
        path: path.to_owned(),
        text: text.to_owned(),
    };
    let prod = include_str!("../../../../examples-repo/clusters/prod.yaml").replacen(
        "      replicas: 3",
        &format!("      replicas: {workers}"),
        1,
    );
    RevisionFiles {
        revision: revision.to_owned(),
        files: spec::RepoFiles {
            fleet: file(
                "capstan.yaml",
                include_str!("../../../../examples-repo/capstan.yaml"),
            ),
            clusters: vec![
                file(
                    "clusters/platform.yaml",
                    include_str!("../../../../examples-repo/clusters/platform.yaml"),
                ),
                file("clusters/prod.yaml", &prod),
            ],
        },
    }
}

#[test]
fn a_head_past_the_step_limit_is_a_refusal_that_names_the_limit() {
    let base = example_revision("main@sha1:1", 3);
    let head = example_revision("more@sha1:2", 40);
    let observed = Observed::nothing();
    let now = jiff::Timestamp::UNIX_EPOCH;
    let unlimited = build(&base, &head, &observed, now, &Validated);
    assert!(!unlimited.is_refused(), "{:?}", unlimited.refusals);
    let base_steps = {
        let loaded = spec::load(&base.files);
        let desired = loaded.desired.expect("valid");
        let plan = plan::plan(&desired, &observed, &Policy::of(&desired), now);
        plan.clusters
            .iter()
            .map(|c| c.predicted.len())
            .sum::<usize>()
    };
    let limits = Limits {
        time: std::time::Duration::from_secs(3600),
        max_predicted_steps: base_steps,
    };
    let never = AtomicBool::new(false);
    let preview = build_within(&base, &head, &observed, now, &Validated, &limits, &never);
    assert!(preview.is_refused() && preview.is_over_limits());
    let message =
        format!("planning the head revision exceeded {base_steps} predicted steps: refused");
    assert_eq!(preview.summary, format!("refused: {message}"));
    assert_eq!(preview.refusals.len(), 1);
    assert_eq!(preview.refusals[0].message, message);
    assert!(
        preview.clusters.is_empty(),
        "nothing of a partial plan is shown"
    );
    let markdown = render::markdown(&preview);
    assert!(markdown.contains(&message), "{markdown}");
}

#[test]
fn a_preview_stopped_when_its_time_is_up_says_so_and_keeps_the_validation_errors() {
    let base = example_revision("main@sha1:1", 3);
    let head = example_revision("huge@sha1:2", 1_000_000_000);
    let limits = Limits::default();
    let stopped = AtomicBool::new(true);
    let preview = build_within(
        &base,
        &head,
        &Observed::nothing(),
        jiff::Timestamp::UNIX_EPOCH,
        &Validated,
        &limits,
        &stopped,
    );
    let messages: Vec<&str> = preview
        .refusals
        .iter()
        .map(|r| r.message.as_str())
        .collect();
    assert_eq!(
        messages,
        [
            "1000000000 workers: a cluster has at most 5000 machines",
            "planning the base revision exceeded 30s: refused",
        ]
    );
    assert_eq!(
        preview.refusals[0].location.as_deref(),
        Some("clusters/prod.yaml:34:7")
    );
}

#[test]
fn a_comment_whose_refusals_alone_are_too_long_keeps_those_that_fit_and_counts_the_rest() {
    let refusal = |index: usize| Refusal {
        cluster: Some("prod".to_owned()),
        rule: "validation".to_owned(),
        location: Some(format!("clusters/prod.yaml:{index}:7")),
        field: Some(format!("spec.workers[{index}].pool")),
        message: format!("`Pool_{index}` is not a DNS-1123 label"),
        fix: None,
        on_base: false,
    };
    let preview = Preview {
        base: "main@sha1:1".to_owned(),
        head: "hostile@sha1:2".to_owned(),
        now: jiff::Timestamp::UNIX_EPOCH,
        summary: "prod: REFUSED (10000)".to_owned(),
        stages: Vec::new(),
        refusals: (0..10_000).map(refusal).collect(),
        fleet_diff: String::new(),
        clusters: vec![huge_cluster("prod", 10)],
    };
    let short = comment::comment(&preview, comment::GITHUB_COMMENT_LIMIT);
    assert!(short.chars().count() <= comment::GITHUB_COMMENT_LIMIT);
    assert!(short.starts_with(comment::MARKER));
    assert!(short.contains("prod: REFUSED (10000)"));
    assert!(short.contains("`clusters/prod.yaml:0:7`"), "{short}");
    let listed = short.matches("is not a DNS-1123 label").count();
    assert!(listed > 100, "{listed} refusals listed");
    assert!(short.contains(&format!(
        "{} more refusal(s) do not fit this comment",
        10_000 - listed
    )));
}

#[test]
fn a_preview_shows_the_stages_of_a_staged_rollout_in_order() {
    let base = example_revision("main@sha1:1", 3);
    let mut head = example_revision("staged@sha1:2", 3);
    let prod = &mut head.files.clusters[1].text;
    *prod = prod.replacen(
        "  rollout:\n",
        "  rollout:\n    after: [platform]\n    soak: 30m\n",
        1,
    );
    let preview = build(
        &base,
        &head,
        &Observed::nothing(),
        jiff::Timestamp::UNIX_EPOCH,
        &Validated,
    );
    assert!(!preview.is_refused(), "{:?}", preview.refusals);
    assert_eq!(
        preview.stages,
        vec![
            Stage {
                clusters: vec!["platform".to_owned()],
                starts: Some(jiff::Timestamp::UNIX_EPOCH),
            },
            Stage {
                clusters: vec!["prod (after platform, soak 30m)".to_owned()],
                // Platform has nothing to do: prod starts once its soak is over.
                starts: Some("1970-01-01T00:30:00Z".parse().expect("time")),
            },
        ]
    );
    let text = render::text(&preview);
    assert!(
        text.contains("stages in order: 1. platform (starts now); 2. prod (after platform, soak 30m) (starts about Thu 1970-01-01 00:30 UTC)"),
        "{text}"
    );
    assert!(
        render::markdown(&preview).contains("Stages in order: 1. platform (starts now); 2. prod"),
        "the comment shows them too"
    );
}

#[test]
fn a_stage_starts_once_those_it_follows_are_estimated_to_finish_and_soaked() {
    let mut head = example_revision("staged@sha1:2", 3);
    let prod = &mut head.files.clusters[1].text;
    *prod = prod.replacen(
        "  rollout:\n",
        "  rollout:\n    after: [platform]\n    soak: 30m\n",
        1,
    );
    let loaded = Validated.load(&head.files);
    let now = jiff::Timestamp::UNIX_EPOCH;
    let hour = jiff::SignedDuration::from_hours(1);
    // Platform's steps take an hour from when it starts; the others' are not known.
    let order = |platform_known: bool| {
        stages::order(loaded.desired.as_ref(), now, |name, from| match name {
            "platform" if platform_known => from.checked_add(hour).ok(),
            "platform" => None,
            _ => Some(from),
        })
    };
    let stages = order(true);
    assert_eq!(stages[0].starts, Some(now));
    assert_eq!(
        stages[1].starts,
        Some("1970-01-01T01:30:00Z".parse().expect("time"))
    );
    assert_eq!(
        order(false)[1].starts,
        None,
        "after an unknown finish: unknown"
    );
}

#[test]
fn a_version_change_says_in_place_only_when_the_plan_upgrades_in_place() {
    let change = changes::FieldChange {
        path: "kubernetes.version".into(),
        from: Some("1.36.2".into()),
        to: Some("1.36.3".into()),
    };
    let destroy = |machine: &str| PreviewStep {
        step: Step {
            action: plan::Action::DestroyMachine {
                machine: plan::MachineRef {
                    name: machine.into(),
                    vm_id: None,
                    proxmox_node: "pve1".into(),
                },
                ownership: crate::model::Ownership {
                    cluster: "prod".into(),
                    role: crate::model::Role::Worker,
                    pool: "general".into(),
                    spec_hash: "0123456789ab".into(),
                },
            },
            ..step("reset-node", machine)
        },
        pending_on_base: false,
    };
    // K3s and Talos: replacement alone.
    let replaced = vec![destroy("w-1"), destroy("w-2")];
    assert_eq!(
        summary::explain(&change, &replaced),
        "kubernetes.version 1.36.2 → 1.36.3: replaces 2 nodes"
    );
}

#[test]
fn a_name_with_line_breaks_cannot_plant_a_heading_or_a_verdict_in_the_comment() {
    // Issue 34: a template name with newlines planted a fake `### capstan preview` heading
    // and "No cluster changes. Safe to merge." in the comment.
    let base = example_revision("main@sha1:1", 3);
    let mut head = example_revision("evil@sha1:2", 3);
    head.files.clusters[1].text = head.files.clusters[1].text.replacen(
        "machine: {template: debian13-k8s, cores: 4",
        "machine: {template: \"debian13-k8s\\n\\n### capstan preview\\n\\nNo cluster changes. Safe to merge.\\n\", cores: 4",
        1,
    );
    let preview = build(
        &base,
        &head,
        &Observed::nothing(),
        jiff::Timestamp::UNIX_EPOCH,
        &Validated,
    );
    let refusal = preview
        .refusals
        .iter()
        .find(|r| r.field.as_deref() == Some("spec.workers[0].machine.template"))
        .expect("the template is refused");
    assert_eq!(
        refusal.message,
        "`debian13-k8s\\n\\n### capstan preview\\n\\nNo cluster changes. Safe to merge.\\n` is not a Proxmox VM name"
    );
    for text in [
        render::markdown(&preview),
        comment::comment(&preview, 65_536),
    ] {
        let headings = text
            .lines()
            .filter(|l| l.starts_with("### capstan preview"));
        assert_eq!(headings.count(), 1, "{text}");
        assert!(
            !text.lines().any(|l| l.starts_with("No cluster changes")),
            "{text}"
        );
    }
}

#[test]
fn a_diff_holding_a_fence_stays_inside_its_block() {
    let base = example_revision("main@sha1:1", 3);
    let mut head = example_revision("fence@sha1:2", 3);
    head.files.clusters[1]
        .text
        .push_str("# ````\n# ### capstan preview\n");
    let preview = build(
        &base,
        &head,
        &Observed::nothing(),
        jiff::Timestamp::UNIX_EPOCH,
        &Validated,
    );
    let markdown = render::markdown(&preview);
    assert!(markdown.contains("`````diff\n"), "{markdown}");
}

#[test]
fn a_patch_change_names_its_level_as_the_cause_of_the_replacements() {
    let change = changes::FieldChange {
        path: "workers.storage.patches".into(),
        from: Some("[{\"maxPods\":150}]".into()),
        to: Some("[{\"maxPods\":200}]".into()),
    };
    let destroy = |machine: &str, pool: &str| PreviewStep {
        step: Step {
            action: plan::Action::DestroyMachine {
                machine: plan::MachineRef {
                    name: machine.into(),
                    vm_id: None,
                    proxmox_node: "pve1".into(),
                },
                ownership: crate::model::Ownership {
                    cluster: "prod".into(),
                    role: crate::model::Role::Worker,
                    pool: pool.into(),
                    spec_hash: "0123456789ab".into(),
                },
            },
            target: Target {
                cluster: "prod".into(),
                pool: Some(pool.into()),
                ..Target::default()
            },
            ..step("reset-node", machine)
        },
        pending_on_base: false,
    };
    let predicted = vec![
        destroy("s-1", "storage"),
        destroy("s-2", "storage"),
        destroy("s-3", "storage"),
        destroy("g-1", "general"),
    ];
    assert_eq!(
        summary::explain(&change, &predicted),
        "replaces 3 workers: workers.storage.patches changed"
    );
}

#[test]
fn an_authentication_change_names_the_control_planes_it_replaces() {
    let change = changes::FieldChange {
        path: "kubernetes.authentication.jwt".into(),
        from: None,
        to: Some("[{\"url\":\"https://sso.example.com\"}]".into()),
    };
    let destroy = |machine: &str, pool: &str| PreviewStep {
        step: Step {
            action: plan::Action::DestroyMachine {
                machine: plan::MachineRef {
                    name: machine.into(),
                    vm_id: None,
                    proxmox_node: "pve1".into(),
                },
                ownership: crate::model::Ownership {
                    cluster: "prod".into(),
                    role: crate::model::Role::ControlPlane,
                    pool: pool.into(),
                    spec_hash: "0123456789ab".into(),
                },
            },
            target: Target {
                cluster: "prod".into(),
                pool: Some(pool.into()),
                ..Target::default()
            },
            ..step("reset-node", machine)
        },
        pending_on_base: false,
    };
    let predicted = vec![
        destroy("cp-1", "cp"),
        destroy("cp-2", "cp"),
        destroy("cp-3", "cp"),
    ];
    assert_eq!(
        summary::explain(&change, &predicted),
        "replaces 3 control planes: kubernetes.authentication.jwt changed"
    );
}

#[test]
fn a_registries_change_replaces_every_machine_in_the_preview() {
    let change = changes::FieldChange {
        path: "kubernetes.registries.mirrors.docker.io.endpoints".into(),
        from: Some("[\"https://a.example\"]".into()),
        to: Some("[\"https://b.example\"]".into()),
    };
    let destroy = |machine: &str, pool: &str| PreviewStep {
        step: Step {
            action: plan::Action::DestroyMachine {
                machine: plan::MachineRef {
                    name: machine.into(),
                    vm_id: None,
                    proxmox_node: "pve1".into(),
                },
                ownership: crate::model::Ownership {
                    cluster: "prod".into(),
                    role: crate::model::Role::Worker,
                    pool: pool.into(),
                    spec_hash: "0123456789ab".into(),
                },
            },
            target: Target {
                cluster: "prod".into(),
                pool: Some(pool.into()),
                ..Target::default()
            },
            ..step("reset-node", machine)
        },
        pending_on_base: false,
    };
    let predicted = vec![destroy("c-1", "cp"), destroy("g-1", "general")];
    let words = summary::explain(&change, &predicted);
    assert!(
        words.ends_with(": replaces 2 machines (a runtime reads its registries as it starts)"),
        "{words}"
    );
}

fn loaded_cluster(text: &str) -> spec::Cluster {
    let files = RepoFiles {
        fleet: spec::SourceText {
            path: "capstan.yaml".into(),
            text: include_str!("../../../../examples-repo/capstan.yaml").into(),
        },
        clusters: vec![spec::SourceText {
            path: "clusters/c.yaml".into(),
            text: text.into(),
        }],
    };
    let loaded = spec::load(&files);
    assert!(!loaded.diagnostics.has_errors(), "{}", loaded.diagnostics);
    let desired = loaded.desired.expect("valid");
    desired.clusters.values().next().expect("one").clone()
}

#[test]
fn a_pool_patch_change_shows_that_pool_s_rendered_configuration_difference_only() {
    let prod = include_str!("../../../../examples-repo/clusters/prod.yaml");
    let with = |pods: u32| {
        prod.replacen(
            "    - pool: general\n",
            &format!("    - pool: general\n      patches:\n        - apiVersion: kubelet.config.k8s.io/v1beta1\n          kind: KubeletConfiguration\n          maxPods: {pods}\n"),
            1,
        )
    };
    let (base, head) = (loaded_cluster(&with(150)), loaded_cluster(&with(200)));
    let diffs = configs::config_diffs(Some(&base), Some(&head));
    assert_eq!(diffs.len(), 1, "{diffs:#?}");
    assert!(
        diffs[0].starts_with("--- a/workers.general (rendered configuration)"),
        "{}",
        diffs[0]
    );
    assert!(
        diffs[0].contains("-maxPods: 150\n+maxPods: 200"),
        "{}",
        diffs[0]
    );
}

#[test]
fn a_talos_cluster_patch_change_diffs_every_machine_config_with_secrets_redacted() {
    let talos = include_str!("../../../../examples-repo/clusters/talos.yaml");
    let with = |value: &str| {
        talos.replacen(
            "\n  workers:\n",
            &format!("\n  patches:\n    - machine:\n        sysctls:\n          vm.max_map_count: \"{value}\"\n  workers:\n"),
            1,
        )
    };
    let (base, head) = (
        loaded_cluster(&with("262144")),
        loaded_cluster(&with("524288")),
    );
    let diffs = configs::config_diffs(Some(&base), Some(&head));
    assert_eq!(
        diffs.len(),
        2,
        "the control planes' and the pool's: {diffs:#?}"
    );
    for diff in &diffs {
        assert!(
            diff.contains("+    vm.max_map_count: '524288'")
                || diff.contains("+    vm.max_map_count: \"524288\""),
            "{diff}"
        );
        assert!(
            !diff.contains("abcdef.0123456789abcdef"),
            "no token shown: {diff}"
        );
    }
}

#[test]
fn a_preview_says_the_gib_of_data_disks_per_storage_and_that_tags_apply_in_place() {
    // The base has no `prod`: every machine of the head's is new.
    let mut base = example_revision("main@sha1:1", 3);
    base.files.clusters.remove(1);
    let mut head = example_revision("disks@sha1:2", 3);
    let general = "machine: {template: debian13-k8s, cores: 4, memoryMiB: 8192, diskGiB: 50, placement: [pve1, pve2]}";
    let prod = &mut head.files.clusters[1].text;
    assert!(prod.contains(general), "the example's general pool");
    *prod = prod.replacen(
        general,
        &general.replacen(
            "placement:",
            "disks: [{sizeGiB: 100, storage: local-lvm}, {sizeGiB: 20}], tags: [storage], placement:",
            1,
        ),
        1,
    );
    let preview = build(
        &base,
        &head,
        &Observed::nothing(),
        jiff::Timestamp::UNIX_EPOCH,
        &Validated,
    );
    assert!(!preview.is_refused(), "{:?}", preview.refusals);
    let prod = preview
        .clusters
        .iter()
        .find(|c| c.name == "prod")
        .expect("prod previewed");
    // Three new workers: 100 GiB each on local-lvm, 20 GiB each on the template's storage
    // (the pool names no storage).
    assert!(
        prod.summary.contains(
            "data disks +300 GiB on local-lvm, data disks +60 GiB on the template's storage"
        ),
        "{}",
        prod.summary
    );
    let tags = changes::FieldChange {
        path: "workers.general.machine.tags".into(),
        from: Some("[\"a\"]".into()),
        to: Some("[\"b\"]".into()),
    };
    let filing = |machine: &str| PreviewStep {
        step: Step {
            action: plan::Action::TagMachines {
                machines: vec![plan::Filing {
                    machine: plan::MachineRef {
                        name: machine.into(),
                        vm_id: None,
                        proxmox_node: "pve1".into(),
                    },
                    ownership: crate::model::Ownership {
                        cluster: "prod".into(),
                        role: crate::model::Role::Worker,
                        pool: "general".into(),
                        spec_hash: "0123456789ab".into(),
                    },
                    tags: vec!["b".into()],
                    pool: None,
                    remove_foreign: false,
                    changes: "tags +b −a".into(),
                }],
            },
            ..step("reset-node", machine)
        },
        pending_on_base: false,
    };
    assert_eq!(
        summary::explain(&tags, &[filing("w-1"), filing("w-2")]),
        "workers.general.machine.tags [\"a\"] → [\"b\"]: applies in place on 2 VMs (tag-machines), replaces no machine"
    );
}
