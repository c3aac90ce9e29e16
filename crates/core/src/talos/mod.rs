//! Talos Linux, purely: the Talos/Kubernetes support window (`versions`), the secrets bundle
//! as data (`secrets`), the facts a machine config is made from (`facts`) and the machine
//! configs themselves (`config`), the static node addresses (`addresses`), and the NoCloud `cidata` volume that delivers one (`nocloud`,
//! written by a small ISO 9660 writer, `iso9660`), each a function of its inputs. The daemon generates the
//! bundle (core takes no randomness) and delivers the configs.
//!
//! `reference/` holds Talos's published machine-config JSON schema (v1.13.9), which the tests
//! validate every rendered config against; its README names the source and the sha256.
//!
//! The Talos/Kubernetes support window lives in `spec` (`spec::talos_versions`, re-exported
//! here as `versions`), which validates `spec.talos.version` against it.

pub use crate::addresses;
pub mod authentication;
pub mod config;
pub mod facts;
pub mod iso9660;
pub mod nocloud;
pub mod patches;
pub mod registries;
pub mod secrets;
pub use crate::spec::talos_versions as versions;

#[cfg(test)]
pub(crate) mod fixtures;
#[cfg(test)]
mod tests;

pub use addresses::{
    ADDRESS_TAG, address_tag, choose_address, static_address, tagged_address, tagged_addresses,
    trusted_address,
};
pub use config::{RenderProblem, render_machine_config};
pub use facts::{ClusterFacts, FactsProblem, MacAddress, MachineRole, NodeFacts, StaticAddress};
pub use nocloud::{CidataFiles, CidataProblem, cidata_files, cidata_image};
pub use secrets::{BundleShape, CertificateAuthority, SecretsBundle};
pub use versions::{TalosVersion, VersionSupport, check_support};
