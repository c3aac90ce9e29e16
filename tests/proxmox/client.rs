//! The Proxmox client against the simulated Proxmox: every operation, on the happy path and
//! repeated (idempotence).

use std::net::Ipv4Addr;
use std::time::Duration;

use crate::proxmox_support::{
    clone_request, created, expected, fast_world, ownership, start, template_on_pve1,
};
use capstan::model::{Role, VmId};
use capstan::providers::proxmox::ownership::{parse_description, parse_tags, split_tags};
use capstan::providers::proxmox::{
    CloudInit, ExpectedVm, PowerState, ProxmoxError, ProxmoxProvider, PveNode, ResizeOutcome,
    VmSettings,
};

const GIB: u64 = 1024 * 1024 * 1024;

#[tokio::test]
async fn inventory_sees_every_node_and_template_with_capacity() {
    let setup = start(fast_world()).await;
    let inventory = setup.client.inventory().await.expect("inventory");
    let names: Vec<&str> = inventory.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["pve1", "pve2", "pve3"]);
    assert!(inventory.nodes.iter().all(|n| n.online));
    assert!(
        inventory
            .nodes
            .iter()
            .all(|n| n.cpu_capacity == 16 && n.memory_capacity_bytes == 64 * GIB)
    );
    let templates: Vec<(&str, &str)> = inventory
        .vms
        .iter()
        .filter(|vm| vm.is_template)
        .map(|vm| (vm.name.as_str(), vm.node.as_str()))
        .collect();
    // Four templates on each of the three nodes.
    assert_eq!(templates.len(), 12);
    assert!(templates.contains(&("debian13-k8s", "pve2")));
    assert!(templates.contains(&("debian13-k8s-v2", "pve3")));
    assert!(templates.contains(&("talos-v1.13.9", "pve1")));
    assert_eq!(
        setup.sim.handle().calls_of("GET /cluster/resources"),
        1,
        "one listing of every resource"
    );
    assert_eq!(
        setup
            .sim
            .handle()
            .calls_of("GET /nodes/{node}/qemu/{vmid}/config"),
        12,
        "each template's volumes are read the first time it is seen"
    );
    assert_eq!(inventory.templates.len(), 12);
    assert!(
        inventory
            .templates
            .iter()
            .all(|t| t.storages == ["local-lvm"])
    );
    assert_eq!(inventory.storages.get("local-lvm"), Some(&false));
    assert_eq!(inventory.storages.get("local"), Some(&false));
    for template in &inventory.templates {
        let built_for = match template.name.as_str() {
            "debian13-k3s" => "k3s",
            "talos-v1.13.9" => "talos",
            _ => "kubeadm",
        };
        assert_eq!(template.tags, [built_for], "{}", template.name);
    }
    setup.sim.handle().reset_calls();
    let again = setup.client.inventory().await.expect("inventory");
    assert_eq!(again.templates, inventory.templates);
    assert_eq!(
        setup.sim.handle().total_calls(),
        1,
        "templates already known are not read again"
    );
}

#[tokio::test]
async fn a_clone_carries_its_name_and_ownership_from_the_first_call() {
    let setup = start(fast_world()).await;
    let request = clone_request("prod", "general", "a1b2c", "pve2");
    let vm = setup.client.clone_vm(&request).await.expect("clone");
    assert_eq!(vm.node, PveNode::from("pve2"));
    let sim_vm = setup.sim.handle().vm(vm.vmid.0).expect("exists");
    assert_eq!(sim_vm.name, "capstan-prod-general-a1b2c");
    assert!(
        !sim_vm.config.contains_key("lock"),
        "the clone lock is gone"
    );
    let description = sim_vm.config.get("description").expect("description");
    let from_description = parse_description(description)
        .expect("valid")
        .expect("owner in description");
    assert_eq!(from_description.ownership, request.ownership);
    let tags = split_tags(sim_vm.config.get("tags").expect("tags"));
    let from_tags = parse_tags(&tags).expect("valid").expect("owner in tags");
    assert_eq!(from_tags.ownership, request.ownership);
    assert_eq!(from_tags.created, Some(created()));
    // The clone call itself carried name and description.
    let exchanges_free = setup
        .sim
        .handle()
        .calls_of("POST /nodes/{node}/qemu/{vmid}/clone");
    assert_eq!(exchanges_free, 1);
    // The task log, in order: the clone (of the template), then the new VM's configuration.
    let tasks = setup.sim.handle().tasks();
    let listed: Vec<(&str, &str, Option<&str>)> = tasks
        .iter()
        .map(|t| (t.kind.as_str(), t.id.as_str(), t.exitstatus.as_deref()))
        .collect();
    let new_id = vm.vmid.0.to_string();
    assert_eq!(
        listed[1],
        ("qmconfig", new_id.as_str(), Some("OK")),
        "{tasks:?}"
    );
    assert_eq!(
        (listed[0].0, listed[0].2),
        ("qmclone", Some("OK")),
        "{tasks:?}"
    );
    assert!(tasks[0].upid.contains(":qmclone:"), "{}", tasks[0].upid);

    let inventory = setup.client.inventory().await.expect("inventory");
    let seen = inventory
        .vms
        .iter()
        .find(|v| v.vmid == vm.vmid)
        .expect("listed");
    assert_eq!(seen.power, PowerState::Stopped);
    assert_eq!(
        seen.owner.as_ref().map(|o| &o.ownership),
        Some(&request.ownership)
    );
    assert_eq!(seen.memory_mib, 2048);
    assert_eq!(seen.disk_bytes, 20 * GIB);
    assert_eq!(inventory.owned_by("prod").count(), 1);
    assert_eq!(inventory.owned_by("staging").count(), 0);
}

