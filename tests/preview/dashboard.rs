//! The dashboard's page of a pull request's preview (`capstan run --previews` on the lab
//! forge), read in a real headless Chromium: the comment drawn as HTML, linked from the fleet
//! page, and no serious or critical accessibility violation that axe-core finds, light or dark.

use std::time::Duration;

use capstan_testkit::browser::Browser;
use capstan_testkit::judge::{Judge, axe_script, present};
use capstan_testkit::process::CapstanRun;
use capstan_testkit::wait;
use serde_json::Value;

use crate::daemon::{PROD, fast_fleet, spawn_daemon};
use crate::forge::{Flavour, OnForge};

/// A daemon posting previews, with pull request `#N` open on `scale` (prod to 4 workers), once
/// its preview is on the dashboard; returns the dashboard's URL and `N`.
async fn previewed() -> (OnForge, CapstanRun, String, u64, tempfile::TempDir) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let fleet = fast_fleet();
    fleet.branch("scale", PROD, "replicas: 3", "replicas: 4");
    let on = OnForge::start(fleet).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let mut daemon = spawn_daemon(&on, Flavour::Github, dir.path());
    let pr = on
        .forge
        .open_pull("Scale prod", "scale", "main")
        .expect("pull");
    let url = format!("http://{}", daemon.address());
    wait::on("the preview on the dashboard")
        .every(Duration::from_millis(200))
        .until(async || {
            assert!(daemon.is_running(), "capstan run exited");
            match reqwest::get(format!("{url}/previews/{pr}")).await {
                Ok(response) if response.status() == 200 => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
    (on, daemon, url, pr, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_preview_page_shows_the_comment_and_axe_finds_no_serious_violation() {
    if !present(&[Judge::Chromium, Judge::Axe]) {
        return;
    }
    let (_on, _daemon, url, pr, _dir) = previewed().await;
    let axe = std::fs::read_to_string(axe_script()).expect("axe-core's script");
    tokio::task::spawn_blocking(move || {
        for scheme in [&[][..], &["--force-dark-mode"][..]] {
            let browser = Browser::start_with(1280, 800, scheme);
            browser.open(&format!("{url}/"));
            let linked = browser.run(&format!(
                "return !!document.querySelector('a[href=\"/previews/{pr}\"]');"
            ));
            assert_eq!(
                linked,
                Value::Bool(true),
                "the fleet page links the preview"
            );
            browser.open(&format!("{url}/previews/{pr}"));
            let heading = browser.run("return document.querySelector('h1').textContent;");
            assert_eq!(heading, format!("Preview of pull request #{pr}").as_str());
            let comment =
                browser.run("return document.querySelector('article.comment').innerText;");
            let comment = comment.as_str().unwrap_or_default();
            assert!(
                comment.contains("prod") && !comment.contains("capstan-preview"),
                "the comment, drawn (its marker comment dropped): {comment}"
            );
            let violations = browser.axe_violations(&axe);
            assert!(violations.is_empty(), "{scheme:?}: {violations:#?}");
        }
    })
    .await
    .expect("the browser ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "writes the README's screenshots, docs/src/images/dashboard-preview-*.png: cargo test --test preview dashboard::screenshots -- --ignored"]
async fn screenshots() {
    assert!(present(&[Judge::Chromium]), "chromium and chromedriver");
    let (_on, _daemon, url, pr, _dir) = previewed().await;
    let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/images");
    tokio::task::spawn_blocking(move || {
        for (width, height) in [(1280, 800), (390, 844)] {
            let browser = Browser::start(width, height);
            browser.open(&format!("{url}/previews/{pr}"));
            browser.run(
                "document.querySelectorAll('details').forEach(d => d.open = true); return true;",
            );
            let png = browser.screenshot();
            std::fs::write(docs.join(format!("dashboard-preview-{width}.png")), png)
                .expect("write");
        }
    })
    .await
    .expect("the browser ran");
}
