//! Rules of one machine (a pool's, or the control plane's): its sizes, its Proxmox nodes, its
//! vCPU type, and the names it gives Proxmox, checked as Proxmox checks them (they are also
//! quoted in statuses and pull-request comments, where a line break would start a block of its
//! own).

use super::diagnostic::{Diagnostic, SourceFile};
use super::types::Machine;
use super::values::{is_dns1123_label, is_storage_id, is_vm_name};

/// vCPU types without x86-64-v2 (SSE4.2, POPCNT): Calico's binaries crash on them (seed 004).
const CPU_TYPES_WITHOUT_X86_64_V2: &[&str] = &[
    "kvm32", "kvm64", "qemu32", "qemu64", "486", "pentium", "pentium2", "pentium3", "athlon",
    "coreduo", "core2duo", "n270", "phenom",
];

pub(super) fn check(
    out: &mut Vec<Diagnostic>,
    machine: &Machine,
    path: &str,
    replicas: u32,
    file: &SourceFile,
) {
    machine_names(out, machine, path, file);
    if machine.cores == 0 {
        out.push(file.error(&format!("{path}.cores"), "a VM needs at least 1 vCPU"));
    }
    if machine.memory_mib < 512 {
        out.push(
            file.error(
                &format!("{path}.memoryMiB"),
                format!(
                    "{} MiB is too little for a Kubernetes node",
                    machine.memory_mib
                ),
            )
            .with_hint("give a node at least 2048 MiB"),
        );
    }
    if machine.disk_gib < 10 {
        out.push(
            file.error(
                &format!("{path}.diskGiB"),
                format!(
                    "{} GiB is too small for a node's images and logs",
                    machine.disk_gib
                ),
            )
            .with_hint("use 50 GiB as the seed clusters do"),
        );
    }
    super::bounds::machine(out, machine, path, file);
    if machine.placement.is_empty() {
        out.push(
            file.error(
                &format!("{path}.placement"),
                "no Proxmox node to place VMs on",
            )
            .with_hint("list at least one, e.g. `placement: [pve1]`"),
        );
    }
    // Past its bound, the list is refused whole: its entries are not checked one by one.
    let entries = if super::bounds::placement_in_bounds(machine) {
        machine.placement.as_slice()
    } else {
        &[]
    };
    for (index, node) in entries.iter().enumerate() {
        if !is_dns1123_label(node) {
            out.push(file.error(
                &format!("{path}.placement[{index}]"),
                format!("`{node}` is not a Proxmox node name"),
            ));
        } else if machine.placement[..index].contains(node) {
            out.push(file.warning(
                &format!("{path}.placement[{index}]"),
                format!("`{node}` is listed twice"),
            ));
        }
    }
    if machine.placement.len() == 1 && replicas > 1 {
        out.push(
            file.warning(
                &format!("{path}.placement"),
                format!(
                    "all {replicas} replicas on `{}`: one host failure takes them all",
                    machine.placement[0]
                ),
            )
            .with_hint("list several Proxmox nodes to spread them"),
        );
    }
    let cpu_model = machine
        .cpu
        .split(',')
        .next()
        .unwrap_or_default()
        .trim_start_matches("cputype=");
    if CPU_TYPES_WITHOUT_X86_64_V2.contains(&cpu_model) {
        out.push(
            file.error(
                &format!("{path}.cpu"),
                format!("vCPU type `{cpu_model}` lacks x86-64-v2: binaries built for it stop with `Fatal glibc error: CPU does not support x86-64-v2` (Calico's among them)"),
            )
            .with_hint("use `x86-64-v2-AES` (the default) or `host`"),
        );
    }
}

/// The names a machine gives Proxmox, checked as Proxmox checks them: they are also quoted
/// in statuses and pull-request comments, where a line break would start a block of its own.
fn machine_names(out: &mut Vec<Diagnostic>, machine: &Machine, path: &str, file: &SourceFile) {
    if machine.template.trim().is_empty() {
        out.push(file.error(&format!("{path}.template"), "the template name is empty"));
    } else if !is_vm_name(&machine.template) {
        out.push(
            file.error(
                &format!("{path}.template"),
                format!("`{}` is not a Proxmox VM name", machine.template),
            )
            .with_hint("name the template as Proxmox shows it: letters, digits and `-`, in labels joined by `.` (`debian13-k8s`)"),
        );
    }
    if let Some(storage) = machine.storage.as_deref().filter(|s| !is_storage_id(s)) {
        out.push(
            file.error(
                &format!("{path}.storage"),
                format!("`{storage}` is not a Proxmox storage id"),
            )
            .with_hint("a storage id as Datacenter → Storage lists it, e.g. `local-lvm`"),
        );
    }
    let cpu = &machine.cpu;
    if cpu.is_empty() || cpu.len() > 128 || !cpu.bytes().all(|b| b.is_ascii_graphic()) {
        out.push(
            file.error(&format!("{path}.cpu"), format!("`{cpu}` is not a Proxmox vCPU type"))
                .with_hint("a type such as `x86-64-v2-AES` (the default) or `host`, with `,flags=...` if needed, without spaces"),
        );
    }
}
