//! Patches as a user writes them, through the whole validation (`spec::load`): what each
//! distribution accepts, refuses at file:line with whose words, and what a change replaces.

use crate::spec::{Diagnostic, RepoFiles, SourceText, load};

const FLEET: &str = include_str!("../../../../../examples-repo/capstan.yaml");
const TALOS: &str = include_str!("../../../../../examples-repo/clusters/talos.yaml");
const KUBEADM: &str = include_str!("../../../../../examples-repo/clusters/prod.yaml");
const K3S: &str = include_str!("../../../../../examples-repo/clusters/edge.yaml");

/// The example file with `cluster` added under `spec`, and `pool` under its first pool.
fn with_patches(example: &str, cluster: &str, pool: &str) -> String {
    let mut text = example.to_owned();
    if !cluster.is_empty() {
        text = text.replacen(
            "\n  workers:\n",
            &format!("\n  patches:\n{cluster}  workers:\n"),
            1,
        );
    }
    if !pool.is_empty() {
        let start = text.find("\n    - pool: ").expect("a pool") + 1;
        let end = start + text[start..].find('\n').expect("a line") + 1;
        text.insert_str(end, &format!("      patches:\n{pool}"));
    }
    text
}

fn findings(text: &str) -> (Vec<Diagnostic>, String) {
    let files = RepoFiles {
        fleet: SourceText {
            path: "capstan.yaml".into(),
            text: FLEET.into(),
        },
        clusters: vec![SourceText {
            path: "clusters/c.yaml".into(),
            text: text.into(),
        }],
    };
    let loaded = load(&files);
    let errors = loaded
        .diagnostics
        .0
        .iter()
        .filter(|d| d.is_error())
        .cloned()
        .collect();
    (errors, text.to_owned())
}

/// The line a finding points at.
fn line_of<'a>(finding: &Diagnostic, text: &'a str) -> &'a str {
    let line = finding.line.expect("a line");
    text.lines().nth(line - 1).unwrap_or_default()
}

fn spec_of(text: &str) -> crate::spec::ClusterSpec {
    let files = RepoFiles {
        fleet: SourceText {
            path: "capstan.yaml".into(),
            text: FLEET.into(),
        },
        clusters: vec![SourceText {
            path: "clusters/c.yaml".into(),
            text: text.into(),
        }],
    };
    let loaded = load(&files);
    assert!(!loaded.diagnostics.has_errors(), "{}", loaded.diagnostics);
    let desired = loaded.desired.expect("valid");
    desired
        .clusters
        .values()
        .next()
        .expect("a cluster")
        .spec
        .clone()
}

const SYSCTL: &str = "    - machine:\n        sysctls:\n          vm.max_map_count: \"262144\"\n";
const EXTRA_MOUNT: &str = "        - machine:\n            kubelet:\n              extraMounts:\n                - destination: /var/lib/longhorn\n                  type: bind\n                  source: /var/lib/longhorn\n                  options: [bind, rshared, rw]\n";

#[test]
fn a_talos_cluster_patch_and_a_pool_patch_make_configs_talos_schema_accepts() {
    let text = with_patches(TALOS, SYSCTL, EXTRA_MOUNT);
    let (errors, _) = findings(&text);
    assert!(errors.is_empty(), "{errors:#?}");
    let spec = spec_of(&text);
    // The worker's config holds both, the control plane's only the cluster's.
    let worker = spec.patches_of(Some("general"));
    let control_plane = spec.patches_of(None);
    assert_eq!((worker.len(), control_plane.len()), (2, 1));
}

#[test]
fn a_value_talos_schema_forbids_is_refused_at_its_line_in_the_schema_s_words() {
    let patch = "    - machine:\n        files:\n          - path: /var/etc/x.conf\n            content: \"a = 1\"\n            permissions: 0o644\n            op: move\n";
    let (errors, text) = findings(&with_patches(TALOS, patch, ""));
    let error = errors
        .iter()
        .find(|d| d.message.contains("move"))
        .unwrap_or_else(|| panic!("refused: {errors:#?}"));
    assert_eq!(
        error.field.as_deref(),
        Some("spec.patches[0].machine.files[0].op")
    );
    assert!(line_of(error, &text).contains("op: move"), "{error:?}");
    for allowed in ["create", "append", "overwrite"] {
        assert!(error.message.contains(allowed), "{}", error.message);
    }
}

#[test]
fn a_talos_patch_on_a_field_capstan_owns_is_refused_naming_the_field_to_use() {
    let patch = "    - cluster:\n        ca:\n          crt: Zm9v\n        network:\n          cni:\n            name: custom\n";
    let (errors, text) = findings(&with_patches(TALOS, patch, ""));
    let ca = errors
        .iter()
        .find(|d| d.field.as_deref() == Some("spec.patches[0].cluster.ca"))
        .unwrap_or_else(|| panic!("{errors:#?}"));
    assert!(line_of(ca, &text).contains("ca:"));
    assert!(
        ca.hint
            .as_deref()
            .unwrap_or_default()
            .contains("capstan generates")
    );
    let cni = errors
        .iter()
        .find(|d| d.field.as_deref() == Some("spec.patches[0].cluster.network.cni"))
        .unwrap_or_else(|| panic!("{errors:#?}"));
    assert!(
        cni.hint
            .as_deref()
            .unwrap_or_default()
            .contains("`spec.network.cni`")
    );
}

