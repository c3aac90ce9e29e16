//! The Proxmox client against a simulated Proxmox that misbehaves: every failure class is
//! retried or not as it should be, and says what to fix.

use std::time::Duration;

use crate::proxmox_support::{
    SECRET, client, clone_request, created, expected, fast_world, ownership, start,
    template_on_pve1,
};
use capstan::model::{NodeName, Role, VmId};
use capstan::providers::proxmox::ownership::{encode_description, encode_tags};
use capstan::providers::proxmox::{
    ExpectedVm, PowerState, ProxmoxError, ProxmoxProvider, PveNode, Trust, VmRef,
};
use capstan_lab::world::{CallFault, WorldVm};

const RESOURCES: &str = "GET /cluster/resources";

#[tokio::test]
async fn server_errors_are_retried_until_they_pass() {
    let setup = start(fast_world()).await;
    setup.sim.faults().fail_calls(CallFault::unavailable(2));
    let inventory = setup.client.inventory().await.expect("third try succeeds");
    assert_eq!(inventory.nodes.len(), 3);
    assert_eq!(
        setup.sim.handle().calls_of(RESOURCES),
        3,
        "2 failed + 1 served"
    );
}

#[tokio::test]
async fn lock_timeouts_are_retried_until_they_pass() {
    let setup = start(fast_world()).await;
    let request = clone_request("prod", "general", "lock1", "pve1");
    let vm = setup.client.clone_vm(&request).await.expect("clone");
    setup
        .sim
        .faults()
        .fail_calls(CallFault::lock_timeout(2, vm.vmid.0).on_path("/status/start"));
    setup
        .client
        .start_vm(&vm)
        .await
        .expect("start after two lock timeouts");
    assert!(setup.sim.handle().vm(vm.vmid.0).expect("vm").running);
    assert_eq!(
        setup
            .sim
            .handle()
            .calls_of("POST /nodes/{node}/qemu/{vmid}/status/start"),
        3
    );
}

#[tokio::test]
async fn transient_failures_give_up_after_the_retry_budget() {
    let setup = start(fast_world()).await;
    setup.sim.faults().fail_calls(CallFault::unavailable(100));
    let err = setup.client.inventory().await.expect_err("never served");
    assert!(err.is_transient(), "{err}");
    assert!(err.to_string().contains("503"), "{err}");
    assert_eq!(setup.sim.handle().calls_of(RESOURCES), 5, "bounded");
}

#[tokio::test]
async fn a_missing_template_is_permanent_and_names_the_fix() {
    let setup = start(fast_world()).await;
    let mut request = clone_request("prod", "general", "tmpl1", "pve1");
    request.template = "ubuntu-noble".into();
    let err = setup
        .client
        .clone_vm(&request)
        .await
        .expect_err("no template");
    assert!(
        matches!(err, ProxmoxError::TemplateNotFound { .. }),
        "{err}"
    );
    assert!(!err.is_transient());
    assert!(err.to_string().contains("machine.template"), "{err}");
    assert_eq!(
        setup
            .sim
            .handle()
            .calls_of("POST /nodes/{node}/qemu/{vmid}/clone"),
        0
    );
}

#[tokio::test]
async fn a_bad_storage_is_refused_once_with_what_to_fix() {
    let setup = start(fast_world()).await;
    let mut request = clone_request("prod", "general", "stor1", "pve1");
    request.storage = Some("fast-nvme".into());
    let err = setup
        .client
        .clone_vm(&request)
        .await
        .expect_err("no storage");
    assert!(!err.is_transient(), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("storage 'fast-nvme' does not exist"),
        "{text}"
    );
    assert!(text.contains("machine.storage"), "{text}");
    assert_eq!(
        setup
            .sim
            .handle()
            .calls_of("POST /nodes/{node}/qemu/{vmid}/clone"),
        1,
        "not retried"
    );
}

