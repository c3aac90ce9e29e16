#!/bin/bash
# Written by capstan: formats (the first time) and mounts each data disk of this VM that the
# cluster file gives a mount, found by the serial Proxmox set on it. One line per disk in
# /etc/capstan/data-disks: SERIAL PATH FILESYSTEM. An fstab line by UUID (with nofail) keeps
# each mount across reboots. Safe to run again: a formatted disk is never formatted twice.
set -euo pipefail

while read -r serial path fs; do
  [ -n "${serial:-}" ] || continue
  dev="/dev/disk/by-id/scsi-0QEMU_QEMU_HARDDISK_${serial}"
  for _ in $(seq 1 30); do
    [ -e "$dev" ] && break
    udevadm settle || true
    sleep 1
  done
  if [ ! -e "$dev" ]; then
    echo "no disk with serial ${serial} (${dev} not found)" >&2
    exit 1
  fi
  # blkid -p exits 2 when the device holds no filesystem (or other signature) at all.
  if ! blkid -p "$dev" >/dev/null 2>&1; then
    case "$fs" in
      ext4) mkfs.ext4 -q -L "${serial}" "$dev" ;;
      xfs) mkfs.xfs -q -L "${serial:0:12}" "$dev" ;;
      *) echo "unknown filesystem ${fs}" >&2; exit 1 ;;
    esac
  fi
  uuid="$(blkid -s UUID -o value "$dev")"
  mkdir -p "$path"
  if ! grep -q "^UUID=${uuid} " /etc/fstab; then
    echo "UUID=${uuid} ${path} ${fs} defaults,nofail 0 2" >> /etc/fstab
  fi
  mountpoint -q "$path" || mount "$path"
  echo "${dev}: ${fs} mounted at ${path}"
done < /etc/capstan/data-disks