#[tokio::test]
async fn cloning_the_same_name_again_returns_the_same_vm_with_the_facts_it_recorded() {
    let setup = start(fast_world()).await;
    let request = clone_request("prod", "general", "again", "pve1");
    let first = setup.client.clone_vm(&request).await.expect("clone");
    // A crash after the address was chosen and configured: the retried creation adopts the
    // VM and must keep the address tag, or another machine could take the address it uses.
    let expected = ExpectedVm {
        vm: first.clone(),
        name: request.name.clone(),
        ownership: request.ownership.clone(),
    };
    setup
        .client
        .add_tag(&expected, "capstan-ip-192.168.1.202")
        .await
        .expect("tag");
    let second = setup.client.clone_vm(&request).await.expect("clone again");
    assert_eq!(first, second);
    let tags = split_tags(&setup.sim.handle().vm(first.vmid.0).expect("vm").config["tags"]);
    assert!(
        tags.iter().any(|t| t == "capstan-ip-192.168.1.202"),
        "the address survives adoption: {tags:?}"
    );
    assert_eq!(
        parse_tags(&tags).expect("valid").expect("owned").ownership,
        request.ownership
    );
    let named = setup
        .sim
        .handle()
        .vms()
        .into_iter()
        .filter(|vm| vm.name == request.name.as_str())
        .count();
    assert_eq!(named, 1);
}

#[tokio::test]
async fn configure_sets_hardware_agent_tags_and_cloud_init() {
    let setup = start(fast_world()).await;
    let request = clone_request("prod", "general", "cfg01", "pve1");
    let vm = setup.client.clone_vm(&request).await.expect("clone");
    let settings = VmSettings {
        cores: 4,
        memory_mib: 8192,
        cpu_type: "x86-64-v2-AES".into(),
        ownership: ownership("prod", Role::Worker, "general"),
        created: created(),
        cloud_init: Some(CloudInit {
            ipconfigs: vec![(0, "ip=dhcp".into())],
            user: Some("capstan".into()),
            ssh_keys: Some("ssh-ed25519 AAAAC3Nza capstan@lab\n".into()),
            ..CloudInit::default()
        }),
        built_from: Some("template=debian13-k8s cores=4".into()),
        hardware: Default::default(),
        disk_storage: None,
        tags: Vec::new(),
    };
    setup
        .client
        .configure_vm(&vm, &settings)
        .await
        .expect("configure");
    let description = setup.client.vm_description(&vm).await.expect("description");
    assert_eq!(
        capstan::providers::proxmox::ownership::parse_built_from(&description),
        Some("template=debian13-k8s cores=4"),
        "what the VM was built from is kept in its description"
    );
    let config = setup.sim.handle().vm(vm.vmid.0).expect("vm").config;
    assert_eq!(config["cores"], "4");
    assert_eq!(config["memory"], "8192");
    assert_eq!(config["cpu"], "x86-64-v2-AES");
    assert_eq!(config["agent"], "1");
    assert_eq!(config["ciuser"], "capstan");
    assert_eq!(
        config["sshkeys"], "ssh-ed25519%20AAAAC3Nza%20capstan%40lab%0A",
        "sshkeys is sent url-encoded, as Proxmox wants"
    );
    let inventory = setup.client.inventory().await.expect("inventory");
    let seen = inventory
        .vms
        .iter()
        .find(|v| v.vmid == vm.vmid)
        .expect("vm");
    assert_eq!((seen.cores, seen.memory_mib), (4, 8192));
}

