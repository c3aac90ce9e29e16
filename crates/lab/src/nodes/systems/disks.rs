//! A node's data disks, as its guest sees them: `lsblk` lists the block devices its VM's
//! config gives it (each with the serial Proxmox sets), and capstan's mount script formats and
//! mounts the ones its list names, failing as the real script does when no disk has a serial.

use std::collections::BTreeMap;

use crate::proxmox::{ExecOutcome as Exit, GuestIdentity as GuestVm};

/// `lsblk -dn -o NAME,SERIAL,SIZE,MOUNTPOINT` (the only form the lab runs): one line per
/// disk, the size in bytes (`-b`), `-` for no serial or mount point.
pub(super) fn lsblk(
    mounts: &BTreeMap<String, (String, String)>,
    vm: &GuestVm,
    args: &[String],
) -> Exit {
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    if words != ["-b", "-dn", "-o", "NAME,SERIAL,SIZE,MOUNTPOINT"] {
        return Exit::failure(
            1,
            "lsblk: the lab runs only `lsblk -b -dn -o NAME,SERIAL,SIZE,MOUNTPOINT`\n",
        );
    }
    let mut out = String::new();
    for disk in &vm.hardware.disks {
        let device = format!("/dev/{}", disk.name);
        let mount = mounts
            .iter()
            .find(|(_, (dev, _))| *dev == device)
            .map_or("-", |(path, _)| path.as_str());
        out.push_str(&format!(
            "{} {} {} {mount}\n",
            disk.name,
            disk.serial.as_deref().unwrap_or("-"),
            disk.size_bytes
        ));
    }
    Exit::success(out)
}

/// capstan's mount script over its list (`SERIAL PATH FS` lines): each disk found by its
/// serial is formatted (the first time) and mounted at its path; a serial no disk has fails
/// the script, naming it.
pub(super) fn mount_data_disks(
    mounts: &mut BTreeMap<String, (String, String)>,
    vm: &GuestVm,
    list: &str,
) -> Exit {
    let mut out = String::new();
    for line in list.lines().filter(|l| !l.trim().is_empty()) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let [serial, path, fs] = words.as_slice() else {
            return Exit::failure(1, format!("mount-data-disks: malformed line `{line}`\n"));
        };
        if !["ext4", "xfs"].contains(fs) {
            return Exit::failure(1, format!("mkfs.{fs}: command not found\n"));
        }
        let Some(disk) = vm
            .hardware
            .disks
            .iter()
            .find(|d| d.serial.as_deref() == Some(*serial))
        else {
            return Exit::failure(
                1,
                format!(
                    "no disk with serial {serial} (/dev/disk/by-id/scsi-0QEMU_QEMU_HARDDISK_{serial} not found)\n"
                ),
            );
        };
        let device = format!("/dev/{}", disk.name);
        if mounts.get(*path).is_none_or(|(dev, _)| *dev != device) {
            out.push_str(&format!("{device}: {fs} mounted at {path}\n"));
        }
        mounts.insert((*path).to_owned(), (device, (*fs).to_owned()));
    }
    Exit::success(out)
}
