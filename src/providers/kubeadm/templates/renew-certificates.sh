#!/usr/bin/env bash
# renew-certificates.sh
#
# Renews every certificate kubeadm manages on this control plane (one more year), then restarts
# the control-plane static pods so they load the new certificates, as kubeadm's documentation
# asks ("After running the command you should restart the control plane Pods").
set -euo pipefail

kubeadm certs renew all
for component in kube-apiserver kube-controller-manager kube-scheduler etcd; do
  for pod in $(crictl pods --name "$component" --quiet); do
    crictl stopp "$pod" > /dev/null
    crictl rmp "$pod" > /dev/null
  done
done
# The kubelet re-creates the static pods; wait until the API server answers again.
for _ in $(seq 1 60); do
  if kubectl --kubeconfig /etc/kubernetes/admin.conf get --raw /readyz > /dev/null 2>&1; then
    exit 0
  fi
  sleep 2
done
echo "the API server did not come back within 2 minutes" >&2
exit 1
