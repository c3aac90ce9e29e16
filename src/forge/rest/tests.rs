//! [`RestForge`] against forges that misbehave, served on loopback: redirects are not
//! followed (the token stays with the forge it was given for), answers are read up to a
//! limit, listings up to a number of pages.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode, header};

use super::*;

/// Serves `router` over HTTP on loopback; returns the base URL (`http://127.0.0.1:PORT`).
async fn serve(router: axum::Router) -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("address").port();
    let task = tokio::spawn(async move {
        axum::serve(listener, router).await.expect("serve");
    });
    (format!("http://127.0.0.1:{port}"), task)
}

fn forge(kind: ForgeKind, api_url: &str) -> RestForge {
    let target = ForgeTarget {
        kind,
        api_url: api_url.to_owned(),
        repository: "acme/fleet".to_owned(),
        token: "forge-70ken-s3cret".to_owned(),
    };
    let retry = RetryPolicy {
        attempts: 1,
        max_wait: Duration::from_secs(1),
        first_wait: Duration::from_millis(10),
    };
    RestForge::new(&target, retry).expect("client")
}

/// Every token header a request to another host carried.
type LeakedHeaders = Arc<Mutex<Vec<String>>>;

#[tokio::test]
async fn a_redirect_to_another_host_is_not_followed_and_no_token_goes_there() {
    // GitLab first: reqwest drops `Authorization` on its own when it follows a redirect to
    // another host, but not `PRIVATE-TOKEN`.
    for kind in [ForgeKind::Gitlab, ForgeKind::Github] {
        let seen: LeakedHeaders = Arc::default();
        let record = Arc::clone(&seen);
        let elsewhere = axum::Router::new().fallback(move |headers: HeaderMap| {
            let tokens: Vec<String> = ["private-token", "authorization"]
                .iter()
                .filter_map(|name| headers.get(*name))
                .map(|v| v.to_str().unwrap_or_default().to_owned())
                .collect();
            record.lock().expect("seen").push(tokens.join(" "));
            async { "[]" }
        });
        let (other, _other_task) = serve(elsewhere).await;
        // Another host name for the same address: another host, as far as HTTP is concerned.
        let other = other.replace("127.0.0.1", "localhost");
        let redirecting = axum::Router::new().fallback(move |uri: axum::http::Uri| {
            let location = format!("{other}{uri}");
            async move { (StatusCode::FOUND, [(header::LOCATION, location)], "") }
        });
        let (url, _task) = serve(redirecting).await;
        let result = forge(kind, &url).open_pulls().await;
        assert!(
            seen.lock().expect("seen").is_empty(),
            "{kind:?}: the redirect was followed, carrying {:?}",
            seen.lock().expect("seen")
        );
        let err = result.expect_err("a redirect is refused");
        let text = crate::errors::error_chain(&err);
        assert!(
            text.contains("302") && text.contains("does not follow"),
            "{text}"
        );
        assert!(!text.contains("s3cret"), "{text}");
    }
}

#[tokio::test]
async fn a_listing_that_never_ends_stops_after_the_page_limit() {
    let requests = Arc::new(Mutex::new(0_usize));
    let count = Arc::clone(&requests);
    // Always a full page, and GitLab's header always names the next one.
    let endless = axum::Router::new().fallback(move |uri: axum::http::Uri| {
        *count.lock().expect("count") += 1;
        let page: usize = uri
            .query()
            .unwrap_or_default()
            .split('&')
            .find_map(|pair| pair.strip_prefix("page="))
            .and_then(|page| page.parse().ok())
            .unwrap_or(1);
        let comments: Vec<serde_json::Value> = (0..PER_PAGE)
            .map(|i| serde_json::json!({"id": page * PER_PAGE + i, "body": "x"}))
            .collect();
        async move {
            (
                [("x-next-page", (page + 1).to_string())],
                axum::Json(comments),
            )
        }
    });
    let (url, _task) = serve(endless).await;
    for kind in [ForgeKind::Github, ForgeKind::Gitlab] {
        *requests.lock().expect("count") = 0;
        let err = forge(kind, &url).comments(7).await.expect_err("refused");
        assert!(
            matches!(
                err,
                ForgeError::TooManyPages {
                    pages: MAX_PAGES,
                    ..
                }
            ),
            "{kind:?}: {err:?}"
        );
        assert_eq!(*requests.lock().expect("count"), MAX_PAGES, "{kind:?}");
        assert!(!err.is_transient());
    }
}

#[tokio::test]
async fn an_endless_answer_is_refused_at_the_body_limit() {
    let (url, _task) = serve(crate::http_client::endless_answers()).await;
    let err = forge(ForgeKind::Github, &url)
        .pull(7)
        .await
        .expect_err("refused");
    assert!(matches!(err, ForgeError::TooLarge { .. }), "{err:?}");
    assert_eq!(
        crate::errors::error_chain(&err),
        "read pull request #7: refused the forge's answer: the answer is larger than 32 MiB"
    );
}
