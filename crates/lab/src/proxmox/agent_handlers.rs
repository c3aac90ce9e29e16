//! The simulated QEMU guest agent endpoints. Every call first checks the agent is available
//! (configured, VM running, booted, not hung), with a real host's error texts; `exec` runs the
//! command through the pluggable [`super::guest::GuestSoftware`].

use std::sync::Arc;

use base64::Engine as _;
use serde_json::{Value, json};

use super::endpoints::Route;
use super::params::Params;
use super::reply::Reply;
use super::state::{AgentState, ApiFail, ExecState, Shared};

pub(super) async fn agent(
    shared: &Arc<Shared>,
    route: Route,
    p: &Params,
) -> Result<Reply, ApiFail> {
    let (node, vmid) = (p.node().to_owned(), p.vmid());
    let command = match route {
        Route::AgentExec => "exec",
        Route::AgentExecStatus => "exec-status",
        Route::AgentNetwork => "network-get-interfaces",
        Route::AgentFileWrite => "file-write",
        Route::AgentOsinfo => "get-osinfo",
        _ => "ping",
    };
    let agent_state = shared.lock().agent_check(&node, vmid)?;
    if let AgentState::Hung = agent_state {
        tokio::time::sleep(shared.durations.agent_timeout).await;
        return Err(ApiFail::die(format!(
            "VM {vmid} qmp command 'guest-{command}' failed - got timeout"
        )));
    }
    let talos = shared.lock().vm_on(&node, vmid)?.talos.clone();
    // Addresses, file writes, pings and shutdown are the same agent's on any OS.
    if let Some(version) = talos
        && let Some(reply) = talos_agent(&route, command, &version)
    {
        return reply;
    }
    match route {
        Route::AgentPing => Reply::data(json!({"result": {}})),
        Route::AgentOsinfo => Reply::data(json!({"result": {
            "id": "debian",
            "name": "Debian GNU/Linux",
            "pretty-name": "Debian GNU/Linux 13 (trixie)",
            "version": "13 (trixie)",
            "version-id": "13",
            "kernel-release": "6.12.48+deb13-amd64",
            "kernel-version": "#1 SMP PREEMPT_DYNAMIC Debian 6.12.48-1",
            "machine": "x86_64",
        }})),
        Route::AgentNetwork => {
            let state = shared.lock();
            let vm = state.vm_on(&node, vmid)?;
            let addresses = state.card_addresses(vmid);
            let mut interfaces = vec![json!({
                "name": "lo",
                "hardware-address": "00:00:00:00:00:00",
                "ip-addresses": [
                    {"ip-address": "127.0.0.1", "ip-address-type": "ipv4", "prefix": 8},
                    {"ip-address": "::1", "ip-address-type": "ipv6", "prefix": 128},
                ],
                "statistics": {"rx-bytes": 0, "rx-packets": 0, "rx-errs": 0, "rx-dropped": 0,
                               "tx-bytes": 0, "tx-packets": 0, "tx-errs": 0, "tx-dropped": 0},
            })];
            // The guest names its cards in slot order, as the agent lists them.
            for card in super::addresses::cards(&vm.config) {
                let mut ip = Vec::new();
                if let Some((_, address)) = addresses.iter().find(|(i, _)| *i == card.index) {
                    ip.push(json!({"ip-address": address.to_string(), "ip-address-type": "ipv4", "prefix": state.prefix_of(*address)}));
                }
                ip.push(json!({"ip-address": format!("fe80::be24:11ff:fe{:02x}:{vmid:x}", card.index), "ip-address-type": "ipv6", "prefix": 64}));
                interfaces.push(json!({
                    "name": format!("eth{}", card.index),
                    "hardware-address": card.mac,
                    "ip-addresses": ip,
                    "statistics": {"rx-bytes": 1_048_576, "rx-packets": 1024, "rx-errs": 0, "rx-dropped": 0,
                                   "tx-bytes": 524_288, "tx-packets": 512, "tx-errs": 0, "tx-dropped": 0},
                }));
            }
            Reply::data(json!({"result": interfaces}))
        }
        Route::AgentExec => {
            let argv = p.list("command");
            if argv.is_empty() {
                return Err(ApiFail::param("command", "no command specified"));
            }
            let input = p.text("input-data").map(str::to_owned);
            let (pid, identity, flood) = {
                let mut state = shared.lock();
                let flood = argv
                    .first()
                    .and_then(|program| state.flood_of(vmid, program));
                if state.is_hostile(vmid, argv.first().map(String::as_str)) {
                    let received = state
                        .vm_on(&node, vmid)
                        .map(|vm| {
                            let newest_first: Vec<&str> =
                                vm.received.iter().rev().map(String::as_str).collect();
                            newest_first.join(" ")
                        })
                        .unwrap_or_default();
                    return Err(ApiFail::die(format!(
                        "Agent error: Guest agent command failed, error was '{} {received}'",
                        argv.join(" ")
                    )));
                }
                let identity = state.identity(vmid);
                let vm = state.vm_on_mut(&node, vmid)?;
                vm.next_exec_pid += 1;
                let pid = vm.next_exec_pid;
                vm.execs.insert(pid, ExecState::Running);
                (pid, identity, flood)
            };
            let Some(identity) = identity else {
                return Err(super::state::missing_config(&node, vmid));
            };
            let future = shared.guest.exec(&identity, &argv, input.as_deref());
            let shared = shared.clone();
            tokio::spawn(async move {
                let mut outcome = future.await;
                if let Some(bytes) = flood {
                    outcome.stdout = "A".repeat(bytes);
                }
                let mut state = shared.lock();
                if let Some(vm) = state.vms.get_mut(&vmid)
                    && let Some(entry) = vm.execs.get_mut(&pid)
                {
                    *entry = ExecState::Done(outcome);
                }
            });
            Reply::data(json!({"pid": pid}))
        }
        Route::AgentExecStatus => {
            let pid = p.int("pid").unwrap_or(-1);
            let mut state = shared.lock();
            let vm = state.vm_on_mut(&node, vmid)?;
            let pid = u64::try_from(pid).unwrap_or(u64::MAX);
            match vm.execs.get(&pid) {
                None => Err(ApiFail::die("Agent error: Invalid parameter 'pid'")),
                Some(ExecState::Running) => Reply::data(json!({"exited": 0})),
                Some(ExecState::Done(_)) => {
                    // The guest agent forgets a process once its end has been read.
                    let Some(ExecState::Done(outcome)) = vm.execs.remove(&pid) else {
                        return Err(ApiFail::die("Agent error: Invalid parameter 'pid'"));
                    };
                    let mut reply = json!({"exited": 1, "exitcode": outcome.exit_code});
                    if !outcome.stdout.is_empty() {
                        reply["out-data"] = Value::from(outcome.stdout);
                    }
                    if !outcome.stderr.is_empty() {
                        reply["err-data"] = Value::from(outcome.stderr);
                    }
                    Reply::data(reply)
                }
            }
        }
        Route::AgentFileWrite => {
            let content = p.text("content").unwrap_or_default();
            let bytes = if p.flag("encode") == Some(false) {
                base64::engine::general_purpose::STANDARD
                    .decode(content)
                    .map_err(|_| ApiFail::die("Agent error: Base64 data is invalid"))?
            } else {
                content.as_bytes().to_vec()
            };
            let file = p.text("file").unwrap_or_default().to_owned();
            let identity = {
                let mut state = shared.lock();
                if state.is_hostile(vmid, None)
                    && let Some(vm) = state.vms.get_mut(&vmid)
                {
                    vm.received
                        .push(String::from_utf8_lossy(&bytes).into_owned());
                }
                state.identity(vmid)
            };
            if let Some(identity) = identity {
                shared
                    .guest
                    .file_written(&identity, &file, &bytes)
                    .map_err(|reason| {
                        ApiFail::die(format!(
                            "VM {vmid} qmp command 'guest-file-open' failed - {reason}"
                        ))
                    })?;
            }
            Reply::data(Value::Null)
        }
        _ => Err(ApiFail::die(format!("Method '{command}' not implemented"))),
    }
}

/// What Talos's guest agent (the `qemu-guest-agent` system extension) answers differently:
/// its os-release, and no commands: Talos has no shell and the extension allows no
/// `guest-exec`, which QEMU's agent refuses as a disabled command (Proxmox VE prefixes
/// "Agent error: "). `None` for the calls any agent answers alike.
fn talos_agent(route: &Route, command: &str, version: &str) -> Option<Result<Reply, ApiFail>> {
    match route {
        Route::AgentExec | Route::AgentExecStatus => Some(Err(ApiFail::die(format!(
            "Agent error: Command guest-{command} has been disabled: the command is not allowed"
        )))),
        Route::AgentOsinfo => Some(Reply::data(json!({"result": {
            "id": "talos",
            "name": "Talos",
            "pretty-name": format!("Talos ({version})"),
            "version-id": version,
            "kernel-release": "6.12.57-talos",
            "kernel-version": "#1 SMP",
            "machine": "x86_64",
        }}))),
        _ => None,
    }
}
