//! The simulated API server's wire behaviour as a raw HTTP client sees it: Status errors with
//! the real reasons and codes, selectors, dry runs, patch formats.

use crate::kube_support::{curl_admin, lab};
use capstan_testkit::judge::{self, Judge};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_status_objects_with_the_real_reasons() {
    if !judge::present(&[Judge::Curl]) {
        return;
    }
    let lab = lab("").await;
    let m = lab.management().expect("management");
    let expect =
        |(code, body): (u16, serde_json::Value), want: u16, reason: &str, message: &str| {
            assert_eq!(code, want, "{body}");
            assert_eq!(body["kind"], "Status", "{body}");
            assert_eq!(body["reason"], reason, "{body}");
            assert_eq!(body["code"], want, "{body}");
            assert_eq!(body["message"], message, "{body}");
        };
    expect(
        curl_admin(&m, "GET", "/api/v1/namespaces/default/pods/nope", None).await,
        404,
        "NotFound",
        "pods \"nope\" not found",
    );
    expect(
        curl_admin(
            &m,
            "GET",
            "/apis/apps/v1/namespaces/flux-system/deployments/nope",
            None,
        )
        .await,
        404,
        "NotFound",
        "deployments.apps \"nope\" not found",
    );
    expect(
        curl_admin(
            &m,
            "POST",
            "/api/v1/namespaces",
            Some(("application/json", r#"{"metadata":{"name":"default"}}"#)),
        )
        .await,
        409,
        "AlreadyExists",
        "namespaces \"default\" already exists",
    );
    expect(
        curl_admin(
            &m,
            "PUT",
            "/api/v1/nodes/management-worker-1",
            Some((
                "application/json",
                r#"{"metadata":{"name":"management-worker-1","resourceVersion":"1"}}"#,
            )),
        )
        .await,
        409,
        "Conflict",
        "Operation cannot be fulfilled on nodes \"management-worker-1\": the object has been modified; please apply your changes to the latest version and try again",
    );
    let (code, body) =
        curl_admin(&m, "PUT", "/api/v1/nodes", Some(("application/json", "{}"))).await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (405, Some("MethodNotAllowed")),
        "{body}"
    );
    let (code, body) = curl_admin(
        &m,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some(("application/json", "{not json")),
    )
    .await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (400, Some("BadRequest")),
        "{body}"
    );
    let (code, body) = curl_admin(
        &m,
        "PATCH",
        "/api/v1/nodes/management-worker-1",
        Some(("application/yaml", "{}")),
    )
    .await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (415, Some("UnsupportedMediaType")),
        "{body}"
    );
    let (code, body) = curl_admin(
        &m,
        "PATCH",
        "/api/v1/nodes/management-worker-1",
        Some(("application/apply-patch+yaml", "{}")),
    )
    .await;
    assert_eq!(
        (code, body["message"].as_str()),
        (
            422,
            Some(
                "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
            )
        ),
        "an apply without fieldManager is refused as the real server does: {body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selectors_dry_runs_and_patches_behave_like_the_real_server() {
    if !judge::present(&[Judge::Curl]) {
        return;
    }
    let lab = lab("").await;
    let m = lab.management().expect("management");
    let (code, list) = curl_admin(
        &m,
        "GET",
        "/api/v1/pods?fieldSelector=spec.nodeName%3Dmanagement-worker-1&labelSelector=app%20in%20(kube-proxy)",
        None,
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(list["kind"], "PodList");
    let items = list["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "{list}");
    assert_eq!(items[0]["spec"]["nodeName"], "management-worker-1");

    let (code, created) = curl_admin(
        &m,
        "POST",
        "/api/v1/namespaces/default/secrets?dryRun=All",
        Some((
            "application/json",
            r#"{"metadata":{"name":"dry"},"stringData":{"value":"x"}}"#,
        )),
    )
    .await;
    assert_eq!(code, 201);
    assert_eq!(
        created["data"]["value"], "eA==",
        "stringData folds into data"
    );
    assert!(
        m.object("secrets", Some("default"), "dry").is_none(),
        "a dry run stores nothing"
    );

    let (code, patched) = curl_admin(
        &m,
        "PATCH",
        "/api/v1/nodes/management-worker-1",
        Some((
            "application/merge-patch+json",
            r#"{"metadata":{"labels":{"rack":"r7"}},"status":{"phase":"ignored"}}"#,
        )),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(patched["metadata"]["labels"]["rack"], "r7");
    assert!(
        patched["status"].get("phase").is_none(),
        "the main resource ignores status changes"
    );
    let (code, patched) = curl_admin(
        &m,
        "PATCH",
        "/api/v1/nodes/management-worker-1",
        Some((
            "application/json-patch+json",
            r#"[{"op":"add","path":"/spec/unschedulable","value":true}]"#,
        )),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(patched["spec"]["unschedulable"], json!(true));
}

#[tokio::test]
async fn watches_report_objects_entering_and_leaving_a_selector() {
    use futures_util::{StreamExt as _, TryStreamExt as _};
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Api, WatchEvent, WatchParams};

    let lab = lab("").await;
    let m = lab.management().expect("management");
    let pod = m.objects("pods", Some("flux-system"))[0].clone();
    let name = pod["metadata"]["name"].as_str().expect("name").to_owned();
    let since = pod["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_owned();
    let mut labelled = pod.clone();
    labelled["metadata"]["labels"]["tier"] = json!("front");
    m.replace_object("pods", Some("flux-system"), labelled.clone())
        .expect("label");
    labelled["metadata"]["labels"]
        .as_object_mut()
        .expect("labels")
        .remove("tier");
    m.replace_object("pods", Some("flux-system"), labelled)
        .expect("unlabel");

    let kubeconfig = kube::config::Kubeconfig::from_yaml(&m.admin_kubeconfig()).expect("parse");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("config");
    let client = kube::Client::try_from(config).expect("client");
    let pods: Api<Pod> = Api::namespaced(client, "flux-system");
    let events: Vec<(String, String)> = pods
        .watch(&WatchParams::default().labels("tier=front"), &since)
        .await
        .expect("watch")
        .take(2)
        .map_ok(|event| match event {
            WatchEvent::Added(p) => ("ADDED".into(), p.metadata.name.unwrap_or_default()),
            WatchEvent::Deleted(p) => ("DELETED".into(), p.metadata.name.unwrap_or_default()),
            other => (format!("{other:?}"), String::new()),
        })
        .try_collect()
        .await
        .expect("events");
    assert_eq!(
        events,
        [
            ("ADDED".to_owned(), name.clone()),
            ("DELETED".to_owned(), name)
        ]
    );
}

#[tokio::test]
async fn debug_output_of_a_cluster_shows_no_credentials_or_secret_data() {
    let lab = lab("").await;
    let m = lab.management().expect("management");
    let token = m.issue_token("flux", &["system:masters"]);
    m.create_object(
        "secrets",
        Some("flux-system"),
        json!({"metadata": {"name": "s"}, "data": {"value": "c2VjcmV0LXZhbHVl"}}),
    )
    .expect("secret");
    let debug = format!("{m:?} {lab:?}");
    assert!(!debug.contains(&token), "{debug}");
    assert!(!debug.contains("c2VjcmV0LXZhbHVl"), "{debug}");
    assert!(!debug.contains("PRIVATE KEY"), "{debug}");
}
