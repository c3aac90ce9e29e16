use crate::spec::{RepoFiles, SourceText, load};

const PROD: &str = include_str!("../../../../../examples-repo/clusters/prod.yaml");
const PLATFORM: &str = include_str!("../../../../../examples-repo/clusters/platform.yaml");

/// The example repository's findings, `prod` and `platform` following what they are given.
fn findings(prod_after: &str, platform_after: &str) -> String {
    let source = |path: &str, text: String| SourceText {
        path: path.to_owned(),
        text,
    };
    let prod = PROD.replacen(
        "  rollout:\n",
        &format!("  rollout:\n    after: {prod_after}\n"),
        1,
    );
    let platform = PLATFORM.replacen(
        "  rollout:\n",
        &format!("  rollout:\n    after: {platform_after}\n"),
        1,
    );
    let files = RepoFiles {
        fleet: source(
            "capstan.yaml",
            include_str!("../../../../../examples-repo/capstan.yaml").to_owned(),
        ),
        clusters: vec![
            source("clusters/platform.yaml", platform),
            source("clusters/prod.yaml", prod),
        ],
    };
    load(&files).diagnostics.to_string()
}

#[test]
fn following_a_cluster_of_the_repository_is_accepted() {
    assert_eq!(findings("[platform]", "[]"), findings("[]", "[]"));
}

#[test]
fn an_unknown_name_is_refused_at_its_line_with_the_names_known() {
    let text = findings("[platform, stagin]", "[]");
    assert!(
        text.contains("clusters/prod.yaml:59:23: error: spec.rollout.after[1]: no cluster `stagin` in this repository"),
        "{text}"
    );
    assert!(
        text.contains("hint: clusters here: platform, prod"),
        "{text}"
    );
}

#[test]
fn a_cycle_is_refused_in_each_file_of_it() {
    let text = findings("[platform]", "[prod]");
    assert!(
        text.contains("clusters/prod.yaml:59:13: error: spec.rollout.after[0]: the stages make a cycle: prod → platform → prod"),
        "{text}"
    );
    assert!(
        text.contains("clusters/platform.yaml:50:13: error: spec.rollout.after[0]: the stages make a cycle: platform → prod → platform"),
        "{text}"
    );
}

#[test]
fn following_itself_or_a_name_twice_is_refused() {
    let text = findings("[prod, platform, platform]", "[]");
    assert!(
        text.contains("error: spec.rollout.after[0]: cluster `prod` cannot follow itself"),
        "{text}"
    );
    assert!(
        text.contains("error: spec.rollout.after[2]: `platform` is listed twice"),
        "{text}"
    );
}