#[tokio::test]
async fn resizing_grows_once_refuses_to_shrink_and_is_idempotent() {
    let setup = start(fast_world()).await;
    let vm = setup
        .client
        .clone_vm(&clone_request("prod", "general", "disk1", "pve1"))
        .await
        .expect("clone");
    assert_eq!(
        setup.client.resize_disk(&vm, 50).await.expect("grow"),
        ResizeOutcome::Grown
    );
    assert_eq!(
        setup.client.resize_disk(&vm, 50).await.expect("again"),
        ResizeOutcome::Unchanged
    );
    let scsi0 = setup.sim.handle().vm(vm.vmid.0).expect("vm").config["scsi0"].clone();
    assert!(scsi0.ends_with("size=50G"), "{scsi0}");
    let err = setup.client.resize_disk(&vm, 30).await.expect_err("shrink");
    assert!(matches!(err, ProxmoxError::ShrinkDisk { .. }), "{err}");
    assert!(!err.is_transient());
    assert!(err.to_string().contains("replace the VM"), "{err}");
}

#[tokio::test]
async fn a_started_vm_gets_an_address_and_runs_commands_through_its_agent() {
    let setup = start(fast_world()).await;
    let vm = setup
        .client
        .clone_vm(&clone_request("prod", "general", "run01", "pve3"))
        .await
        .expect("clone");
    setup.client.start_vm(&vm).await.expect("start");
    setup.client.start_vm(&vm).await.expect("start is a no-op");
    capstan_testkit::wait::agent(&setup.client, &vm).await;
    setup.client.agent_ping(&vm).await.expect("ping");

    let addresses = setup.client.vm_addresses(&vm).await.expect("addresses");
    assert_eq!(addresses.len(), 1, "{addresses:?}");
    let address = addresses[0];
    assert!(
        (Ipv4Addr::new(192, 168, 1, 100)..=Ipv4Addr::new(192, 168, 1, 169)).contains(&address),
        "{address}"
    );

    let argv = |parts: &[&str]| parts.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let echo = setup
        .client
        .run_command(
            &vm,
            &argv(&["echo", "hello", "lab"]),
            None,
            Duration::from_secs(5),
        )
        .await
        .expect("echo");
    assert_eq!(
        (echo.exit_code, echo.stdout.as_str()),
        (Some(0), "hello lab\n")
    );
    let hostname = setup
        .client
        .run_command(&vm, &argv(&["hostname"]), None, Duration::from_secs(5))
        .await
        .expect("hostname");
    assert_eq!(hostname.stdout, "capstan-prod-general-run01\n");
    let missing = setup
        .client
        .run_command(
            &vm,
            &argv(&["kubeadm", "init"]),
            None,
            Duration::from_secs(5),
        )
        .await
        .expect("ran");
    assert_eq!(missing.exit_code, Some(127));
    assert!(missing.stderr.contains("command not found"));

    let content = b"kind: InitConfiguration\n\x00binary-safe\n";
    setup
        .client
        .write_file(&vm, "/etc/kubeadm.yaml", content)
        .await
        .expect("write");
    let cat = setup
        .client
        .run_command(
            &vm,
            &argv(&["cat", "/etc/kubeadm.yaml"]),
            None,
            Duration::from_secs(5),
        )
        .await
        .expect("cat");
    assert_eq!(cat.stdout.as_bytes(), content);

    let status = setup
        .client
        .run_command(&vm, &argv(&["false"]), None, Duration::from_secs(5))
        .await
        .expect("false runs");
    assert_eq!(
        status.exit_code,
        Some(1),
        "a failing command is output, not an error"
    );

    let too_big = vec![b'x'; 50_000];
    let err = setup
        .client
        .write_file(&vm, "/big", &too_big)
        .await
        .expect_err("too big");
    assert!(matches!(err, ProxmoxError::FileTooLarge { .. }), "{err}");
}

#[tokio::test]
async fn shutdown_stop_and_destroy_are_awaited_and_idempotent() {
    let setup = start(fast_world()).await;
    let request = clone_request("prod", "general", "life1", "pve1");
    let vm = setup.client.clone_vm(&request).await.expect("clone");
    let expected = expected(&vm, &request);
    setup.client.start_vm(&vm).await.expect("start");
    setup
        .client
        .shutdown_vm(&expected, Duration::from_secs(5))
        .await
        .expect("shutdown");
    assert!(!setup.sim.handle().vm(vm.vmid.0).expect("vm").running);
    setup
        .client
        .shutdown_vm(&expected, Duration::from_secs(5))
        .await
        .expect("shutdown of a stopped VM");

    setup.client.start_vm(&vm).await.expect("start again");
    setup.client.stop_vm(&expected).await.expect("hard stop");
    assert!(!setup.sim.handle().vm(vm.vmid.0).expect("vm").running);

    setup.client.start_vm(&vm).await.expect("start again");
    setup
        .client
        .destroy_vm(&expected)
        .await
        .expect("destroy a running VM");
    assert!(
        setup.sim.handle().vm(vm.vmid.0).is_none(),
        "gone when destroy returns"
    );
    setup
        .client
        .destroy_vm(&expected)
        .await
        .expect("destroy again");
    setup
        .client
        .stop_vm(&expected)
        .await
        .expect("stop of a gone VM");
}

