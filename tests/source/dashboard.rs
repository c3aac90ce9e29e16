//! The dashboard in a real browser (Debian's headless Chromium through chromedriver), on
//! `capstan demo`: every cluster Ready on the fleet page; a `git push` scaling prod shows on
//! prod's card (the new worker joining, then Ready) without a reload; prod's page then has the
//! `create-machine`, `prepare-node` and `join-node` bars of that worker, with their durations.
//! axe-core, run in that browser, finds no serious or critical accessibility violation on the
//! fleet page, a cluster page or the not-found page, in the light scheme and the dark one.

use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use capstan_testkit::browser::Browser;
use capstan_testkit::git;
use capstan_testkit::judge::{Judge, axe_script, present};
use capstan_testkit::process::{Spawned, http_request};
use serde_json::Value;

/// `capstan demo`, once its walkthrough is printed (every cluster Ready).
struct Demo {
    _child: Spawned,
    /// The walkthrough's clone.
    clone: std::path::PathBuf,
    /// The dashboard's address.
    http: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Demo {
    fn start() -> Demo {
        let dir = tempfile::tempdir().expect("temp dir");
        let child = Command::new(env!("CARGO_BIN_EXE_capstan"))
            .args(["demo", "--http", "127.0.0.1:0"])
            .arg("--state-dir")
            .arg(dir.path().join("demo"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("capstan demo starts");
        let mut child = Spawned(child);
        let stdout = child.0.stdout.take().expect("stdout");
        let (lines, printed) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        let mut seen = String::new();
        let deadline = Instant::now() + Duration::from_secs(120);
        while !seen.contains("  git push") {
            let line = printed
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .unwrap_or_else(|_| panic!("the demo prints its walkthrough:\n{seen}"));
            seen.push_str(&line);
            seen.push('\n');
        }
        let clone = seen
            .lines()
            .find_map(|l| l.trim().strip_prefix("cd "))
            .expect("a `cd CLONE` line")
            .into();
        let http = seen
            .lines()
            .find_map(|l| l.trim().strip_prefix("dashboard:  http://"))
            .and_then(|rest| rest.split('/').next())
            .and_then(|address| address.parse().ok())
            .unwrap_or_else(|| panic!("the demo prints the dashboard's address:\n{seen}"));
        Demo {
            _child: child,
            clone,
            http,
            _dir: dir,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.http)
    }

    /// prod's node names, as `/status` says.
    fn prod_nodes(&self) -> Vec<String> {
        let (_, body) = http_request(self.http, "GET", "/status", &[], b"");
        let status: Value = serde_json::from_str(&body).unwrap_or_default();
        status["clusters"]["prod"]["nodes"]
            .as_array()
            .map(|nodes| {
                nodes
                    .iter()
                    .filter_map(|n| n["name"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Edits prod to 4 workers (it has 3), commits and pushes, as the walkthrough says.
    fn push_four_workers(&self) {
        let prod = self.clone.join("clusters/prod.yaml");
        let text = std::fs::read_to_string(&prod).expect("prod.yaml");
        let edited = text.replacen("      replicas: 3", "      replicas: 4", 1);
        assert_ne!(edited, text, "the walkthrough's line is in prod.yaml");
        std::fs::write(&prod, edited).expect("edit");
        git(&self.clone, &["commit", "-q", "-am", "prod: 4 workers"]);
        git(&self.clone, &["push", "-q"]);
    }
}

/// Every card of the fleet page, as `[name, phase attribute, phase text]`.
const CARDS: &str = r"
return [...document.querySelectorAll('article.card')].map(card => [
  card.dataset.cluster, card.dataset.phase, card.querySelector('.phase').textContent.trim()
]);";

/// Records prod's card each time the page's `<main>` is swapped, and marks the page: a reload
/// would lose the mark.
const RECORD_PROD: &str = r"
window.capstanSamePage = true;
window.prodCards = [];
new MutationObserver(() => {
  const card = document.querySelector('article.card[data-cluster=prod]');
  if (card) {
    window.prodCards.push(card.dataset.phase + ' | ' + card.querySelector('dd.nodes').textContent.trim());
  }
}).observe(document.body, { childList: true, subtree: true });
return true;";

/// prod's card, once it is Ready with its five nodes, on the page marked by [`RECORD_PROD`].
const PROD_READY_WITH_FIVE: &str = r"
const card = document.querySelector('article.card[data-cluster=prod]');
const nodes = card ? card.querySelector('dd.nodes').textContent.trim() : '';
if (!window.capstanSamePage) { return 'reloaded'; }
return card && card.dataset.phase === 'Ready' && nodes.startsWith('5 of 5 declared')
  ? window.prodCards : null;";

/// The rows of the timeline's table: `[step, machine, started, duration, result]`.
const TIMELINE_ROWS: &str = r"
return [...document.querySelectorAll('table.steps tbody tr')]
  .map(row => [...row.cells].map(cell => cell.textContent.trim()));";

/// The timeline's bars: `[action, label]`.
const TIMELINE_BARS: &str = r"
return [...document.querySelectorAll('.timeline li.bar')]
  .map(bar => [bar.dataset.action, bar.querySelector('.bar-label').textContent.trim()]);";

fn strings(value: &Value) -> Vec<Vec<String>> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .map(|row| {
            row.as_array()
                .into_iter()
                .flatten()
                .map(|cell| cell.as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .collect()
}

/// Whether `text` is a duration as the dashboard writes one (`850 ms`, `42 s`, `3 min 05 s`).
fn is_duration(text: &str) -> bool {
    let text = text.trim();
    (text.ends_with(" ms") || text.ends_with(" s") || text.ends_with(" min"))
        && text.starts_with(|c: char| c.is_ascii_digit())
}

#[test]
fn the_dashboard_shows_the_demo_and_a_scale_up_live_in_a_real_browser() {
    if !present(&[Judge::Chromium]) {
        return;
    }
    let demo = Demo::start();
    let browser = Browser::start(1280, 800);
    browser.open(&demo.url("/"));
    let cards = strings(&browser.run(CARDS));
    assert_eq!(
        cards.iter().map(|c| c[0].as_str()).collect::<Vec<_>>(),
        ["edge", "platform", "prod", "talos"],
        "a card per cluster: {cards:?}"
    );
    for card in &cards {
        assert_eq!(card[1], "Ready", "{card:?}");
        assert_eq!(card[2], "✓ Ready", "the phase in words too: {card:?}");
    }

    let before = demo.prod_nodes();
    browser.run(RECORD_PROD);
    demo.push_four_workers();
    let seen: Vec<String> = browser
        .wait_for(
            "prod's card Ready with 5 nodes, without a reload",
            PROD_READY_WITH_FIVE,
        )
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_owned))
        .collect();
    assert!(
        seen.iter().any(|card| card.contains("of 5 declared")
            && !card.contains("5 of 5")
            && card.contains("not Ready yet")),
        "the card showed the new worker joining before it was Ready: {seen:#?}"
    );
    let after = demo.prod_nodes();
    let new: Vec<&String> = after.iter().filter(|n| !before.contains(n)).collect();
    assert_eq!(new.len(), 1, "one new worker: {before:?} → {after:?}");
    let worker = new[0].as_str();

    browser.open(&demo.url("/clusters/prod"));
    let rows = strings(&browser.run(TIMELINE_ROWS));
    let bars = strings(&browser.run(TIMELINE_BARS));
    for action in ["create-machine", "prepare-node", "join-node"] {
        let row = rows
            .iter()
            .find(|row| row[0] == action && row[1] == worker)
            .unwrap_or_else(|| panic!("a {action} row for {worker}: {rows:#?}"));
        assert!(is_duration(&row[3]), "{action} has a duration: {row:?}");
        assert_eq!(row[4], "✓ succeeded", "{row:?}");
        let bar = bars
            .iter()
            .find(|bar| bar[0] == action && bar[1].contains(worker))
            .unwrap_or_else(|| panic!("a {action} bar for {worker}: {bars:#?}"));
        assert!(
            bar[1].contains(&format!("· {} ·", row[3])),
            "the bar says the duration: {bar:?}"
        );
    }
    // Under the Content-Security-Policy (no inline style), the stylesheet alone places the
    // bars and the "now" line.
    let placed = browser.run(TIMELINE_PLACED);
    assert_eq!(placed["inlineStyles"], 0, "{placed}");
    assert!(
        placed["nowLeft"].as_f64().is_some_and(|left| left > 0.0),
        "the now line is placed: {placed}"
    );
    assert!(
        placed["barsMoved"].as_u64().is_some_and(|moved| moved > 0),
        "bars start where their steps started: {placed}"
    );
}

/// How the timeline is laid out: elements with a `style` attribute, the "now" line's left
/// offset (px), and bars whose fill starts right of the track's start.
const TIMELINE_PLACED: &str = "
const now = document.querySelector('.timeline .now');
const fills = [...document.querySelectorAll('.timeline .bar-fill')];
return {
  inlineStyles: document.querySelectorAll('[style]').length,
  nowLeft: now ? parseFloat(getComputedStyle(now).left) : null,
  barsMoved: fills.filter(fill => parseFloat(getComputedStyle(fill).marginLeft) > 0).length,
};";

#[test]
fn axe_finds_no_serious_accessibility_violation_on_the_pages_light_or_dark() {
    if !present(&[Judge::Chromium, Judge::Axe]) {
        return;
    }
    let axe = std::fs::read_to_string(axe_script()).expect("axe-core's script");
    let demo = Demo::start();
    for scheme in [&[][..], &["--force-dark-mode"][..]] {
        let browser = Browser::start_with(1280, 800, scheme);
        for path in ["/", "/clusters/prod", "/clusters/no-such-cluster"] {
            browser.open(&demo.url(path));
            let dark = browser.run("return matchMedia('(prefers-color-scheme: dark)').matches;");
            assert_eq!(
                dark,
                Value::Bool(!scheme.is_empty()),
                "{path} in {scheme:?}"
            );
            let violations = browser.axe_violations(&axe);
            assert!(
                violations.is_empty(),
                "{path} ({}): {violations:#?}",
                if scheme.is_empty() { "light" } else { "dark" }
            );
        }
        // The judge judges: an image with no text alternative is a critical violation.
        browser.run("document.querySelector('main').insertAdjacentHTML('beforeend', '<img src=\"data:,\">'); return true;");
        let violations = browser.axe_violations(&axe);
        assert!(
            violations.iter().any(|v| v.contains("image-alt")),
            "axe sees a planted violation: {violations:#?}"
        );
    }
}

/// The page in the middle of a rollout: a step in flight and predicted ones ahead.
const MID_ROLLOUT: &str = r"
return document.querySelector('.timeline .bar.running') && document.querySelector('.timeline .bar.predicted')
  ? true : null;";

#[test]
#[ignore = "writes the README's screenshots, docs/src/images/dashboard-*.png: cargo test --test source dashboard::screenshots -- --ignored"]
fn screenshots() {
    assert!(present(&[Judge::Chromium]), "chromium and chromedriver");
    let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/images");
    std::fs::create_dir_all(&docs).expect("docs/src/images/");
    let demo = Demo::start();
    let sizes = [(1280, 800), (390, 844)];
    for (width, height) in sizes {
        let browser = Browser::start(width, height);
        browser.open(&demo.url("/"));
        let png = browser.screenshot();
        std::fs::write(docs.join(format!("dashboard-fleet-{width}.png")), png).expect("write");
    }
    // Every worker of prod replaced (new before old): a rollout long enough to be caught.
    let browsers: Vec<Browser> = sizes
        .iter()
        .map(|(width, height)| {
            let browser = Browser::start(*width, *height);
            browser.open(&demo.url("/clusters/prod"));
            browser
        })
        .collect();
    let prod = demo.clone.join("clusters/prod.yaml");
    let text = std::fs::read_to_string(&prod).expect("prod.yaml");
    let edited = text.replacen(
        "machine: {template: debian13-k8s, cores: 4",
        "machine: {template: debian13-k8s-v2, cores: 4",
        1,
    );
    assert_ne!(edited, text, "prod's workers name their template");
    std::fs::write(&prod, edited).expect("edit");
    git(
        &demo.clone,
        &["commit", "-q", "-am", "prod: workers on the v2 template"],
    );
    git(&demo.clone, &["push", "-q"]);
    for ((width, _), browser) in sizes.iter().zip(&browsers) {
        browser.wait_for("prod mid-rollout", MID_ROLLOUT);
        browser.run("document.getElementById('timeline-title').scrollIntoView(); return true;");
        let png = browser.screenshot();
        std::fs::write(docs.join(format!("dashboard-cluster-{width}.png")), png).expect("write");
    }
}
