//! The machine spec a VM was built from (see [`MachineSpec`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha1::{Digest, Sha1};
use smol_str::SmolStr;

use crate::model::Role;
use crate::spec::hardware::{MachineHardware, listed};
use crate::spec::{ClusterSpec, Distribution, KubeVersion, Machine};
use crate::talos::TalosVersion;

/// The normalised machine spec that makes a node what it is. Two machines with equal specs are
/// interchangeable; a machine whose spec differs from the desired one is replaced, never changed
/// in place. Placement and storage are not part of it: they say where, not what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MachineSpec {
    /// Proxmox template cloned.
    pub template: SmolStr,
    /// vCPUs.
    pub cores: u32,
    /// Memory in MiB.
    #[serde(rename = "memoryMiB")]
    pub memory_mib: u32,
    /// Boot disk in GiB.
    #[serde(rename = "diskGiB")]
    pub disk_gib: u32,
    /// Proxmox vCPU type.
    pub cpu: SmolStr,
    /// Kubernetes release of the node's packages.
    pub kubernetes: KubeVersion,
    /// How the node is built.
    pub distribution: Distribution,
    /// Control plane or worker.
    pub role: Role,
    /// The Talos release the machine runs (Talos clusters only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub talos: Option<TalosVersion>,
    /// Sockets, data disks, network cards and PCI devices, when the file declares any.
    #[serde(default, skip_serializing_if = "MachineHardware::is_default")]
    pub hardware: MachineHardware,
    /// The digest of the patches that reach the machine (`spec::patches::digest`), when any
    /// does: a changed patch replaces the machines it reaches, and only those.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patches: Option<SmolStr>,
    /// The digest of `kubernetes.registries` (`Registries::digest`: what the file says, never
    /// a password), when it says anything: the runtime reads it as it starts, so a change
    /// replaces every machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registries: Option<SmolStr>,
    /// The digest of `kubernetes.authentication` (`spec::authentication::digest`), on control
    /// planes only: the API server reads it, so a change replaces the control planes and no
    /// worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<SmolStr>,
}

impl MachineSpec {
    /// The spec of one of `spec`'s machines at a Kubernetes release: [`MachineSpec::new`] with
    /// the cluster's distribution, for Talos its release, and the digest of the patches that
    /// reach the machines of `pool` (`None`: the control planes).
    pub fn for_cluster(
        spec: &ClusterSpec,
        pool: Option<&str>,
        machine: &Machine,
        kubernetes: KubeVersion,
        role: Role,
    ) -> Self {
        MachineSpec {
            talos: spec.talos.as_ref().map(|t| t.version),
            patches: crate::spec::patches::digest(spec, pool),
            registries: spec.kubernetes.registries.digest(),
            authentication: match role {
                Role::ControlPlane => {
                    crate::spec::authentication::digest(spec.kubernetes.authentication.as_ref())
                }
                Role::Worker => None,
            },
            ..MachineSpec::new(machine, kubernetes, spec.kubernetes.distribution, role)
        }
    }

    /// The spec of a machine of the cluster language, at a Kubernetes release.
    pub fn new(
        machine: &Machine,
        kubernetes: KubeVersion,
        distribution: Distribution,
        role: Role,
    ) -> Self {
        MachineSpec {
            template: machine.template.as_str().into(),
            cores: machine.cores,
            memory_mib: machine.memory_mib,
            disk_gib: machine.disk_gib,
            cpu: machine.cpu.as_str().into(),
            kubernetes,
            distribution,
            role,
            talos: None,
            hardware: MachineHardware::of(machine),
            patches: None,
            registries: None,
            authentication: None,
        }
    }

    /// The spec hash stored on the VM ([`Ownership::spec_hash`]): the first 12 hex digits of
    /// the sha1 of the normalised spec, one `field=value` line each in a fixed order.
    pub fn spec_hash(&self) -> SmolStr {
        let distribution = self.distribution.name();
        let normalised = format!(
            "template={}\ncores={}\nmemoryMiB={}\ndiskGiB={}\ncpu={}\nkubernetes={}\ndistribution={}\nrole={}\n",
            self.template.trim(),
            self.cores,
            self.memory_mib,
            self.disk_gib,
            self.cpu.trim(),
            self.kubernetes,
            distribution,
            self.role,
        );
        // Only Talos machines carry the line: every other machine keeps the hash it had.
        let normalised = match self.talos {
            Some(talos) => format!("{normalised}talos={talos}\n"),
            None => normalised,
        };
        // Likewise only machines that declare hardware: a file without it hashes as before.
        let normalised = if self.hardware.is_default() {
            normalised
        } else {
            format!("{normalised}hardware={}\n", self.hardware.canonical())
        };
        // Likewise only machines some patch reaches.
        let patches = self.patches.as_ref().map(|p| format!("patches={p}\n"));
        let normalised = normalised + &patches.unwrap_or_default();
        // Likewise only machines of a cluster that declares registries.
        let registries = self
            .registries
            .as_ref()
            .map(|r| format!("registries={r}\n"));
        let normalised = normalised + &registries.unwrap_or_default();
        // Likewise only control planes of clusters with single sign-on.
        let authentication = self
            .authentication
            .as_ref()
            .map(|a| format!("authentication={a}\n"));
        let normalised = normalised + &authentication.unwrap_or_default();
        let digest = Sha1::digest(normalised.as_bytes());
        // The first 6 bytes in lowercase hex (a format per byte cost more than the digest: a
        // plan hashes every pool of every cluster).
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut hash = [0u8; 12];
        for (pair, byte) in hash.chunks_exact_mut(2).zip(digest.iter()) {
            pair[0] = HEX[usize::from(byte >> 4)];
            pair[1] = HEX[usize::from(byte & 0x0f)];
        }
        // Twelve hex digits: ASCII, and short enough to stay inline.
        SmolStr::new_inline(std::str::from_utf8(&hash).unwrap_or_default())
    }

