//! The rules of a machine's hardware, tags and resource pool (`machine.sockets`, `disks`,
//! `networks`, `pci`, `tags`, `pool`): every value is one Proxmox accepts in the property string
//! capstan writes it into, and a tag cannot claim to be capstan's.

use super::diagnostic::{Diagnostic, SourceFile};
use super::hardware::{
    MAX_DATA_DISK_GIB, MAX_DISKS, MAX_NETWORKS, MAX_PCI_DEVICES, MAX_SOCKETS, MAX_TAGS, MTU_RANGE,
    NicModel, RESERVED_TAG_PREFIXES, is_config_id, is_pool_id, is_pve_tag,
};
use super::types::{Distribution, Machine};
use super::values::is_storage_id;

/// The rules of one machine's hardware, tags and pool, at `path`.
pub(super) fn check(
    out: &mut Vec<Diagnostic>,
    machine: &Machine,
    path: &str,
    distribution: Distribution,
    file: &SourceFile,
) {
    if let Some(sockets) = machine.sockets
        && !(1..=MAX_SOCKETS).contains(&sockets)
    {
        out.push(file.error(
            &format!("{path}.sockets"),
            format!("{sockets} sockets: a VM has 1 to {MAX_SOCKETS}"),
        ));
    }
    disks(out, machine, path, distribution, file);
    networks(out, machine, path, file);
    pci(out, machine, path, file);
    tags(out, machine, path, file);
    if let Some(pool) = &machine.pool
        && !is_pool_id(pool)
    {
        out.push(
            file.error(
                &format!("{path}.pool"),
                format!("`{}` is not a Proxmox resource pool id", shown(pool)),
            )
            .with_hint("letters, digits, `.`, `-` and `_`, up to three levels joined by `/`"),
        );
    }
}

/// A value quoted in a finding: at most 64 characters, control characters escaped.
fn shown(value: &str) -> String {
    value
        .chars()
        .take(64)
        .flat_map(char::escape_debug)
        .collect()
}

fn disks(
    out: &mut Vec<Diagnostic>,
    machine: &Machine,
    path: &str,
    distribution: Distribution,
    file: &SourceFile,
) {
    if machine.disks.len() > MAX_DISKS {
        out.push(file.error(
            &format!("{path}.disks"),
            format!(
                "{} disks: a VM has at most {MAX_DISKS} besides its boot disk (scsi1 to scsi30)",
                machine.disks.len()
            ),
        ));
        return;
    }
    let mut mounts: Vec<&str> = Vec::new();
    for (index, disk) in machine.disks.iter().enumerate() {
        let at = format!("{path}.disks[{index}]");
        if !(1..=MAX_DATA_DISK_GIB).contains(&disk.size_gib) {
            out.push(file.error(
                &format!("{at}.sizeGiB"),
                format!(
                    "{} GiB: a data disk has 1 to {MAX_DATA_DISK_GIB} GiB",
                    disk.size_gib
                ),
            ));
        }
        if let Some(storage) = disk.storage.as_deref().filter(|s| !is_storage_id(s)) {
            out.push(
                file.error(
                    &format!("{at}.storage"),
                    format!("`{}` is not a Proxmox storage id", shown(storage)),
                )
                .with_hint("a storage id as Datacenter → Storage lists it, e.g. `local-lvm`"),
            );
        }
        let Some(mount) = &disk.mount else { continue };
        let mount_path = mount.path.as_str();
        if !is_plain_path(mount_path) {
            out.push(
                file.error(
                    &format!("{at}.mount.path"),
                    format!(
                        "`{}` is not an absolute path of plain names",
                        shown(mount_path)
                    ),
                )
                .with_hint(
                    "e.g. `/var/lib/longhorn`: letters, digits, `-`, `_` and `.` between slashes",
                ),
            );
            continue;
        }
        if let Some(under) = distribution.capabilities().user_volumes_under {
            let name = mount_path.strip_prefix(under).unwrap_or_default();
            let named = (1..=34).contains(&name.len())
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
            if !named {
                out.push(
                    file.error(
                        &format!("{at}.mount.path"),
                        format!(
                            "{} mounts user volumes only at {under}<name>, not at {mount_path}",
                            distribution.capabilities().tool
                        ),
                    )
                    .with_hint(format!(
                        "mount it at {under}<name> (a name of 1 to 34 letters, digits and `-`), and give workloads that path (or a kubelet extra mount of it)"
                    )),
                );
            }
        } else if [
            "/", "/boot", "/etc", "/usr", "/var", "/var/lib", "/proc", "/sys", "/dev",
        ]
        .contains(&mount_path)
        {
            out.push(file.error(
                &format!("{at}.mount.path"),
                format!(
                    "{mount_path} is the system's own: a data disk mounted there would hide it"
                ),
            ));
        }
        if mounts.contains(&mount_path) {
            out.push(file.error(
                &format!("{at}.mount.path"),
                format!("{mount_path} is already the mount of another disk"),
            ));
        }
        mounts.push(mount_path);
    }
}