#[tokio::test]
async fn a_full_node_fails_the_clone_task_with_exit_status_and_log() {
    let mut world = fast_world();
    world.nodes[0].memory_gib = 1;
    let setup = start(world).await;
    let err = setup
        .client
        .clone_vm(&clone_request("prod", "general", "full1", "pve1"))
        .await
        .expect_err("no memory");
    let ProxmoxError::TaskFailed(failure) = &err else {
        panic!("expected a task failure, got {err}");
    };
    assert!(
        failure
            .exitstatus
            .contains("not enough memory on node 'pve1'")
    );
    assert!(
        failure
            .log_tail
            .iter()
            .any(|l| l.starts_with("TASK ERROR:")),
        "{:?}",
        failure.log_tail
    );
    assert!(failure.upid.starts_with("UPID:pve1:"));
    assert!(!err.is_transient());
    assert!(
        err.to_string().contains("free memory on that Proxmox node"),
        "{err}"
    );
    assert!(
        setup
            .sim
            .handle()
            .vm_named("capstan-prod-general-full1")
            .is_none(),
        "a failed clone leaves no VM behind"
    );
}

#[tokio::test]
async fn an_injected_task_failure_carries_its_text_and_log_tail() {
    let setup = start(fast_world()).await;
    let request = clone_request("prod", "general", "task1", "pve1");
    let vm = setup.client.clone_vm(&request).await.expect("clone");
    setup
        .sim
        .faults()
        .fail_tasks("qmstart", 1, "start failed: QEMU exited with code 1");
    let err = setup.client.start_vm(&vm).await.expect_err("fails once");
    let ProxmoxError::TaskFailed(failure) = &err else {
        panic!("expected a task failure, got {err}");
    };
    assert_eq!(failure.exitstatus, "start failed: QEMU exited with code 1");
    assert_eq!(failure.kind, "qmstart");
    assert_eq!(
        failure.log_tail.last().map(String::as_str),
        Some("TASK ERROR: start failed: QEMU exited with code 1")
    );
    setup.client.start_vm(&vm).await.expect("next start works");
}

#[tokio::test]
async fn a_wrong_fingerprint_is_refused_naming_both() {
    let setup = start(fast_world()).await;
    let wrong = vec!["AB"; 32].join(":");
    let pinned_wrong = client(&setup.sim, SECRET, Trust::Fingerprint(wrong.clone()));
    let err = pinned_wrong.inventory().await.expect_err("refused");
    let ProxmoxError::FingerprintMismatch {
        expected, found, ..
    } = &err
    else {
        panic!("expected a fingerprint mismatch, got {err}");
    };
    assert_eq!(expected, &wrong);
    assert_eq!(found, &setup.sim.fingerprint());
    assert!(!err.is_transient());
    let text = err.to_string();
    assert!(
        text.contains(&wrong) && text.contains(&setup.sim.fingerprint()),
        "{text}"
    );
    assert!(text.contains("tlsFingerprint"), "{text}");
    assert_eq!(setup.sim.handle().total_calls(), 0, "no request was sent");
}

#[tokio::test]
async fn the_server_certificate_can_be_trusted_through_a_ca_file() {
    let setup = start(fast_world()).await;
    let dir = tempfile::tempdir().expect("dir");
    let ca = dir.path().join("pve-ca.pem");
    std::fs::write(&ca, setup.sim.certificate_pem()).expect("write ca");
    let by_ca = client(&setup.sim, SECRET, Trust::CaFile(ca));
    by_ca.inventory().await.expect("trusted by CA file");
    let by_roots = client(&setup.sim, SECRET, Trust::SystemRoots);
    let err = by_roots.inventory().await.expect_err("self-signed");
    assert!(
        matches!(err, ProxmoxError::UntrustedCertificate { .. }),
        "{err}"
    );
    assert!(!err.is_transient());
    assert!(err.to_string().contains("tlsFingerprint"), "{err}");
    assert_eq!(
        setup.sim.handle().calls_of(RESOURCES),
        1,
        "only the CA-trusting client was served"
    );
}

