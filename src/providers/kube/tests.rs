//! Mock API server scenarios (tower-test): the requests the provider sends, method, path and
//! body, and how it reacts to the answers, under paused time so long timeouts cost nothing.

use std::time::Duration;

use http::{Request, Response, StatusCode};
use kube::client::Body;
use serde_json::{Value, json};

use super::{ClusterClient, ClusterError, DrainOptions, KubeClusterClient};
use crate::model::NodeName;

type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

fn client() -> (KubeClusterClient, Handle) {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = KubeClusterClient {
        client: kube::Client::new(service, "default"),
    };
    (client, handle)
}

fn respond(send: tower_test::mock::SendResponse<Response<Body>>, code: u16, body: &Value) {
    let response = Response::builder()
        .status(StatusCode::from_u16(code).expect("status code"))
        .header("content-type", "application/json")
        .body(Body::from(body.to_string().into_bytes()))
        .expect("response");
    send.send_response(response);
}

async fn body_of(request: Request<Body>) -> Value {
    let bytes = request
        .into_body()
        .collect_bytes()
        .await
        .expect("request body");
    serde_json::from_slice(&bytes).expect("JSON body")
}

fn guarded_pod() -> Value {
    json!({
        "apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "7"},
        "items": [{
            "metadata": {"name": "db-0", "namespace": "default", "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "uid": "u1", "controller": true}
            ]},
            "spec": {"containers": []},
        }],
    })
}

fn budget_refusal() -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "Cannot evict pod as it would violate the pod's disruption budget.",
        "reason": "TooManyRequests", "code": 429,
        "details": {"causes": [{"reason": "DisruptionBudget",
            "message": "The disruption budget db needs 1 healthy pods and has 1 currently"}]},
    })
}

#[tokio::test(start_paused = true)]
async fn a_refused_eviction_is_retried_every_interval_until_the_drain_timeout() {
    let (client, mut handle) = client();
    let server = tokio::spawn(async move {
        let (request, send) = handle.next_request().await.expect("cordon");
        assert_eq!(request.method(), http::Method::PATCH);
        assert_eq!(request.uri().path(), "/api/v1/nodes/w1");
        assert_eq!(
            request.headers()["content-type"],
            "application/strategic-merge-patch+json"
        );
        assert_eq!(
            body_of(request).await,
            json!({"spec": {"unschedulable": true}})
        );
        respond(
            send,
            200,
            &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "w1"}}),
        );
        let mut evictions = 0;
        while let Some((request, send)) = handle.next_request().await {
            let path = request.uri().path().to_owned();
            if request.method() == http::Method::GET {
                assert_eq!(path, "/api/v1/pods");
                assert_eq!(
                    request.uri().query(),
                    Some("&fieldSelector=spec.nodeName%3Dw1")
                );
                respond(send, 200, &guarded_pod());
            } else {
                assert_eq!(request.method(), http::Method::POST);
                assert_eq!(path, "/api/v1/namespaces/default/pods/db-0/eviction");
                assert_eq!(body_of(request).await["metadata"]["name"], "db-0");
                evictions += 1;
                respond(send, 429, &budget_refusal());
            }
        }
        evictions
    });
    let started = tokio::time::Instant::now();
    let options = DrainOptions::new(Duration::from_secs(600));
    let err = client
        .drain(&NodeName::from("w1"), &options)
        .await
        .expect_err("the budget never allows it");
    let elapsed = started.elapsed();
    drop(client);
    let evictions = server.await.expect("scenario");
    // One attempt at once, then one every 5 s (kubectl's interval) until the 10 minute drain
    // timeout: 600 / 5 + 1.
    assert_eq!(evictions, 121);
    assert_eq!(elapsed, Duration::from_secs(600));
    assert!(matches!(err, ClusterError::DrainTimedOut { .. }));
    assert_eq!(
        err.to_string(),
        "drain of node w1 timed out after 10m; the node stays cordoned; could not evict: \
         default/db-0 (Cannot evict pod as it would violate the pod's disruption budget. \
         The disruption budget db needs 1 healthy pods and has 1 currently)"
    );
}

