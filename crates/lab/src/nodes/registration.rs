//! What a kubelet registers its Node with, read from the configuration its node was given:
//! kubeadm's `nodeRegistration` (`kubeletExtraArgs` `node-labels`, `taints`), K3s's
//! `--node-label` and `--node-taint`, Talos's machine config (`machine.nodeLabels`,
//! `machine.kubelet.extraConfig.registerWithTaints`, `cluster.allowSchedulingOnControlPlanes`).
//! Each distribution's own control-plane taint is decided here as that distribution decides
//! it; the API server judges the labels (NodeRestriction, in `kube::node_restriction`).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::kube::SimTaint;
use capstan_core::model::Role;

/// The labels and taints a Node registers with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Registration {
    /// Labels the kubelet sets on itself (NodeRestriction judges them).
    pub labels: BTreeMap<String, String>,
    /// Labels the distribution sets with its own credentials once the Node exists (Talos's
    /// `machine.nodeLabels` on a control plane): not a kubelet's, so not judged.
    pub privileged_labels: BTreeMap<String, String>,
    /// The taints it registers with, exactly.
    pub taints: Vec<SimTaint>,
    /// Annotations the distribution writes on the Node (Talos's record of the label and taint
    /// keys it owns, `talos.dev/owned-labels` and `talos.dev/owned-taints`).
    pub annotations: BTreeMap<String, String>,
    /// The kubelet configuration's `maxPods` (the Node's pod capacity); unset: the kubelet's
    /// default, 110.
    pub max_pods: Option<u32>,
}

const EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

impl Registration {
    /// Adds the labels of a `--node-labels` value (`k=v,k2=v2`), refused in the kubelet's words
    /// when a pair has no `=`.
    ///
    /// # Errors
    /// The kubelet's message.
    pub fn add_labels_flag(&mut self, flag: &str, text: &str) -> Result<(), String> {
        for pair in text.split(',').filter(|pair| !pair.is_empty()) {
            let (key, value) = pair.split_once('=').ok_or_else(|| {
                format!("invalid argument \"{text}\" for \"{flag}\" flag: {pair} must be formatted as key=value")
            })?;
            self.labels.insert(key.to_owned(), value.to_owned());
        }
        Ok(())
    }

    /// Adds a taint written `key[=value]:Effect` (K3s's `--node-taint`, the kubelet's
    /// `--register-with-taints`).
    ///
    /// # Errors
    /// The kubelet's message for a malformed one.
    pub fn add_taint_flag(&mut self, text: &str) -> Result<(), String> {
        let malformed = || format!("invalid taint spec: {text}");
        let (key_value, effect) = text.rsplit_once(':').ok_or_else(malformed)?;
        let (key, value) = match key_value.split_once('=') {
            Some((key, value)) => (key, Some(value.to_owned())),
            None => (key_value, None),
        };
        self.push_taint(key, value, effect).map_err(|_| malformed())
    }

    fn push_taint(&mut self, key: &str, value: Option<String>, effect: &str) -> Result<(), String> {
        if key.is_empty() || !EFFECTS.contains(&effect) {
            return Err(format!(
                "invalid taint effect: {effect}, unsupported taint effect"
            ));
        }
        self.taints.push(SimTaint {
            key: key.to_owned(),
            value: value.filter(|v| !v.is_empty()),
            effect: effect.to_owned(),
        });
        Ok(())
    }

    /// Adds taints written as the API writes them (`[{key, value, effect}]`): kubeadm's
    /// `nodeRegistration.taints`, a KubeletConfiguration's `registerWithTaints`.
    ///
    /// # Errors
    /// The tool's message for an entry without a key or with an unknown effect.
    pub fn add_taint_objects(&mut self, taints: &[Value]) -> Result<(), String> {
        for taint in taints {
            let key = taint["key"].as_str().unwrap_or_default();
            let effect = taint["effect"].as_str().unwrap_or_default();
            let value = taint["value"].as_str().map(str::to_owned);
            self.push_taint(key, value, effect)?;
        }
        Ok(())
    }

    /// kubeadm's `nodeRegistration` of an Init or JoinConfiguration (v1beta4's list of
    /// `kubeletExtraArgs`, v1beta3's map): `node-labels`, and `taints`, which when absent
    /// means kubeadm's default (the control-plane taint on a control plane, none on a worker)
    /// and when `[]` means none.
    ///
    /// # Errors
    /// kubeadm's or the kubelet's message for a malformed field.
    pub fn from_kubeadm(registration: &Value, role: Role) -> Result<Self, String> {
        let mut out = Registration::default();
        let args = &registration["kubeletExtraArgs"];
        let labels = match args {
            Value::Array(list) => list
                .iter()
                .find(|arg| arg["name"] == "node-labels")
                .and_then(|arg| arg["value"].as_str()),
            Value::Object(map) => map.get("node-labels").and_then(Value::as_str),
            _ => None,
        };
        if let Some(labels) = labels {
            out.add_labels_flag("--node-labels", labels)?;
        }
        match &registration["taints"] {
            Value::Array(taints) => out.add_taint_objects(taints)?,
            _ if role == Role::ControlPlane => out.taints.push(SimTaint::control_plane()),
            _ => {}
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kubeadm_registers_its_default_control_plane_taint_unless_told_which_taints() {
        let defaulted =
            Registration::from_kubeadm(&json!({"name": "cp"}), Role::ControlPlane).expect("read");
        assert_eq!(defaulted.taints, [SimTaint::control_plane()]);
        let none =
            Registration::from_kubeadm(&json!({"taints": []}), Role::ControlPlane).expect("read");
        assert!(none.taints.is_empty());
        let worker = Registration::from_kubeadm(
            &json!({
                "kubeletExtraArgs": [{"name": "node-ip", "value": "10.0.0.1"},
                                     {"name": "node-labels", "value": "a=1,b.io/c="}],
                "taints": [{"key": "dedicated", "value": "memory", "effect": "NoSchedule"}],
            }),
            Role::Worker,
        )
        .expect("read");
        assert_eq!(worker.labels["a"], "1");
        assert_eq!(worker.labels["b.io/c"], "");
        assert_eq!(worker.taints[0].value.as_deref(), Some("memory"));
        let refused = Registration::from_kubeadm(
            &json!({"taints": [{"key": "x", "effect": "NoScheduled"}]}),
            Role::Worker,
        );
        assert!(refused.is_err());
    }

    #[test]
    fn taint_flags_read_as_the_kubelet_reads_them() {
        let mut registration = Registration::default();
        registration
            .add_taint_flag("dedicated=memory:NoSchedule")
            .expect("valid");
        registration.add_taint_flag("gpu:NoExecute").expect("valid");
        assert_eq!(registration.taints[1].value, None);
        assert!(registration.add_taint_flag("gpu").is_err());
        assert!(registration.add_taint_flag("gpu:Never").is_err());
    }
}
