//! The preview as a pull-request comment: a hidden marker that lets capstan find its comment
//! again, and a length the forge accepts.
//!
//! # Guarantees
//! - The summary line and every refusal are always in the comment; only clusters' sections
//!   (diffs, steps, drains) and the `capstan.yaml` diff are collapsed to fit, largest first,
//!   and the comment then says `capstan preview --format json` prints the full plan.

use std::collections::BTreeSet;

use super::Preview;
use super::render::{cluster_section, markdown_collapsing};

/// The hidden marker that identifies capstan's comment on a pull request.
pub const MARKER: &str = "<!-- capstan-preview -->";

/// The longest comment GitHub accepts, in characters.
pub const GITHUB_COMMENT_LIMIT: usize = 65_536;

/// What a shortened comment ends with.
const SHORTENED: &str = "\n> Some sections were collapsed to fit this comment: `capstan preview --format json` prints the full plan (every diff, step and drain).\n";

/// The comment for `preview`: the marker, then the Markdown preview, at most `limit`
/// characters when collapsing cluster sections can make it so.
pub fn comment(preview: &Preview, limit: usize) -> String {
    let render = |collapsed: &BTreeSet<usize>| {
        format!(
            "{MARKER}\n{}",
            markdown_collapsing(preview, &|index| collapsed.contains(&index))
        )
    };
    let full = render(&BTreeSet::new());
    if full.chars().count() <= limit {
        return full;
    }
    // Collapse the largest sections first: the fewest clusters lose their details.
    let mut sections: Vec<(usize, usize)> = preview
        .clusters
        .iter()
        .enumerate()
        .map(|(index, cluster)| (cluster_section(cluster).chars().count(), index))
        .collect();
    sections.push((preview.fleet_diff.chars().count(), usize::MAX));
    sections.sort_unstable_by(|a, b| b.cmp(a));
    let mut collapsed = BTreeSet::new();
    let mut shortened = full;
    for (_, index) in sections {
        collapsed.insert(index);
        shortened = render(&collapsed) + SHORTENED;
        if shortened.chars().count() <= limit {
            break;
        }
    }
    shortened
}