/// Whether `path` is an absolute path of plain names (letters, digits, `-`, `_`, `.`; no `.`
/// or `..`, no trailing `/`), at most 255 bytes.
fn is_plain_path(path: &str) -> bool {
    path.starts_with('/')
        && path.len() > 1
        && path.len() <= 255
        && !path.ends_with('/')
        && path.split('/').skip(1).all(|part| {
            !part.is_empty()
                && part != "."
                && part != ".."
                && part
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        })
}

fn networks(out: &mut Vec<Diagnostic>, machine: &Machine, path: &str, file: &SourceFile) {
    if machine.networks.len() > MAX_NETWORKS {
        out.push(file.error(
            &format!("{path}.networks"),
            format!(
                "{} cards: a VM has at most {MAX_NETWORKS} (net0 to net31)",
                machine.networks.len()
            ),
        ));
        return;
    }
    let primaries = machine.networks.iter().filter(|c| c.primary).count();
    if primaries > 1 {
        out.push(
            file.error(
                &format!("{path}.networks"),
                format!(
                    "{primaries} cards say `primary: true`: one card carries the node's address"
                ),
            )
            .with_hint("keep `primary: true` on one card (without it, the first card carries it)"),
        );
    }
    for (index, card) in machine.networks.iter().enumerate() {
        let at = format!("{path}.networks[{index}]");
        let bridge_ok = !card.bridge.is_empty()
            && card.bridge.len() <= 15
            && card
                .bridge
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
        if !bridge_ok {
            out.push(
                file.error(
                    &format!("{at}.bridge"),
                    format!("`{}` is not a Proxmox bridge name", shown(&card.bridge)),
                )
                .with_hint("a bridge as the node's Network page lists it, e.g. `vmbr0` (at most 15 characters)"),
            );
        }
        if let Some(vlan) = card.vlan
            && !(1..=4094).contains(&vlan)
        {
            out.push(file.error(
                &format!("{at}.vlan"),
                format!("VLAN {vlan}: a VLAN tag is 1 to 4094"),
            ));
        }
        if let Some(mtu) = card.mtu {
            if !(MTU_RANGE.0..=MTU_RANGE.1).contains(&mtu) {
                out.push(file.error(
                    &format!("{at}.mtu"),
                    format!("MTU {mtu}: from {} to {}", MTU_RANGE.0, MTU_RANGE.1),
                ));
            } else if card.model != NicModel::Virtio {
                out.push(
                    file.error(
                        &format!("{at}.mtu"),
                        format!(
                            "Proxmox sets a card's MTU for VirtIO cards only, not {}",
                            card.model.as_str()
                        ),
                    )
                    .with_hint(
                        "use `model: virtio` (the default), or set the MTU inside the guest",
                    ),
                );
            }
        }
    }
}

fn pci(out: &mut Vec<Diagnostic>, machine: &Machine, path: &str, file: &SourceFile) {
    if machine.pci.len() > MAX_PCI_DEVICES {
        out.push(file.error(
            &format!("{path}.pci"),
            format!(
                "{} devices: a VM has at most {MAX_PCI_DEVICES} (hostpci0 to hostpci15)",
                machine.pci.len()
            ),
        ));
        return;
    }
    for (index, device) in machine.pci.iter().enumerate() {
        if !is_config_id(&device.mapping) {
            out.push(
                file.error(
                    &format!("{path}.pci[{index}].mapping"),
                    format!("`{}` is not a Proxmox mapping id", shown(&device.mapping)),
                )
                .with_hint("the id Datacenter → Resource Mappings shows: a letter, then letters, digits, `-` and `_`"),
            );
        }
    }
}

fn tags(out: &mut Vec<Diagnostic>, machine: &Machine, path: &str, file: &SourceFile) {
    if machine.tags.len() > MAX_TAGS {
        out.push(file.error(
            &format!("{path}.tags"),
            format!("{} tags: at most {MAX_TAGS}", machine.tags.len()),
        ));
        return;
    }
    for (index, tag) in machine.tags.iter().enumerate() {
        let at = format!("{path}.tags[{index}]");
        if !is_pve_tag(tag) {
            out.push(
                file.error(&at, format!("`{}` is not a Proxmox tag", shown(tag)))
                    .with_hint("lowercase letters, digits, `_`, `-`, `+` and `.`, not starting with `-`, `+` or `.`"),
            );
        } else if let Some(prefix) = RESERVED_TAG_PREFIXES.iter().find(|p| tag.starts_with(**p)) {
            out.push(
                file.error(
                    &at,
                    format!("`{tag}` starts with `{prefix}`, which marks what capstan owns"),
                )
                .with_hint("choose a tag that starts otherwise: capstan's own tags say who owns a VM and which address it holds"),
            );
        } else if machine.tags[..index].contains(tag) {
            out.push(file.warning(&at, format!("`{tag}` is listed twice")));
        }
    }
}
