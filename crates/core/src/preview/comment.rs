//! The preview as a pull-request comment: a hidden marker that lets capstan find its comment
//! again, and a length the forge accepts.
//!
//! # Guarantees
//! - The summary line and every refusal are in the comment; only clusters' sections (diffs,
//!   steps, drains) and the `capstan.yaml` diff are collapsed to fit, largest first, and the
//!   comment then says `capstan preview --format json` prints the full plan.
//! - The comment is never longer than the limit: when the summary and the refusals alone are
//!   longer (a head with thousands of errors), it keeps the refusals that fit and says how
//!   many more there are. A forge refuses a longer comment, and the pull requests after it
//!   would wait for ever.

use std::collections::BTreeSet;

use super::Preview;
use super::render::{
    cluster_section, collapsed_cluster_section, fleet_section, markdown_collapsing,
    refusal_markdown,
};
use crate::plan::render::escape;

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
    let mut length = full.chars().count();
    if length <= limit {
        return full;
    }
    // Collapse the largest sections first: the fewest clusters lose their details. A
    // comment is the sum of its sections, so what collapsing one saves is counted once
    // instead of rendering the comment again for each (a preview may touch many clusters).
    let count = |text: String| text.chars().count();
    let mut sections: Vec<(usize, usize, usize)> = preview
        .clusters
        .iter()
        .enumerate()
        .map(|(index, cluster)| {
            let whole = count(cluster_section(cluster));
            let saved = whole.saturating_sub(count(collapsed_cluster_section(cluster)));
            (whole, index, saved)
        })
        .collect();
    let fleet_saved =
        count(fleet_section(preview, false)).saturating_sub(count(fleet_section(preview, true)));
    sections.push((preview.fleet_diff.chars().count(), usize::MAX, fleet_saved));
    sections.sort_unstable_by(|a, b| b.cmp(a));
    let mut collapsed = BTreeSet::new();
    length += SHORTENED.chars().count();
    for (_, index, saved) in sections {
        collapsed.insert(index);
        length = length.saturating_sub(saved);
        if length <= limit {
            return render(&collapsed) + SHORTENED;
        }
    }
    refusals_only(preview, limit)
}

/// The marker, the summary line and as many refusals as fit in `limit` characters, with how
/// many more there are: what is left when even the collapsed comment is too long.
fn refusals_only(preview: &Preview, limit: usize) -> String {
    let summary: String = escape(&preview.summary).chars().take(limit / 4).collect();
    let mut out = format!(
        "{MARKER}\n### capstan preview\n\n**{summary}**\n\n#### Refused: merging this change is refused until these are fixed\n\n"
    );
    let mut length = out.chars().count();
    // Room for the last line, whatever the count it names.
    let reserve = 160;
    for (index, refusal) in preview.refusals.iter().enumerate() {
        let line = format!("- {}\n", refusal_markdown(refusal));
        let line_length = line.chars().count();
        if length + line_length + reserve > limit {
            let more = preview.refusals.len() - index;
            out.push_str(&format!(
                "\n> {more} more refusal(s) do not fit this comment: `capstan preview --format json` lists every one.\n"
            ));
            return out;
        }
        length += line_length;
        out.push_str(&line);
    }
    out
}