#[tokio::test]
async fn a_wrong_token_gets_401_and_is_not_retried() {
    let setup = start(fast_world()).await;
    let wrong_secret = "00000000-0000-4000-8000-000000000000";
    let intruder = client(
        &setup.sim,
        wrong_secret,
        Trust::Fingerprint(setup.sim.fingerprint()),
    );
    let err = intruder.inventory().await.expect_err("401");
    let ProxmoxError::Api { status, .. } = &err else {
        panic!("expected an API error, got {err}");
    };
    assert_eq!(*status, 401);
    assert!(!err.is_transient());
    let text = format!("{err}");
    assert!(text.contains("tokenId"), "{text}");
    assert!(
        !text.contains(wrong_secret),
        "the secret never shows: {text}"
    );
    assert!(!format!("{err:?}").contains(wrong_secret));
    assert_eq!(setup.sim.handle().calls_of("GET (401)"), 1);
}

#[tokio::test]
async fn destroy_and_stop_refuse_a_vm_that_is_not_the_expected_one() {
    let setup = start(fast_world()).await;
    let request = clone_request("prod", "general", "mine1", "pve1");
    let vm = setup.client.clone_vm(&request).await.expect("clone");

    // Same VMID and name, but another cluster's.
    let mut other_cluster = expected(&vm, &request);
    other_cluster.ownership = ownership("staging", Role::Worker, "general");
    let err = setup
        .client
        .destroy_vm(&other_cluster)
        .await
        .expect_err("not ours");
    assert!(matches!(err, ProxmoxError::NotOurs { .. }), "{err}");
    assert!(err.to_string().contains("cluster prod"), "{err}");
    assert!(setup.sim.handle().vm(vm.vmid.0).is_some(), "left alone");

    // A VMID reused by someone else: a foreign VM there now.
    setup
        .sim
        .handle()
        .add_vm(&WorldVm {
            vmid: 4242,
            name: "web01".into(),
            node: "pve2".into(),
            cores: 1,
            memory_mib: 512,
            disk_gib: 1,
            tags: None,
            description: None,
            running: true,
        })
        .expect("foreign VM");
    let stale = ExpectedVm {
        vm: VmRef {
            node: PveNode::from("pve2"),
            vmid: VmId(4242),
        },
        name: NodeName("capstan-prod-general-old42".into()),
        ownership: ownership("prod", Role::Worker, "general"),
    };
    let err = setup.client.stop_vm(&stale).await.expect_err("not ours");
    assert!(err.to_string().contains("named `web01`"), "{err}");
    let err = setup.client.destroy_vm(&stale).await.expect_err("not ours");
    assert!(matches!(err, ProxmoxError::NotOurs { .. }), "{err}");
    let foreign = setup.sim.handle().vm(4242).expect("still there");
    assert!(foreign.running, "never stopped");
    assert_eq!(
        setup
            .sim
            .handle()
            .calls_of("DELETE /nodes/{node}/qemu/{vmid}"),
        0
    );
}

#[tokio::test]
async fn a_vm_left_untagged_by_a_crash_is_recognised_from_its_description() {
    let setup = start(fast_world()).await;
    // The tagging config call fails after the clone succeeded: as if capstan crashed between
    // the two calls.
    setup
        .sim
        .faults()
        .fail_tasks("qmconfig", 1, "simulated crash before tagging");
    let request = clone_request("prod", "general", "crash", "pve1");
    setup
        .client
        .clone_vm(&request)
        .await
        .expect_err("tagging failed");
    let left = setup
        .sim
        .handle()
        .vm_named("capstan-prod-general-crash")
        .expect("clone exists");
    // Only what the clone copied from its template (the distribution it is built for): no
    // owner tag.
    let tags = left.config.get("tags").map_or("", String::as_str);
    assert!(!tags.contains("cluster-"), "no owner tag: {tags}");

    // Also one that was never tagged, made by an older capstan.
    setup
        .sim
        .handle()
        .add_vm(&WorldVm {
            vmid: 777,
            name: "capstan-prod-cp-old01".into(),
            node: "pve3".into(),
            cores: 2,
            memory_mib: 2048,
            disk_gib: 20,
            tags: None,
            description: Some(encode_description(
                &ownership("prod", Role::ControlPlane, "cp"),
                created(),
                None,
            )),
            running: false,
        })
        .expect("seed");
    // Templates are read once; warm that so the count below is the untagged VMs'.
    let _ = setup.client.inventory().await;
    setup.sim.handle().reset_calls();
    let inventory = setup.client.inventory().await.expect("inventory");
    let owned: Vec<(&str, Role)> = inventory
        .owned_by("prod")
        .map(|vm| {
            (
                vm.name.as_str(),
                vm.owner.as_ref().expect("owner").ownership.role,
            )
        })
        .collect();
    assert!(
        owned.contains(&("capstan-prod-general-crash", Role::Worker)),
        "{owned:?}"
    );
    assert!(
        owned.contains(&("capstan-prod-cp-old01", Role::ControlPlane)),
        "{owned:?}"
    );
    assert_eq!(
        setup
            .sim
            .handle()
            .calls_of("GET /nodes/{node}/qemu/{vmid}/config"),
        2,
        "one config read per untagged VM named like ours, none for the others"
    );
    // Re-running the clone adopts it and tags it.
    let adopted = setup.client.clone_vm(&request).await.expect("adopt");
    assert_eq!(adopted.vmid.0, left.vmid);
    let tags = setup.sim.handle().vm(left.vmid).expect("vm").config["tags"].clone();
    assert_eq!(tags, encode_tags(&request.ownership, created()).join(";"));
}