#[tokio::test(start_paused = true)]
async fn a_pod_already_gone_counts_as_evicted() {
    let (client, mut handle) = client();
    let server = tokio::spawn(async move {
        let (_, send) = handle.next_request().await.expect("cordon");
        respond(
            send,
            200,
            &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "w1"}}),
        );
        let (_, send) = handle.next_request().await.expect("list");
        respond(send, 200, &guarded_pod());
        let (_, send) = handle.next_request().await.expect("evict");
        respond(
            send,
            404,
            &json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                    "reason": "NotFound", "code": 404, "message": "pods \"db-0\" not found"}),
        );
        let (_, send) = handle.next_request().await.expect("list again");
        respond(
            send,
            200,
            &json!({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": []}),
        );
    });
    let report = client
        .drain(
            &NodeName::from("w1"),
            &DrainOptions::new(Duration::from_secs(60)),
        )
        .await
        .expect("drained");
    server.await.expect("scenario");
    assert_eq!(report.evicted.len(), 1);
    assert_eq!(report.evicted[0].to_string(), "default/db-0");
}

#[tokio::test]
async fn a_kubeconfig_that_does_not_parse_is_refused_without_quoting_it() {
    let token = "sekret-bearer-7f3a9c01d2";
    let key = "LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS0tLS0t";
    // The `client-key-data:` line is mis-indented: the fault sits between the two secrets.
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: admin\nusers:\n- name: admin\n  user:\n    token: {token}\n   client-key-data: {key}\n    username: admin\n"
    );
    let refused = KubeClusterClient::connect(&kubeconfig)
        .await
        .expect_err("not a kubeconfig");
    assert!(matches!(refused, ClusterError::ParseKubeconfig(_)));
    let expiry = super::client_certificate_expiry(&kubeconfig).expect_err("not a kubeconfig");
    for err in [refused, expiry] {
        // The chain as status and logs print it, before any redaction of remembered values.
        let chain = capstan_core::errors::error_chain(&err);
        assert_eq!(
            chain,
            "cannot parse the kubeconfig: the kubeconfig is malformed at line 8 column 4: while parsing a block mapping, did not find expected key"
        );
        assert!(!chain.contains(token) && !chain.contains(key), "{chain}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_drain_stops_at_the_next_round_once_its_replica_no_longer_leads() {
    use std::sync::Arc;

    use crate::fence::{Fence, Switch};

    let licence = Switch::on();
    let (client, mut handle) = client();
    let lost = Arc::clone(&licence);
    let server = tokio::spawn(async move {
        let (_, send) = handle.next_request().await.expect("cordon");
        respond(
            send,
            200,
            &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "w1"}}),
        );
        let mut evictions = 0;
        while let Some((request, send)) = handle.next_request().await {
            if request.method() == http::Method::GET {
                respond(send, 200, &guarded_pod());
            } else {
                evictions += 1;
                if evictions == 3 {
                    // The Lease is lost while the third round waits on its answer.
                    lost.end();
                }
                respond(send, 429, &budget_refusal());
            }
        }
        evictions
    });
    let options = DrainOptions::new(Duration::from_secs(600)).fenced(Fence::new(licence.clone()));
    let err = client
        .drain(&NodeName::from("w1"), &options)
        .await
        .expect_err("stopped");
    drop(client);
    let evictions = server.await.expect("scenario");
    assert_eq!(evictions, 3, "no eviction after the Lease was lost");
    assert!(matches!(err, ClusterError::NotLeading(_)), "{err:?}");
    assert!(
        crate::errors::error_chain(&err).contains("this replica no longer leads"),
        "{}",
        crate::errors::error_chain(&err)
    );
}
