//! Notifications from the whole daemon on the lab: a cluster made Blocked by a failing clone
//! fires `CapstanClusterBlocked` in a real Alertmanager (read back with `amtool`), which
//! resolves once the fault is cleared; a Slack receiver answering `429 Retry-After: 2` gets
//! the event once, not before the 2 s, while passes go on; the generic payload's signature is
//! checked by Python's `hmac`, independently of capstan.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use capstan::notify::NotifyOptions;
use capstan::secrets::{SecretPolicy, SecretReader};
use capstan::status::Phase;
use capstan_testkit::judge::{self, Judge};
use capstan_testkit::world::Setup;
use capstan_testkit::{PATIENCE, World, cluster_yaml, fleet_yaml};
use tokio::time::Instant;

/// The path of the Slack receiver's URL: the credential a real webhook carries.
const WEBHOOK_PATH: &str = "/services/T0CAPSTAN/B0CAPSTAN/webhook-token-0123456789";
const SIGNING_KEY: &str = "generic-signing-key-9876543210";

/// A real Alertmanager on a loopback port, with its own configuration and storage.
struct Alertmanager {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Alertmanager {
    fn start() -> Alertmanager {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = dir.path().join("alertmanager.yml");
        std::fs::write(
            &config,
            "route: {receiver: blackhole}\nreceivers: [{name: blackhole}]\n",
        )
        .expect("config");
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let url = format!("http://127.0.0.1:{port}");
        let child = Command::new("/usr/bin/prometheus-alertmanager")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.path={}", dir.path().display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            // A single instance: no gossip port.
            .arg("--cluster.listen-address=")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("alertmanager starts");
        Alertmanager {
            child,
            url,
            _dir: dir,
        }
    }