#[tokio::test]
async fn a_vm_whose_agent_never_starts_says_so_when_pinged() {
    let setup = start(fast_world()).await;
    setup
        .sim
        .faults()
        .agent_never_starts("capstan-prod-general-mute*");
    let vm = setup
        .client
        .clone_vm(&clone_request("prod", "general", "mute1", "pve1"))
        .await
        .expect("clone");
    setup.client.start_vm(&vm).await.expect("start");
    let ping = setup.client.agent_ping(&vm).await.expect_err("silent");
    assert!(ping.is_agent_unavailable(), "{ping}");
    assert!(
        ping.to_string().contains("QEMU guest agent is not running"),
        "{ping}"
    );
    // Waiting for it gives up at `agent_wait`, without an error: it may answer later.
    let answered = setup.client.await_agent(&vm).await.expect("no error");
    assert!(!answered, "a mute agent never answers");
}

#[tokio::test]
async fn a_hung_vm_times_out_its_agent_and_shutdown_falls_back_to_stop() {
    let setup = start(fast_world()).await;
    let request = clone_request("prod", "general", "hung1", "pve1");
    let vm = setup.client.clone_vm(&request).await.expect("clone");
    setup.client.start_vm(&vm).await.expect("start");
    setup.sim.faults().hang_vm(request.name.as_str());
    let err = setup.client.agent_ping(&vm).await.expect_err("hung");
    assert!(
        err.to_string()
            .contains("qmp command 'guest-ping' failed - got timeout"),
        "{err}"
    );
    setup
        .client
        .shutdown_vm(&expected(&vm, &request), Duration::from_secs(1))
        .await
        .expect("stopped after the clean shutdown timed out");
    assert!(!setup.sim.handle().vm(vm.vmid.0).expect("vm").running);
    let calls = setup.sim.handle().calls();
    assert_eq!(calls["POST /nodes/{node}/qemu/{vmid}/status/shutdown"], 1);
    assert_eq!(calls["POST /nodes/{node}/qemu/{vmid}/status/stop"], 1);
}

#[tokio::test]
async fn a_node_that_goes_away_shows_offline_and_its_vms_unreachable() {
    let setup = start(fast_world()).await;
    let vm = setup
        .client
        .clone_vm(&clone_request("prod", "general", "gone1", "pve2"))
        .await
        .expect("clone");
    setup.client.start_vm(&vm).await.expect("start");
    setup
        .sim
        .faults()
        .set_node_online("pve2", false)
        .expect("node exists");
    let inventory = setup.client.inventory().await.expect("inventory");
    let pve2 = inventory
        .nodes
        .iter()
        .find(|n| n.name.as_str() == "pve2")
        .expect("listed");
    assert!(!pve2.online);
    let seen = inventory
        .vms
        .iter()
        .find(|v| v.vmid == vm.vmid)
        .expect("vm");
    assert_eq!(seen.power, PowerState::Unknown);
    let err = setup.client.start_vm(&vm).await.expect_err("unreachable");
    assert!(err.is_transient(), "{err}");
    assert!(err.to_string().contains("595"), "{err}");

    setup
        .sim
        .faults()
        .set_node_online("pve2", true)
        .expect("node exists");
    assert!(
        !setup.sim.handle().vm(vm.vmid.0).expect("vm").running,
        "its VMs died with it"
    );
    setup
        .client
        .start_vm(&vm)
        .await
        .expect("start after the node returns");
}