#[tokio::test]
async fn two_concurrent_clones_get_distinct_vmids() {
    let setup = start(fast_world()).await;
    // Latency widens the window between `nextid` and `clone`, so both ask for the same id.
    setup.sim.faults().set_latency(Duration::from_millis(20));
    let a = clone_request("prod", "general", "race1", "pve1");
    let b = clone_request("prod", "general", "race2", "pve1");
    let (first, second) = tokio::join!(setup.client.clone_vm(&a), setup.client.clone_vm(&b));
    let (first, second) = (first.expect("first clone"), second.expect("second clone"));
    assert_ne!(first.vmid, second.vmid);
    let handle = setup.sim.handle();
    assert_eq!(
        handle.vm(first.vmid.0).expect("first").name,
        a.name.as_str()
    );
    assert_eq!(
        handle.vm(second.vmid.0).expect("second").name,
        b.name.as_str()
    );
}

#[tokio::test]
async fn a_clone_that_loses_its_vmid_retries_with_a_fresh_one() {
    let setup = start(fast_world()).await;
    setup.sim.faults().steal_next_vmid(1);
    let request = clone_request("prod", "general", "lost1", "pve1");
    let vm = setup.client.clone_vm(&request).await.expect("clone");
    assert_eq!(vm.vmid, VmId(101), "100 was taken by someone else's clone");
    let handle = setup.sim.handle();
    assert_eq!(handle.vm(100).expect("the other VM").name, "other-100");
    assert_eq!(handle.calls_of("POST /nodes/{node}/qemu/{vmid}/clone"), 2);
    assert_eq!(handle.calls_of("GET /cluster/nextid"), 2);
}

#[tokio::test]
async fn a_template_on_shared_storage_is_cloned_to_another_node() {
    let mut world = fast_world();
    world.storages[0].shared = true;
    world.templates = Some(vec![template_on_pve1(None)]);
    let setup = start(world).await;
    let vm = setup
        .client
        .clone_vm(&clone_request("prod", "general", "far01", "pve3"))
        .await
        .expect("clone with target");
    assert_eq!(vm.node, PveNode::from("pve3"));
    assert_eq!(setup.sim.handle().vm(vm.vmid.0).expect("vm").node, "pve3");
}

#[tokio::test]
async fn a_template_on_local_storage_cannot_reach_another_node() {
    let mut world = fast_world();
    world.templates = Some(vec![template_on_pve1(None)]);
    let setup = start(world).await;
    let err = setup
        .client
        .clone_vm(&clone_request("prod", "general", "far02", "pve2"))
        .await
        .expect_err("local storage");
    assert!(!err.is_transient(), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("can't clone VM to node 'pve2' (VM uses local storage)"),
        "{text}"
    );
    assert!(
        text.contains("put a copy of the template on that node"),
        "{text}"
    );
}

#[tokio::test]
async fn a_tag_is_added_once_and_ownership_is_kept() {
    let setup = start(fast_world()).await;
    let request = clone_request("prod", "general", "tag01", "pve1");
    let vm = setup.client.clone_vm(&request).await.expect("clone");
    let expected = expected(&vm, &request);
    for _ in 0..2 {
        setup
            .client
            .add_tag(&expected, "capstan-retiring")
            .await
            .expect("tag");
    }
    let inventory = setup.client.inventory().await.expect("inventory");
    let info = inventory
        .vms
        .iter()
        .find(|v| v.vmid == vm.vmid)
        .expect("listed");
    assert_eq!(
        info.tags
            .iter()
            .filter(|t| *t == "capstan-retiring")
            .count(),
        1,
        "{:?}",
        info.tags
    );
    let owner = info.owner.as_ref().expect("still ours");
    assert_eq!(owner.ownership, request.ownership);

    let mut other = expected.clone();
    other.ownership.cluster = "staging".into();
    let err = setup
        .client
        .add_tag(&other, "capstan-retiring")
        .await
        .expect_err("not ours");
    assert!(matches!(err, ProxmoxError::NotOurs { .. }), "{err}");
    setup.client.destroy_vm(&expected).await.expect("destroy");
    setup
        .client
        .add_tag(&expected, "capstan-retiring")
        .await
        .expect("a gone VM is fine");
}

