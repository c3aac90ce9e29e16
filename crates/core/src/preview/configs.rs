//! What a change of patches does to the machines' configuration, as unified diffs: for the
//! control planes and each pool, the configuration the base and the head render (Talos: the
//! whole machine config, from placeholder secrets; kubeadm and K3s: the patches merged as the
//! distribution reads them), secret-named lines redacted. Pure.

use super::changes::unified_diff;
use crate::spec::{Cluster, ClusterSpec};

/// The diffs of every level whose configuration differs between `base` and `head`.
pub(super) fn config_diffs(base: Option<&Cluster>, head: Option<&Cluster>) -> Vec<String> {
    let (Some(base), Some(head)) = (base, head) else {
        return Vec::new();
    };
    if base.spec.all_patches().is_empty() && head.spec.all_patches().is_empty() {
        return Vec::new();
    }
    let name = &head.metadata.name;
    let levels = std::iter::once((None, "controlPlane".to_owned())).chain(
        head.spec
            .workers
            .iter()
            .filter(|pool| base.spec.workers.iter().any(|b| b.pool == pool.pool))
            .map(|pool| (Some(pool.pool.as_str()), format!("workers.{}", pool.pool))),
    );
    levels
        .filter_map(|(pool, label)| {
            let before = view(name, &base.spec, pool);
            let after = view(name, &head.spec, pool);
            let label = format!("{label} (rendered configuration)");
            let diff = unified_diff(&label, Some(&before), Some(&after));
            (!diff.is_empty()).then_some(diff)
        })
        .collect()
}

fn view(name: &str, spec: &ClusterSpec, pool: Option<&str>) -> String {
    if spec.talos.is_some() {
        crate::talos::patches::rendered_config(name, spec, pool).unwrap_or_default()
    } else {
        crate::spec::patches::view(spec, pool)
    }
}