/// A world whose only template is `debian13-k8s` on pve1, its disk on `template_storage`, with
/// `local-lvm` (local) and `ceph` (shared).
fn one_template_world(template_storage: &str) -> capstan_lab::world::ProxmoxWorld {
    use capstan_lab::world::WorldStorage;
    let storage = |name: &str, shared| WorldStorage {
        name: name.into(),
        kind: if shared { "rbd" } else { "lvmthin" }.into(),
        shared,
        size_gib: 2048,
        content: Vec::new(),
    };
    let mut world = fast_world();
    world.storages = vec![storage("local-lvm", false), storage("ceph", true)];
    world.templates = Some(vec![template_on_pve1(Some(template_storage))]);
    world
}

#[tokio::test]
async fn a_template_on_local_storage_clones_only_on_its_own_node_with_proxmox_words() {
    let setup = start(one_template_world("local-lvm")).await;
    let inventory = setup.client.inventory().await.expect("inventory");
    let template = &inventory.templates[0];
    assert_eq!(
        (template.vm.node.as_str(), template.vm.vmid.0),
        ("pve1", 9000)
    );
    assert_eq!(template.storages, ["local-lvm"]);
    assert_eq!(inventory.storages.get("ceph"), Some(&true));

    let err = setup
        .client
        .clone_vm(&clone_request("prod", "general", "far01", "pve2"))
        .await
        .expect_err("another node");
    assert!(
        err.to_string()
            .contains("can't clone VM to node 'pve2' (VM uses local storage)"),
        "{err}"
    );
    // Writing the copy to shared storage does not help: the source is local.
    let mut to_ceph = clone_request("prod", "general", "far02", "pve2");
    to_ceph.storage = Some("ceph".into());
    let err = setup
        .client
        .clone_vm(&to_ceph)
        .await
        .expect_err("still local");
    assert!(err.to_string().contains("(VM uses local storage)"), "{err}");
    setup
        .client
        .clone_vm(&clone_request("prod", "general", "near1", "pve1"))
        .await
        .expect("its own node");
}

#[tokio::test]
async fn a_template_on_shared_storage_clones_anywhere_but_not_to_local_storage_elsewhere() {
    let setup = start(one_template_world("ceph")).await;
    let inventory = setup.client.inventory().await.expect("inventory");
    assert_eq!(inventory.templates[0].storages, ["ceph"]);
    setup
        .client
        .clone_vm(&clone_request("prod", "general", "far01", "pve2"))
        .await
        .expect("shared template clones to another node");
    let mut to_local = clone_request("prod", "general", "far02", "pve3");
    to_local.storage = Some("local-lvm".into());
    let err = setup
        .client
        .clone_vm(&to_local)
        .await
        .expect_err("local target");
    assert!(
        err.to_string()
            .contains("can't clone to non-shared storage 'local-lvm'"),
        "{err}"
    );
}

#[tokio::test]
async fn a_clone_to_a_node_without_the_template_starts_from_a_copy_on_shared_storage() {
    let mut world = one_template_world("local-lvm");
    let mut shared_copy = world.templates.as_ref().expect("templates")[0].clone();
    shared_copy.vmid = 9001;
    shared_copy.node = "pve2".into();
    shared_copy.storage = Some("ceph".into());
    world
        .templates
        .as_mut()
        .expect("templates")
        .push(shared_copy);
    let setup = start(world).await;
    // The inventory tells which copy is on shared storage.
    let _ = setup.client.inventory().await.expect("inventory");
    let vm = setup
        .client
        .clone_vm(&clone_request("prod", "general", "far03", "pve3"))
        .await
        .expect("cloned from the shared copy, not the lower VMID on local storage");
    assert_eq!(vm.node.as_str(), "pve3");
}