#[test]
fn a_talos_patch_adds_a_whole_document_and_an_unknown_kind_is_refused() {
    let document = "    - apiVersion: v1alpha1\n      kind: KmsgLogConfig\n      name: remote\n      url: udp://192.168.1.5:6050/\n";
    let (errors, _) = findings(&with_patches(TALOS, document, ""));
    assert!(errors.is_empty(), "{errors:#?}");
    let unknown = "    - apiVersion: v1alpha1\n      kind: MadeUpConfig\n";
    let (errors, _) = findings(&with_patches(TALOS, unknown, ""));
    assert!(
        errors
            .iter()
            .any(|d| d.message.contains("`MadeUpConfig` is not a document kind")),
        "{errors:#?}"
    );
    let owned = "    - apiVersion: v1alpha1\n      kind: HostnameConfig\n      hostname: mine\n";
    let (errors, _) = findings(&with_patches(TALOS, owned, ""));
    assert!(
        errors.iter().any(|d| d
            .message
            .contains("`HostnameConfig` documents are capstan's")),
        "{errors:#?}"
    );
}

#[test]
fn a_patch_that_carries_a_secret_is_refused_pointing_at_the_secret_sources() {
    let patch = "    - machine:\n        files:\n          - path: /var/etc/key.pem\n            op: create\n            permissions: 0o600\n            content: \"-----BEGIN PRIVATE KEY-----\\nMIIB\\n-----END PRIVATE KEY-----\\n\"\n";
    let (errors, text) = findings(&with_patches(TALOS, patch, ""));
    let error = errors
        .iter()
        .find(|d| d.message.contains("PEM"))
        .unwrap_or_else(|| panic!("{errors:#?}"));
    assert!(line_of(error, &text).contains("content:"));
    assert!(
        error
            .hint
            .as_deref()
            .unwrap_or_default()
            .contains("secret source")
    );
}

const MAX_PODS: &str = "    - apiVersion: kubelet.config.k8s.io/v1beta1\n      kind: KubeletConfiguration\n      maxPods: 150\n    - apiVersion: kubeadm.k8s.io/v1beta4\n      kind: ClusterConfiguration\n      apiServer:\n        extraArgs:\n          - name: audit-log-path\n            value: /var/log/kubernetes/audit.log\n";

#[test]
fn kubeadm_documents_are_judged_by_their_published_api() {
    let (errors, _) = findings(&with_patches(KUBEADM, MAX_PODS, ""));
    assert!(errors.is_empty(), "{errors:#?}");
    let bad = "    - apiVersion: kubelet.config.k8s.io/v1beta1\n      kind: KubeletConfiguration\n      maxPods: many\n      maxPodz: 3\n";
    let (errors, text) = findings(&with_patches(KUBEADM, bad, ""));
    let typed = errors
        .iter()
        .find(|d| d.field.as_deref() == Some("spec.patches[0].maxPods"))
        .unwrap_or_else(|| panic!("{errors:#?}"));
    assert!(typed.message.contains("integer"), "{}", typed.message);
    assert!(line_of(typed, &text).contains("maxPods: many"));
    assert!(
        errors.iter().any(|d| d.message.contains("maxPodz")),
        "an unknown field is refused: {errors:#?}"
    );
}

#[test]
fn a_kubeadm_patch_may_not_set_what_capstan_owns_nor_the_control_plane_s_documents_on_a_pool() {
    let owned = "        - apiVersion: kubeadm.k8s.io/v1beta4\n          kind: JoinConfiguration\n          nodeRegistration:\n            kubeletExtraArgs:\n              - name: node-labels\n                value: a=b\n";
    let (errors, _) = findings(&with_patches(KUBEADM, "", owned));
    assert!(
        errors
            .iter()
            .any(|d| d.message.contains("`--node-labels` is capstan's")
                && d.hint.as_deref().unwrap_or_default().contains("`labels`")),
        "{errors:#?}"
    );
    let cluster_wide = "        - apiVersion: kubeadm.k8s.io/v1beta4\n          kind: ClusterConfiguration\n          clusterName: x\n";
    let (errors, _) = findings(&with_patches(KUBEADM, "", cluster_wide));
    assert!(
        errors
            .iter()
            .any(|d| d.message.contains("configures the control plane")),
        "{errors:#?}"
    );
}