    async fn ready(&self) {
        let client = reqwest::Client::new();
        let started = Instant::now();
        while !client
            .get(format!("{}/-/ready", self.url))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            assert!(started.elapsed() < PATIENCE, "alertmanager never ready");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The active alerts named `alertname`, as the Alertmanager's API holds them.
    async fn active(&self, alertname: &str) -> Vec<serde_json::Value> {
        let answer = reqwest::Client::new()
            .get(format!(
                "{}/api/v2/alerts?active=true&silenced=false&inhibited=false",
                self.url
            ))
            .send()
            .await
            .expect("alertmanager answers");
        let alerts: Vec<serde_json::Value> = answer.json().await.expect("alerts JSON");
        alerts
            .into_iter()
            .filter(|a| a["labels"]["alertname"] == alertname)
            .collect()
    }

    /// What `amtool alert query` says of `alertname`, as JSON.
    fn amtool(&self, alertname: &str) -> Vec<serde_json::Value> {
        let out = Command::new("amtool")
            .args([
                "alert",
                "query",
                "--output=json",
                &format!("--alertmanager.url={}", self.url),
                &format!("alertname={alertname}"),
            ])
            .output()
            .expect("amtool runs");
        assert!(
            out.status.success(),
            "amtool: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("amtool's JSON")
    }
}

impl Drop for Alertmanager {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A request a receiver got.
#[derive(Debug, Clone)]
struct Received {
    at: Instant,
    passes: u64,
    headers: axum::http::HeaderMap,
    body: String,
    answered: u16,
}

/// A webhook receiver on loopback answering its first request `first`, then 200.
async fn receiver(
    first: Option<(u16, &'static str)>,
    passes: Arc<dyn Fn() -> u64 + Send + Sync>,
) -> (String, Arc<Mutex<Vec<Received>>>) {
    let got: Arc<Mutex<Vec<Received>>> = Arc::default();
    let kept = Arc::clone(&got);
    let app = axum::Router::new().fallback(move |headers: axum::http::HeaderMap, body: String| {
        let kept = Arc::clone(&kept);
        let passes = Arc::clone(&passes);
        async move {
            let mut kept = kept.lock().expect("received");
            let (status, retry_after) = match (kept.is_empty(), first) {
                (true, Some((status, after))) => (status, Some(after)),
                _ => (200, None),
            };
            kept.push(Received {
                at: Instant::now(),
                passes: passes(),
                headers,
                body,
                answered: status,
            });
            let mut response = axum::response::Response::new(axum::body::Body::from("ok"));
            *response.status_mut() = axum::http::StatusCode::from_u16(status).expect("status");
            if let Some(after) = retry_after {
                response
                    .headers_mut()
                    .insert("retry-after", after.parse().expect("header"));
            }
            response
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!(
        "http://{}{WEBHOOK_PATH}",
        listener.local_addr().expect("address")
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, got)
}

fn notifications() -> &'static str {
    "notifications:
  providers:
    am: {type: alertmanager, addressFrom: {env: CAPSTAN_NOTIFICATION_AM_ADDRESS}}
    chat: {type: slack, addressFrom: {env: CAPSTAN_NOTIFICATION_CHAT_ADDRESS}}
    hook:
      type: generic
      addressFrom: {env: CAPSTAN_NOTIFICATION_HOOK_ADDRESS}
      signingKeyFrom: {env: CAPSTAN_NOTIFICATION_HOOK_SIGNING_KEY}
  alerts:
    - providers: [am]
    - providers: [chat, hook]
      severity: error
      clusters: [edge]
      kinds: [ClusterBlocked]
"
}

/// Python's `hmac` says whether `signature` is HMAC-SHA256 of `body` under the key.
fn python_verifies(body: &str, signature: &str) -> bool {
    let script = "import hmac, hashlib, sys\nkey, sig = sys.argv[1].encode(), sys.argv[2]\nbody = sys.stdin.buffer.read()\nok = hmac.compare_digest('sha256=' + hmac.new(key, body, hashlib.sha256).hexdigest(), sig)\nsys.exit(0 if ok else 1)\n";
    let mut child = Command::new("/usr/bin/python3")
        .args(["-c", script, SIGNING_KEY, signature])
        .stdin(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    use std::io::Write as _;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(body.as_bytes())
        .expect("body written");
    child.wait().expect("python3 ends").success()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_cluster_fires_in_alertmanager_reaches_slack_past_its_retry_after_and_resolves() {
    if !judge::present(&[Judge::Alertmanager]) {
        return;
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let alertmanager = Alertmanager::start();
    alertmanager.ready().await;

    let mut world = World::new(
        &format!("{}{}", fleet_yaml(&["1.36"], false), notifications()),
        &[(
            "edge",
            cluster_yaml("edge", 31, "1.36.2", 2, "debian13-k8s"),
        )],
    )
    .await;
    // Every clone fails until the fault is cleared.
    world
        .lab
        .faults()
        .fail_tasks("qmclone", u32::MAX, "storage local-lvm: no space left");
    let passes_seen: Arc<Mutex<Option<Arc<capstan::daemon::StatusBoard>>>> = Arc::default();
    let board_of = Arc::clone(&passes_seen);
    let passes: Arc<dyn Fn() -> u64 + Send + Sync> = Arc::new(move || {
        board_of
            .lock()
            .expect("board")
            .as_ref()
            .map_or(0, |b| b.counters().passes)
    });
    let (slack_url, slack) = receiver(Some((429, "2")), Arc::clone(&passes)).await;
    let (hook_url, hook) = receiver(None, Arc::clone(&passes)).await;
    let env = BTreeMap::from([
        (
            "CAPSTAN_NOTIFICATION_AM_ADDRESS".to_owned(),
            alertmanager.url.clone(),
        ),
        (
            "CAPSTAN_NOTIFICATION_CHAT_ADDRESS".to_owned(),
            slack_url.clone(),
        ),
        (
            "CAPSTAN_NOTIFICATION_HOOK_ADDRESS".to_owned(),
            hook_url.clone(),
        ),
        (
            "CAPSTAN_NOTIFICATION_HOOK_SIGNING_KEY".to_owned(),
            SIGNING_KEY.to_owned(),
        ),
    ]);
    world.secret_reader = SecretReader::new(Arc::new(SecretPolicy::default()), move |name| {
        env.get(name).cloned()
    });
    world
        .start_daemon_as(
            Setup::folder().notify(NotifyOptions {
                resend: Duration::from_secs(1),
                ..NotifyOptions::default()
            }),
            |connections| connections,
        )
        .await;
    *passes_seen.lock().expect("board") = Some(world.board());

    world
        .wait_for("edge Blocked", |s| {
            s.clusters
                .get("edge")
                .is_some_and(|c| c.phase == Phase::Blocked)
        })
        .await;
    let blocked_at = world.passes();
    // The real Alertmanager holds the alert within two passes of the status saying Blocked.
    let started = Instant::now();
    loop {
        let active = alertmanager.active("CapstanClusterBlocked").await;
        let passes_now = world.passes();
        if !active.is_empty() {
            assert!(
                passes_now <= blocked_at + 2,
                "fired after {} passes",
                passes_now - blocked_at
            );
            break;
        }
        assert!(started.elapsed() < PATIENCE, "the alert never fired");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let queried = alertmanager.amtool("CapstanClusterBlocked");
    assert_eq!(queried.len(), 1, "{queried:?}");
    assert_eq!(queried[0]["labels"]["cluster"], "edge");
    assert_eq!(queried[0]["labels"]["severity"], "error");
    assert!(
        queried[0]["annotations"]["summary"]
            .as_str()
            .is_some_and(|s| s.contains("no space left")),
        "{}",
        queried[0]
    );

    // Slack: the 429, then the same message once, not before Retry-After; passes went on.
    let started = Instant::now();
    while slack.lock().expect("received").len() < 2 {
        assert!(started.elapsed() < PATIENCE, "slack never got the retry");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let got = slack.lock().expect("received").clone();
    assert_eq!(
        got.iter().map(|r| r.answered).collect::<Vec<_>>(),
        [429, 200],
        "the event arrives exactly once"
    );
    assert!(
        got[1].at.duration_since(got[0].at) >= Duration::from_secs(2),
        "retried {:?} after the 429",
        got[1].at.duration_since(got[0].at)
    );
    assert!(
        got[1].passes > got[0].passes,
        "passes go on while the notification waits: {} then {}",
        got[0].passes,
        got[1].passes
    );
    let body: serde_json::Value = serde_json::from_str(&got[1].body).expect("Slack JSON");
    assert!(
        body["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("edge: ClusterBlocked"))
    );
    for request in got.iter().chain(hook.lock().expect("hook").iter()) {
        for secret in [
            WEBHOOK_PATH,
            SIGNING_KEY,
            slack_url.as_str(),
            hook_url.as_str(),
        ] {
            assert!(
                !request.body.contains(secret),
                "{secret} sent: {}",
                request.body
            );
        }
    }

    // The generic receiver: one signed message, verified by Python's hmac.
    let signed = hook.lock().expect("hook").clone();
    assert_eq!(signed.len(), 1, "{signed:?}");
    let signature = signed[0]
        .headers
        .get("x-signature")
        .and_then(|v| v.to_str().ok())
        .expect("signed");
    assert!(
        python_verifies(&signed[0].body, signature),
        "python3 hmac refuses {signature}"
    );
    assert!(!python_verifies(&format!("{} ", signed[0].body), signature));

    // The fault cleared, the clone goes through and the alert resolves.
    world.lab.faults().clear_tasks("qmclone");
    world
        .wait_for("edge no longer Blocked", |s| {
            s.clusters
                .get("edge")
                .is_some_and(|c| c.phase != Phase::Blocked)
        })
        .await;
    let started = Instant::now();
    while !alertmanager.amtool("CapstanClusterBlocked").is_empty() {
        assert!(started.elapsed() < PATIENCE, "the alert never resolved");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let metrics = world.board().metrics().encode();
    assert!(
        metrics.contains("capstan_notifications_total{provider=\"chat\",outcome=\"sent\"} 1"),
        "{metrics}"
    );
}
