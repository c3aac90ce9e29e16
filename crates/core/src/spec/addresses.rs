//! Static node addresses across clusters: two clusters' `network.nodeAddresses` never overlap,
//! or two VMs could be given one address. Checked across files, as unique endpoint addresses
//! are: the later file of two loses. The rules of one cluster's range are in
//! `node_addresses`.

use super::diagnostic::Diagnostic;
use super::validate::Checked;
use super::values::AddressRange;

/// The findings about overlapping `network.nodeAddresses`, each with the index (in
/// `clusters`) of the file it is about.
pub fn across(clusters: &[Checked<'_>]) -> Vec<(usize, Diagnostic)> {
    let mut out = Vec::new();
    let mut taken: Vec<(AddressRange, &Checked<'_>)> = Vec::new();
    for (index, checked) in clusters.iter().enumerate() {
        let Some(range) = checked.cluster.spec.network.node_addresses else {
            continue;
        };
        let overlapping = taken
            .iter()
            .find(|(other, _)| other.first <= range.last && range.first <= other.last);
        if let Some((other, first)) = overlapping {
            out.push((
                index,
                checked
                    .file
                    .error(
                        "spec.network.nodeAddresses",
                        format!(
                            "{range} overlaps {other}, the node addresses of {}",
                            first.file.name
                        ),
                    )
                    .with_hint("two clusters' VMs would be given the same address: pick ranges that do not overlap"),
            ));
            continue;
        }
        taken.push((range, checked));
    }
    out
}
