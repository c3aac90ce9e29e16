//! The lab forge judged against GitHub's published OpenAPI description
//! (`tests/data/github-api-subset.json`): every answer of the endpoints previews use validates
//! against the response schema of its operation (required fields, types, enums), under
//! GitHub's, GitHub Enterprise's and Gitea's prefixes, and a request without the token gets 401.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::forge::{NAME, OWNER, OnForge, TOKEN, reference};

/// The response schema GitHub documents for `method path` answering `status`, as a JSON
/// Schema (OpenAPI 3.0's `nullable` turned into a `null` alternative).
fn response_schema(api: &Value, path: &str, method: &str, status: u16) -> Value {
    let schema = &api["paths"][path][method]["responses"][status.to_string()]["content"]["application/json"]
        ["schema"];
    assert!(schema.is_object(), "no schema for {method} {path} {status}");
    json_schema(schema)
}

fn json_schema(openapi: &Value) -> Value {
    match openapi {
        Value::Object(map) => {
            let mut out: serde_json::Map<String, Value> = map
                .iter()
                .filter(|(key, _)| *key != "nullable" && *key != "format")
                .map(|(key, value)| (key.clone(), json_schema(value)))
                .collect();
            if map.get("nullable") == Some(&Value::Bool(true)) {
                if let Some(Value::String(kind)) = out.get("type").cloned() {
                    out.insert("type".into(), json!([kind, "null"]));
                    if let Some(Value::Array(values)) = out.get_mut("enum") {
                        values.push(Value::Null);
                    }
                } else {
                    return json!({"anyOf": [Value::Object(out), {"type": "null"}]});
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(json_schema).collect()),
        other => other.clone(),
    }
}

fn check(api: &Value, path: &str, method: &str, status: u16, answer: &Value) {
    let schema = response_schema(api, path, method, status);
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(answer)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .take(10)
        .collect();
    assert!(
        errors.is_empty(),
        "{method} {path}: the answer does not match GitHub's schema:\n{}",
        errors.join("\n")
    );
}

struct Client {
    http: reqwest::Client,
    base: String,
}

impl Client {
    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("Authorization", format!("token {TOKEN}"));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("the forge answers");
        let status = response.status();
        let text = response.text().await.expect("a body");
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_matches_githubs_published_schema() {
    let api: Value =
        serde_json::from_str(&std::fs::read_to_string(reference()).expect("the reference"))
            .expect("JSON");
    let (on, pr, head) = OnForge::scale_pull().await;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    for prefix in ["", "/api/v3", "/api/v1"] {
        let client = Client {
            http: http.clone(),
            base: format!("{}{prefix}/repos/{OWNER}/{NAME}", on.forge.http_url()),
        };
        let repo = "/repos/{owner}/{repo}";
        let (status, pulls) = client.call(Method::GET, "/pulls?state=open", None).await;
        assert_eq!(status, 200);
        check(&api, &format!("{repo}/pulls"), "get", 200, &pulls);
        assert_eq!(pulls[0]["head"]["sha"], head);
        assert_eq!(pulls[0]["head"]["ref"], "scale");
        let (_, pull) = client
            .call(Method::GET, &format!("/pulls/{pr}"), None)
            .await;
        check(
            &api,
            &format!("{repo}/pulls/{{pull_number}}"),
            "get",
            200,
            &pull,
        );

        let comments = format!("{repo}/issues/{{issue_number}}/comments");
        let (status, created) = client
            .call(
                Method::POST,
                &format!("/issues/{pr}/comments"),
                Some(json!({"body": "first"})),
            )
            .await;
        assert_eq!(status, 201);
        check(&api, &comments, "post", 201, &created);
        let id = created["id"].as_u64().expect("an id");
        let one = format!("{repo}/issues/comments/{{comment_id}}");
        let (status, edited) = client
            .call(
                Method::PATCH,
                &format!("/issues/comments/{id}"),
                Some(json!({"body": "second"})),
            )
            .await;
        assert_eq!(status, 200);
        check(&api, &one, "patch", 200, &edited);
        let (_, got) = client
            .call(Method::GET, &format!("/issues/comments/{id}"), None)
            .await;
        check(&api, &one, "get", 200, &got);
        assert_eq!(got["body"], "second");
        let (_, listed) = client
            .call(Method::GET, &format!("/issues/{pr}/comments"), None)
            .await;
        check(&api, &comments, "get", 200, &listed);

        let (status, set) = client
            .call(
                Method::POST,
                &format!("/statuses/{head}"),
                Some(
                    json!({"state": "success", "context": "capstan/preview", "description": "ok"}),
                ),
            )
            .await;
        assert_eq!(status, 201);
        check(&api, &format!("{repo}/statuses/{{sha}}"), "post", 201, &set);
        let (_, statuses) = client
            .call(Method::GET, &format!("/commits/{head}/statuses"), None)
            .await;
        check(
            &api,
            &format!("{repo}/commits/{{ref}}/statuses"),
            "get",
            200,
            &statuses,
        );
        assert_eq!(statuses[0]["state"], "success");
        let (status, _) = client
            .call(
                Method::POST,
                &format!("/statuses/{head}"),
                Some(json!({"state": "fine"})),
            )
            .await;
        assert_eq!(status, 422, "a state outside the enum is refused");
    }
    let anonymous = http
        .get(format!(
            "{}/api/v3/repos/{OWNER}/{NAME}/pulls",
            on.forge.http_url()
        ))
        .send()
        .await
        .expect("answer");
    assert_eq!(anonymous.status(), 401);
}