#[tokio::test]
async fn vms_whose_ownership_tags_no_spec_could_declare_are_nobodys() {
    use capstan_lab::world::WorldVm;
    let setup = start(fast_world()).await;
    let vm = |vmid: u32, name: &str, tags: Option<&str>, description: Option<&str>| WorldVm {
        vmid,
        name: name.to_owned(),
        node: "pve1".to_owned(),
        cores: 2,
        memory_mib: 2048,
        disk_gib: 20,
        tags: tags.map(str::to_owned),
        description: description.map(str::to_owned),
        running: false,
    };
    let long = "a".repeat(60);
    let hostile = [
        // Valid Proxmox tags (`[a-z0-9_][a-z0-9_\-\+\.]*`) a Proxmox user may set.
        vm(
            801,
            "web01",
            Some("capstan;cluster-..;role-worker;pool-general;spec-0123456789ab"),
            None,
        ),
        vm(
            802,
            "web02",
            Some("capstan;cluster-prod;role-worker;pool-x.y;spec-0123456789ab"),
            None,
        ),
        vm(
            803,
            "web03",
            Some(&format!(
                "capstan;cluster-{long};role-worker;pool-general;spec-0123456789ab"
            )),
            None,
        ),
        // Refused tags are not overruled by the description.
        vm(
            804,
            "capstan-prod-general-aaaaa",
            Some("capstan;cluster-prod;role-worker;pool-general;spec-../x"),
            Some("capstan.dev/owner: cluster=prod role=worker pool=general spec=0123456789ab"),
        ),
        // Untagged, named like ours: the description is read, and refused.
        vm(
            805,
            "capstan-prod-general-bbbbb",
            None,
            Some("capstan.dev/owner: cluster=../../etc role=worker pool=general spec=0123456789ab"),
        ),
    ];
    for added in &hostile {
        setup.sim.handle().add_vm(added).expect("added");
    }
    setup
        .sim
        .handle()
        .add_vm(&vm(
            806,
            "capstan-prod-general-ccccc",
            Some("capstan;cluster-prod;role-worker;pool-general;spec-0123456789ab"),
            None,
        ))
        .expect("added");
    let inventory = setup.client.inventory().await.expect("inventory");
    for added in &hostile {
        let seen = inventory
            .vms
            .iter()
            .find(|vm| vm.vmid == VmId(added.vmid))
            .expect("listed");
        assert_eq!(seen.owner, None, "VM {} is nobody's", added.vmid);
    }
    let ours = inventory
        .vms
        .iter()
        .find(|vm| vm.vmid == VmId(806))
        .expect("listed");
    assert_eq!(
        ours.owner.as_ref().map(|o| o.ownership.cluster.as_str()),
        Some("prod")
    );
}

#[tokio::test]
async fn a_flood_of_guest_output_is_refused_naming_the_vm_and_the_cap() {
    use capstan::providers::proxmox::GUEST_OUTPUT_MAX_BYTES;
    let setup = start(fast_world()).await;
    let request = clone_request("prod", "general", "flood", "pve1");
    let vm = setup.client.clone_vm(&request).await.expect("clone");
    setup.client.start_vm(&vm).await.expect("start");
    capstan_testkit::wait::agent(&setup.client, &vm).await;
    let faults = setup.sim.faults();
    faults.flooding_agent("capstan-prod-general-flood", "echo", GUEST_OUTPUT_MAX_BYTES);
    let argv = vec!["echo".to_owned(), "hi".to_owned()];
    let output = setup
        .client
        .run_command(&vm, &argv, None, Duration::from_secs(5))
        .await
        .expect("at the cap: read");
    assert_eq!(output.stdout.len(), GUEST_OUTPUT_MAX_BYTES);

    faults.clear();
    faults.flooding_agent(
        "capstan-prod-general-flood",
        "echo",
        GUEST_OUTPUT_MAX_BYTES + 1,
    );
    let err = setup
        .client
        .run_command(&vm, &argv, None, Duration::from_secs(5))
        .await
        .expect_err("over the cap");
    assert!(
        matches!(err, ProxmoxError::GuestOutputTooLarge { .. }) && !err.is_transient(),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains(&format!("VM {}", vm.vmid))
            && text.contains(&format!("the {GUEST_OUTPUT_MAX_BYTES} read")),
        "{text}"
    );
}
