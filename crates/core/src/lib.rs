//! capstan-core: the pure heart of capstan, the whole pipeline between reading the repository
//! and acting on the world: the cluster language (`spec`: parse, default, validate), the
//! observed state (`observed`), the planner (`plan`: desired × observed × policy × now → steps,
//! and `plan::render` to print them), the status (`status`: conditions, the status branch's
//! files, when to write them) and pull-request previews (`preview`: both revisions planned,
//! compared, rendered as a comment), notifications (`notify`: events from two statuses, each
//! receiver's payload), the dashboard's HTML pages (`dashboard`), the domain identifiers
//! (`model`) and fingerprints.
//!
//! spec → observed → plan → status / preview. The daemon (`capstan`) reads the sources,
//! observes, executes and publishes; everything it decides in between is computed here.
//!
//! No runtime, no network, no filesystem: the crate depends on no async runtime, HTTP, Kubernetes
//! or Git library, so Cargo itself keeps it pure, and its lints (`clippy.toml`) deny the clock,
//! environment and file calls of the standard library and of jiff. Everything it needs comes in
//! as data, which is why most of capstan's logic is tested here in milliseconds.

pub mod addresses;
pub mod clock;
pub mod dashboard;
pub mod errors;
pub mod fingerprint;
pub mod model;
pub mod node_keys;
pub mod notify;
pub mod observed;
pub mod plan;
pub mod preview;
pub mod scheduling;
pub mod spec;
pub mod status;
pub mod talos;
pub mod workloads;

/// The findings of a cluster's patches: `spec::patches` judges what the file says (bounds,
/// secrets, owned fields, kubeadm's and K3s's references), `talos::patches` the Talos machine
/// configs they make, which only the Talos renderer can render. Composed here, at the crate's
/// root, because the renderer itself builds on `spec`.
pub(crate) fn patch_findings(
    name: &str,
    spec: &spec::ClusterSpec,
    file: &spec::SourceFile,
) -> Vec<spec::Diagnostic> {
    let mut out = Vec::new();
    spec::patches::check(&mut out, spec, file);
    // Talos's schema judges only configs whose patches passed the rules above (an owned field
    // is reported once, as capstan's).
    if spec.talos.is_some() && out.is_empty() {
        talos::patches::check(&mut out, name, spec, file);
    }
    out
}