#[test]
fn k3s_keys_are_its_flags_critical_ones_on_the_cluster_level_only() {
    let disable = "    - disable: [traefik, servicelb]\n      kube-apiserver-arg: [\"audit-log-maxage=30\"]\n";
    let (errors, _) = findings(&with_patches(K3S, disable, ""));
    assert!(errors.is_empty(), "{errors:#?}");
    let spec = spec_of(&with_patches(K3S, disable, ""));
    let server = super::k3s::settings(&spec, None);
    assert_eq!(
        server["disable"],
        serde_json::json!(["traefik", "servicelb"])
    );
    let pool = spec.workers[0].pool.clone();
    assert!(
        super::k3s::settings(&spec, Some(&pool)).is_empty(),
        "agents read no server flag"
    );
    assert_eq!(
        super::digest(&spec, Some(&pool)),
        None,
        "so their machines are not replaced"
    );

    let typo = "    - disabel: [traefik]\n";
    let (errors, _) = findings(&with_patches(K3S, typo, ""));
    assert!(
        errors
            .iter()
            .any(|d| d.hint.as_deref().unwrap_or_default().contains("`disable`")),
        "{errors:#?}"
    );
    let on_pool = "        - disable: [traefik]\n";
    let (errors, _) = findings(&with_patches(K3S, "", on_pool));
    assert!(
        errors
            .iter()
            .any(|d| d.message.contains("read by K3s servers only")),
        "{errors:#?}"
    );
    let owned = "    - token: abc\n";
    let (errors, _) = findings(&with_patches(K3S, owned, ""));
    assert!(
        errors
            .iter()
            .any(|d| d.message.contains("`token` is capstan's")),
        "{errors:#?}"
    );
}

#[test]
fn api_server_authentication_in_a_patch_is_refused_pointing_at_the_field() {
    let cases = [
        (
            K3S,
            "    - kube-apiserver-arg: [\"audit-log-maxage=30\", \"oidc-issuer-url=https://sso.example.com\"]\n",
        ),
        (
            KUBEADM,
            "    - apiVersion: kubeadm.k8s.io/v1beta4\n      kind: ClusterConfiguration\n      apiServer:\n        extraArgs:\n          - name: authentication-config\n            value: /etc/mine.yaml\n",
        ),
        (
            TALOS,
            "    - cluster:\n        apiServer:\n          extraArgs:\n            authentication-config: /var/mine.yaml\n",
        ),
    ];
    for (example, patch) in cases {
        let (errors, _) = findings(&with_patches(example, patch, ""));
        assert!(
            errors.iter().any(|d| d
                .hint
                .as_deref()
                .is_some_and(|hint| hint.contains("spec.kubernetes.authentication"))),
            "{errors:#?}"
        );
    }
    let allowed = "    - kube-apiserver-arg: [\"audit-log-maxage=30\"]\n";
    let (errors, _) = findings(&with_patches(K3S, allowed, ""));
    assert!(errors.is_empty(), "{errors:#?}");
}

#[test]
fn a_k3s_critical_value_on_the_control_plane_level_is_refused() {
    let text = K3S.replacen(
        "  controlPlane:\n",
        "  controlPlane:\n    patches:\n      - disable: [servicelb]\n",
        1,
    );
    let (errors, text) = findings(&text);
    let error = errors
        .iter()
        .find(|d| d.message.contains("critical"))
        .unwrap_or_else(|| panic!("{errors:#?}"));
    assert!(line_of(error, &text).contains("disable"));
    assert!(
        error
            .hint
            .as_deref()
            .unwrap_or_default()
            .contains("`spec.patches`")
    );
}

#[test]
fn a_pool_patch_is_part_of_that_pool_s_machine_hash_only() {
    let before = spec_of(KUBEADM);
    let after = spec_of(&with_patches(
        KUBEADM,
        "",
        "        - apiVersion: kubelet.config.k8s.io/v1beta1\n          kind: KubeletConfiguration\n          maxPods: 150\n",
    ));
    let pool = before.workers[0].pool.clone();
    assert_eq!(super::digest(&before, Some(&pool)), None);
    assert!(super::digest(&after, Some(&pool)).is_some());
    assert_eq!(
        super::digest(&after, None),
        None,
        "the control planes take nothing"
    );
    // A cluster-level ClusterConfiguration reaches the control planes, not the workers.
    let cluster = spec_of(&with_patches(
        KUBEADM,
        &MAX_PODS.replacen("maxPods: 150", "maxPods: 110", 1),
        "",
    ));
    assert!(super::digest(&cluster, None).is_some());
    let workers_only_kubelet = super::kubeadm::reaching(&cluster, Some(&pool));
    assert_eq!(workers_only_kubelet.len(), 1, "{workers_only_kubelet:?}");
}

#[test]
fn a_new_server_whose_critical_values_differ_from_a_running_one_s_is_told_which() {
    let map = |value: serde_json::Value| match value {
        serde_json::Value::Object(map) => map,
        _ => unreachable!("a map"),
    };
    let running = map(
        serde_json::json!({"token": "x", "disable": "traefik,servicelb", "kube-apiserver-arg": ["a=1"]}),
    );
    let same = map(
        serde_json::json!({"token": "x", "disable": ["servicelb", "traefik"], "kube-apiserver-arg": ["a=2"]}),
    );
    assert!(super::k3s::critical_differences(&running, &same).is_empty());
    let without = map(
        serde_json::json!({"token": "x", "disable": ["traefik"], "egress-selector-mode": "pod"}),
    );
    assert_eq!(
        super::k3s::critical_differences(&running, &without),
        ["disable", "egress-selector-mode"]
    );
}