    /// One line naming every field (`template=debian13-k8s cores=4 ...`): what the executor
    /// writes into a new VM's description, read back by [`MachineSpec::parse_summary`].
    pub fn summary(&self) -> String {
        let distribution = self.distribution.name();
        let summary = format!(
            "template={} cores={} memoryMiB={} diskGiB={} cpu={} kubernetes={} distribution={distribution} role={}",
            self.template,
            self.cores,
            self.memory_mib,
            self.disk_gib,
            self.cpu,
            self.kubernetes,
            self.role
        );
        let summary = match self.talos {
            Some(talos) => format!("{summary} talos={talos}"),
            None => summary,
        };
        let summary = if self.hardware.is_default() {
            summary
        } else {
            format!("{summary} hardware={}", self.hardware.canonical())
        };
        let patches = self.patches.as_ref().map(|p| format!(" patches={p}"));
        let registries = self.registries.as_ref().map(|r| format!(" registries={r}"));
        let authentication = self
            .authentication
            .as_ref()
            .map(|a| format!(" authentication={a}"));
        format!(
            "{summary}{}{}{}",
            patches.unwrap_or_default(),
            registries.unwrap_or_default(),
            authentication.unwrap_or_default()
        )
    }

    /// Reads a [`MachineSpec::summary`] back; `None` when a field is missing or malformed.
    pub fn parse_summary(line: &str) -> Option<MachineSpec> {
        let field = |key: &str| {
            line.split_whitespace()
                .find_map(|pair| pair.strip_prefix(key)?.strip_prefix('='))
                .filter(|v| !v.is_empty())
        };
        Some(MachineSpec {
            template: field("template")?.into(),
            cores: field("cores")?.parse().ok()?,
            memory_mib: field("memoryMiB")?.parse().ok()?,
            disk_gib: field("diskGiB")?.parse().ok()?,
            cpu: field("cpu")?.into(),
            kubernetes: field("kubernetes")?.parse().ok()?,
            distribution: Distribution::from_name(field("distribution")?)?,
            role: match field("role")? {
                "control-plane" => Role::ControlPlane,
                "worker" => Role::Worker,
                _ => return None,
            },
            talos: match field("talos") {
                Some(talos) => Some(talos.parse().ok()?),
                None => None,
            },
            hardware: match field("hardware") {
                Some(text) => MachineHardware::from_canonical(text)?,
                None => MachineHardware::default(),
            },
            patches: field("patches").map(SmolStr::new),
            registries: field("registries").map(SmolStr::new),
            authentication: field("authentication").map(SmolStr::new),
        })
    }

    /// The fields that differ from `newer`, as `field old → new`, for reasons like
    /// "outdated: template debian13-k8s → debian13-k8s-v2".
    pub fn differences(&self, newer: &MachineSpec) -> Vec<String> {
        // Compared first, formatted only when they differ: this runs for every outdated
        // machine at every step of a prediction.
        fn field<T: PartialEq + std::fmt::Display>(
            out: &mut Vec<String>,
            name: &str,
            old: &T,
            new: &T,
        ) {
            if old != new {
                out.push(format!("{name} {old} → {new}"));
            }
        }
        let mut out = Vec::new();
        field(&mut out, "template", &self.template, &newer.template);
        field(&mut out, "cores", &self.cores, &newer.cores);
        field(&mut out, "memoryMiB", &self.memory_mib, &newer.memory_mib);
        field(&mut out, "diskGiB", &self.disk_gib, &newer.disk_gib);
        field(&mut out, "cpu", &self.cpu, &newer.cpu);
        field(&mut out, "kubernetes", &self.kubernetes, &newer.kubernetes);
        if self.distribution != newer.distribution {
            out.push(format!(
                "distribution {} → {}",
                format!("{:?}", self.distribution).to_lowercase(),
                format!("{:?}", newer.distribution).to_lowercase()
            ));
        }
        field(&mut out, "role", &self.role, &newer.role);
        if self.talos != newer.talos {
            let name = |v: Option<TalosVersion>| v.map_or("none".to_owned(), |v| v.to_string());
            out.push(format!(
                "talos {} → {}",
                name(self.talos),
                name(newer.talos)
            ));
        }
        let (old, new) = (&self.hardware, &newer.hardware);
        field(&mut out, "sockets", &old.sockets(), &new.sockets());
        if old.disks != new.disks {
            out.push(format!(
                "disks {} → {}",
                listed(&old.disks),
                listed(&new.disks)
            ));
        }
        if old.networks != new.networks {
            out.push(format!(
                "networks {} → {}",
                listed(&old.networks),
                listed(&new.networks)
            ));
        }
        if old.pci != new.pci {
            let names = |pci: &[crate::spec::hardware::PciDevice]| {
                let names: Vec<&str> = pci.iter().map(|d| d.mapping.as_str()).collect();
                format!("[{}]", names.join(", "))
            };
            out.push(format!("pci {} → {}", names(&old.pci), names(&new.pci)));
        }
        if self.patches != newer.patches {
            out.push("patches changed".to_owned());
        }
        if self.registries != newer.registries {
            out.push("registries changed".to_owned());
        }
        if self.authentication != newer.authentication {
            out.push("authentication changed".to_owned());
        }
        out
    }
}

#[cfg(test)]
mod tests;
