#!/usr/bin/env bash
# prepare-node.sh VERSION [--kubeadm-only]
#
# Phase 2 of a node: CRI-O and kubelet, kubeadm and kubectl of Kubernetes VERSION (e.g. 1.36.2)
# from the community repositories at pkgs.k8s.io, CRI-O of the same minor. With --kubeadm-only,
# only kubeadm moves (before `kubeadm upgrade apply`). Safe to run again: every step converges.
set -euo pipefail

version="${1:?usage: prepare-node.sh VERSION [--kubeadm-only]}"
mode="${2:-full}"
minor="v${version%.*}"
export DEBIAN_FRONTEND=noninteractive

add_repository() { # name url
  local name="$1" url="$2" keyring="/etc/apt/keyrings/$1.gpg"
  if [ ! -s "$keyring" ]; then
    curl -fsSL "$url/Release.key" | gpg --dearmor --yes -o "$keyring"
  fi
  echo "deb [signed-by=$keyring] $url/ /" > "/etc/apt/sources.list.d/$name.list"
}

install -d -m 0755 /etc/apt/keyrings
apt-get update -q
apt-get install -y -q apt-transport-https ca-certificates curl gpg
add_repository kubernetes "https://pkgs.k8s.io/core:/stable:/$minor/deb"
add_repository cri-o "https://download.opensuse.org/repositories/isv:/cri-o:/stable:/$minor/deb"
apt-get update -q

if [ "$mode" = "--kubeadm-only" ]; then
  apt-mark unhold kubeadm
  apt-get install -y -q --allow-downgrades "kubeadm=$version-*"
  apt-mark hold kubeadm
  exit 0
fi

# kubelet refuses to run with swap on, and pod networking needs these modules and sysctls.
swapoff -a
sed -i '/\sswap\s/s/^/#/' /etc/fstab
printf 'overlay\nbr_netfilter\n' > /etc/modules-load.d/kubernetes.conf
modprobe overlay
modprobe br_netfilter
cat > /etc/sysctl.d/90-kubernetes.conf <<'SYSCTL'
net.bridge.bridge-nf-call-iptables = 1
net.bridge.bridge-nf-call-ip6tables = 1
net.ipv4.ip_forward = 1
SYSCTL
sysctl --system > /dev/null

apt-mark unhold kubelet kubeadm kubectl cri-o 2>/dev/null || true
apt-get install -y -q --allow-downgrades cri-o "kubelet=$version-*" "kubeadm=$version-*" "kubectl=$version-*"
apt-mark hold kubelet kubeadm kubectl cri-o
systemctl enable --now crio
systemctl enable kubelet
