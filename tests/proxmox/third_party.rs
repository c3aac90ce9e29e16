//! Third-party clients against the simulated Proxmox: `curl` with the token, form-encoded and
//! JSON bodies, multipart uploads, error answers as a real host gives them; Debian's
//! `python3-proxmoxer` listing nodes and VMs, cloning, and uploading an ISO image. These tests fail (never skip) when a client is missing: CI
//! installs them (`.ci/run`).

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use crate::proxmox_support::{SECRET, TOKEN_ID, fast_world, iso_world, start_with};
use capstan_lab::proxmox::DefaultShell;
use capstan_testkit::judge::{self, Judge};

struct Curl {
    url: String,
    ca: PathBuf,
    _dir: tempfile::TempDir,
}

impl Curl {
    fn new(sim: &capstan_lab::proxmox::SimProxmox) -> Self {
        let dir = tempfile::tempdir().expect("dir");
        let ca = dir.path().join("pve.pem");
        std::fs::write(&ca, sim.certificate_pem()).expect("write cert");
        Curl {
            url: format!("{}/api2/json", sim.url()),
            ca,
            _dir: dir,
        }
    }

    /// Runs curl with the token; returns (status line, body).
    async fn run(&self, secret: &str, args: &[&str], path: &str) -> (String, String) {
        let mut command = Command::new("curl");
        command
            .args(["-sS", "-i", "--cacert"])
            .arg(&self.ca)
            .arg("-H")
            .arg(format!("Authorization: PVEAPIToken={TOKEN_ID}={secret}"))
            .args(args)
            .arg(format!("{}{path}", self.url));
        let output = tokio::task::spawn_blocking(move || command.output())
            .await
            .expect("join")
            .expect("curl is installed (apt-get install curl)");
        assert!(
            output.status.success(),
            "curl failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let text = String::from_utf8_lossy(&output.stdout).replace("\r\n", "\n");
        let (head, body) = text.split_once("\n\n").unwrap_or((&text, ""));
        (
            head.lines().next().unwrap_or_default().to_owned(),
            body.to_owned(),
        )
    }
}

fn json(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or_else(|err| panic!("not JSON ({err}): {body}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_lists_nodes_clones_and_reads_tasks_with_the_token() {
    if !judge::present(&[Judge::Curl]) {
        return;
    }
    let setup = start_with(fast_world(), Arc::new(DefaultShell::new()), false).await;
    let curl = Curl::new(&setup.sim);
    let (status, body) = curl.run(SECRET, &[], "/nodes").await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    let nodes: Vec<String> = json(&body)["data"]
        .as_array()
        .expect("list")
        .iter()
        .map(|n| n["node"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(nodes, ["pve1", "pve2", "pve3"]);

    // Form-encoded, as proxmoxer and the web UI send.
    let (status, body) = curl
        .run(
            SECRET,
            &["-d", "newid=150", "-d", "full=1", "-d", "name=from-curl"],
            "/nodes/pve1/qemu/9000/clone",
        )
        .await;
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    let upid = json(&body)["data"].as_str().expect("UPID").to_owned();
    assert!(
        upid.starts_with("UPID:pve1:") && upid.contains(":qmclone:9000:capstan@pve!test:"),
        "{upid}"
    );
    let status_path = format!("/nodes/pve1/tasks/{}/status", upid.replace('!', "%21"));
    let mut stopped = false;
    for _ in 0..100 {
        let (_, body) = curl.run(SECRET, &[], &status_path).await;
        let task = json(&body)["data"].clone();
        if task["status"] == "stopped" {
            assert_eq!(task["exitstatus"], "OK");
            stopped = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(stopped, "the clone task finished");

    // JSON bodies, as go-proxmox sends, with JSON booleans.
    let (status, body) = curl
        .run(
            SECRET,
            &[
                "-H",
                "Content-Type: application/json",
                "-d",
                r#"{"newid": 151, "full": true, "name": "from-json"}"#,
            ],
            "/nodes/pve1/qemu/9000/clone",
        )
        .await;
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");

    // nextid answers a numeric string, and 400 for a taken id.
    let (_, body) = curl.run(SECRET, &[], "/cluster/nextid").await;
    assert_eq!(json(&body)["data"], "100");
    let (status, body) = curl
        .run(SECRET, &["-G", "-d", "vmid=150"], "/cluster/nextid")
        .await;
    assert_eq!(status, "HTTP/1.1 400 Parameter verification failed.");
    assert_eq!(json(&body)["errors"]["vmid"], "VM 150 already exists\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_sees_real_error_answers() {
    if !judge::present(&[Judge::Curl]) {
        return;
    }
    let mut world = fast_world();
    // A clone long enough that a call made during it surely finds the VM locked.
    world.timings.clone = capstan_lab::values::LabDuration(Duration::from_secs(30));
    let setup = start_with(world, Arc::new(DefaultShell::new()), false).await;
    let curl = Curl::new(&setup.sim);
    let (status, body) = curl.run("wrong-secret", &[], "/nodes").await;
    assert_eq!(status, "HTTP/1.1 401 authentication failure");
    assert_eq!(body, "", "json format 401s have an empty body");

    let (status, body) = curl
        .run(
            SECRET,
            &["-d", "newid=abc", "-d", "full=true", "-d", "bogus=1"],
            "/nodes/pve1/qemu/9000/clone",
        )
        .await;
    assert_eq!(status, "HTTP/1.1 400 Parameter verification failed.");
    let body = json(&body);
    assert_eq!(body["data"], serde_json::Value::Null);
    assert_eq!(
        body["errors"]["newid"],
        "type check ('integer') failed - got 'abc'\n"
    );
    assert_eq!(
        body["errors"]["full"],
        "type check ('boolean') failed - got 'true'\n"
    );
    assert!(
        body["errors"]["bogus"]
            .as_str()
            .expect("text")
            .contains("not defined in schema")
    );

    let (status, body) = curl
        .run(SECRET, &[], "/nodes/pve1/qemu/4321/status/current")
        .await;
    assert_eq!(
        status,
        "HTTP/1.1 500 Configuration file 'nodes/pve1/qemu-server/4321.conf' does not exist"
    );
    assert!(
        json(&body)["message"]
            .as_str()
            .expect("message")
            .ends_with("does not exist\n")
    );

    let (status, _) = curl.run(SECRET, &[], "/nodes/pve1/nothing-here").await;
    assert_eq!(
        status,
        "HTTP/1.1 501 Method 'GET /nodes/pve1/nothing-here' not implemented"
    );

    // A VM locked by its running clone task refuses a conflicting call.
    let (_, _) = curl
        .run(
            SECRET,
            &["-d", "newid=160", "-d", "full=1"],
            "/nodes/pve1/qemu/9000/clone",
        )
        .await;
    let (status, _) = curl
        .run(SECRET, &["-X", "POST"], "/nodes/pve1/qemu/160/status/start")
        .await;
    assert_eq!(status, "HTTP/1.1 500 VM is locked (clone)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxmoxer_lists_nodes_and_vms_and_clones() {
    if !judge::present(&[Judge::Proxmoxer]) {
        return;
    }
    let setup = start_with(fast_world(), Arc::new(DefaultShell::new()), false).await;
    let dir = tempfile::tempdir().expect("dir");
    let ca = dir.path().join("pve.pem");
    std::fs::write(&ca, setup.sim.certificate_pem()).expect("cert");
    let script = r#"
import json, sys
from proxmoxer import ProxmoxAPI
host, port, user, token_name, token_value, ca = sys.argv[1:]
px = ProxmoxAPI(host, port=int(port), user=user, token_name=token_name,
                token_value=token_value, verify_ssl=ca, service="PVE")
nodes = [n["node"] for n in px.nodes.get()]
vms = []
for node in nodes:
    vms += [[node, vm["vmid"], vm.get("name"), vm.get("template", 0)] for vm in px.nodes(node).qemu.get()]
resources = px.cluster.resources.get(type="vm")
upid = px.nodes("pve1").qemu(9000).clone.post(newid=321, name="from-proxmoxer", full=1)
print(json.dumps({"nodes": nodes, "vms": vms, "resources": len(resources), "upid": upid}))
"#;
    let addr = setup.sim.local_addr();
    let (user, token_name) = TOKEN_ID.split_once('!').expect("token id");
    let mut command = Command::new("/usr/bin/python3");
    command.args(["-c", script]).args([
        &addr.ip().to_string(),
        &addr.port().to_string(),
        user,
        token_name,
        SECRET,
        ca.to_str().expect("utf-8 path"),
    ]);
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("join")
        .expect("/usr/bin/python3 exists");
    assert!(
        output.status.success(),
        "proxmoxer failed (is python3-proxmoxer installed? `apt-get install python3-proxmoxer`):\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report = json(&String::from_utf8_lossy(&output.stdout));
    assert_eq!(report["nodes"], serde_json::json!(["pve1", "pve2", "pve3"]));
    let vms = report["vms"].as_array().expect("vms");
    assert_eq!(vms.len(), 12, "{vms:?}");
    assert!(vms.iter().all(|vm| vm[3] == 1), "all templates: {vms:?}");
    assert_eq!(report["resources"], 12);
    assert!(
        report["upid"]
            .as_str()
            .expect("upid")
            .starts_with("UPID:pve1:")
    );
    assert!(setup.sim.handle().vm(321).is_some());
}

/// Polls a task until it stops; returns its exit status.
async fn task_exit(curl: &Curl, upid: &str) -> String {
    let status_path = format!("/nodes/pve1/tasks/{}/status", upid.replace('!', "%21"));
    for _ in 0..200 {
        let (_, body) = curl.run(SECRET, &[], &status_path).await;
        let task = json(&body)["data"].clone();
        if task["status"] == "stopped" {
            return task["exitstatus"].as_str().unwrap_or_default().to_owned();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("task {upid} never stopped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_uploads_an_iso_as_to_proxmox_and_meets_its_refusals() {
    if !judge::present(&[Judge::Curl]) {
        return;
    }
    let setup = start_with(iso_world(), Arc::new(DefaultShell::new()), false).await;
    let curl = Curl::new(&setup.sim);
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("seed.bin");
    let bytes: Vec<u8> = (0..=255u8).cycle().take(50_000).collect();
    std::fs::write(&file, &bytes).expect("write");
    let part = |name: &str| format!("filename=@{};filename={name}", file.display());
    let upload = "/nodes/pve1/storage/local/upload";

    // A path in the name is cut off, as normalize_content_filename does.
    let (status, body) = curl
        .run(
            SECRET,
            &["-F", "content=iso", "-F", &part("../../seed.iso")],
            upload,
        )
        .await;
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    let upid = json(&body)["data"].as_str().expect("UPID").to_owned();
    assert!(upid.contains(":imgcopy::capstan@pve!test:"), "{upid}");
    assert_eq!(task_exit(&curl, &upid).await, "OK");
    let stored = setup.sim.handle().volume("pve1", "local:iso/seed.iso");
    assert_eq!(stored, Some(bytes));

    let (status, body) = curl
        .run(
            SECRET,
            &["-F", "content=iso", "-F", &part("seed.txt")],
            upload,
        )
        .await;
    assert_eq!(status, "HTTP/1.1 400 Parameter verification failed.");
    assert_eq!(json(&body)["errors"]["filename"], "wrong file extension\n");

    let (status, _) = curl
        .run(
            SECRET,
            &["-F", "content=import", "-F", &part("disk.qcow2")],
            upload,
        )
        .await;
    assert_eq!(
        status,
        "HTTP/1.1 500 storage 'local' does not support 'import' content"
    );

    let (status, _) = curl
        .run(
            SECRET,
            &["-d", "content=iso", "-d", "filename=x.iso"],
            upload,
        )
        .await;
    assert_eq!(
        status,
        "HTTP/1.1 501 upload 'Content-Type 'application/x-www-form-urlencoded' not implemented"
    );

    let (status, _) = curl
        .run(
            SECRET,
            &[
                "-H",
                "Transfer-Encoding: chunked",
                "-F",
                "content=iso",
                "-F",
                &part("chunked.iso"),
            ],
            upload,
        )
        .await;
    assert_eq!(
        status,
        "HTTP/1.1 501 chunked transfer encoding not supported"
    );

    std::fs::write(&file, vec![0u8; capstan_lab::proxmox::UPLOAD_MAX_BYTES + 1]).expect("write");
    let (status, _) = curl
        .run(
            SECRET,
            // No `Expect: 100-continue` (curl's default for large bodies): the answer alone.
            &["-H", "Expect:", "-F", "content=iso", "-F", &part("big.iso")],
            upload,
        )
        .await;
    assert_eq!(
        status,
        "HTTP/1.1 501 write to temporary file failed - No space left on device"
    );
    assert_eq!(
        setup.sim.handle().volumes("pve1"),
        ["local:iso/seed.iso"],
        "only the accepted upload is stored"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxmoxer_uploads_an_iso_and_lists_it() {
    if !judge::present(&[Judge::Proxmoxer]) {
        return;
    }
    let setup = start_with(iso_world(), Arc::new(DefaultShell::new()), false).await;
    let dir = tempfile::tempdir().expect("dir");
    let ca = dir.path().join("pve.pem");
    std::fs::write(&ca, setup.sim.certificate_pem()).expect("cert");
    let image = dir.path().join("talos-seed.iso");
    let bytes: Vec<u8> = (0..=255u8).rev().cycle().take(40_000).collect();
    std::fs::write(&image, &bytes).expect("image");
    let script = r#"
import json, sys, time
from proxmoxer import ProxmoxAPI
host, port, user, token_name, token_value, ca, image = sys.argv[1:]
px = ProxmoxAPI(host, port=int(port), user=user, token_name=token_name,
                token_value=token_value, verify_ssl=ca, service="PVE")
storage = px.nodes("pve1").storage("local")
with open(image, "rb") as f:
    upid = storage.upload.post(content="iso", filename=f)
for _ in range(200):
    task = px.nodes("pve1").tasks(upid).status.get()
    if task["status"] == "stopped":
        break
    time.sleep(0.02)
isos = storage.content.get(content="iso")
print(json.dumps({"upid": upid, "exit": task.get("exitstatus"), "isos": isos}))
"#;
    let addr = setup.sim.local_addr();
    let (user, token_name) = TOKEN_ID.split_once('!').expect("token id");
    let mut command = Command::new("/usr/bin/python3");
    command.args(["-c", script]).args([
        &addr.ip().to_string(),
        &addr.port().to_string(),
        user,
        token_name,
        SECRET,
        ca.to_str().expect("utf-8 path"),
        image.to_str().expect("utf-8 path"),
    ]);
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("join")
        .expect("/usr/bin/python3 exists");
    assert!(
        output.status.success(),
        "proxmoxer failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report = json(&String::from_utf8_lossy(&output.stdout));
    assert_eq!(report["exit"], "OK", "{report}");
    let isos = report["isos"].as_array().expect("list");
    assert_eq!(isos.len(), 1, "{report}");
    assert_eq!(isos[0]["volid"], "local:iso/talos-seed.iso");
    assert_eq!(isos[0]["format"], "iso");
    assert_eq!(isos[0]["size"], bytes.len());
    assert_eq!(
        setup
            .sim
            .handle()
            .volume("pve1", "local:iso/talos-seed.iso"),
        Some(bytes)
    );
}
