//! The previews of pull requests the daemon posts (`run --previews`): each one's Markdown
//! comment, drawn as HTML on its own page.
//!
//! # Guarantees
//! A comment is a pull request's words (its files' names and contents reach it): nothing in it
//! becomes markup but the Markdown's own structure and the few tags the comment writer uses
//! (`details`, `summary`, `b`, `br`, with no attribute). Any other HTML is shown as text, HTML
//! comments are dropped, links go only to `http(s)://`, `/` or `#` addresses, and images are
//! replaced by their text (nothing is fetched from elsewhere).

use jiff::Timestamp;
use maud::{Markup, PreEscaped, html};
use pulldown_cmark::{CowStr, Event, Options, Parser, Tag, TagEnd};

use super::{View, not_found_page, page, revision, time};

/// The most previews the daemon keeps for the dashboard: the latest pull requests'.
pub const MAX_KEPT: usize = 50;

/// A pull request's preview, as last rendered for its comment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreviewComment {
    /// The pull request's number.
    pub pull: u64,
    /// The head's revision.
    pub head: String,
    /// The comment, in Markdown.
    pub markdown: String,
    /// When it was made.
    pub at: Timestamp,
    /// What tells it from another preview of the pull request (the comment itself holds its
    /// planning time): a new one is news for open pages only when this changed.
    pub fingerprint: String,
}

/// Tags the comment writer uses, allowed through as they are (no attribute).
const ALLOWED_TAGS: &[&str] = &[
    "<details>",
    "</details>",
    "<summary>",
    "</summary>",
    "<b>",
    "</b>",
    "<br>",
];

/// `GET /previews/NUMBER`: pull request `pull`'s preview, or the 404 page.
pub fn preview_page(view: &View<'_>, pull: u64) -> Result<String, String> {
    let Some(preview) = view.previews.iter().find(|p| p.pull == pull) else {
        return Err(not_found_page(
            "preview of such a pull request",
            view.generation,
        ));
    };
    let main = html! {
        nav aria-label="Breadcrumb" { a href="/" { "Fleet" } " › preview of #" (pull) }
        h1 { "Preview of pull request #" (pull) }
        p {
            "Head " (revision(&preview.head, view.links)) ", planned at " (time(preview.at))
            " against the state the daemon last observed: what merging it would do."
        }
        article.comment aria-label="The preview's comment" {
            (PreEscaped(markdown_to_html(&preview.markdown)))
        }
    };
    Ok(page(&format!("Preview of #{pull}"), view.generation, &main))
}

/// The fleet page's list of previews (nothing when there is none).
pub(super) fn list(view: &View<'_>) -> Markup {
    if view.previews.is_empty() {
        return html! {};
    }
    html! {
        section aria-labelledby="previews-title" {
            h2 #previews-title { "Pull request previews" }
            ul {
                @for preview in view.previews {
                    li {
                        a href=(format!("/previews/{}", preview.pull)) { "#" (preview.pull) }
                        " at " (revision(&preview.head, view.links)) ", " (time(preview.at))
                    }
                }
            }
        }
    }
}

/// `markdown` as HTML, with only its Markdown structure and [`ALLOWED_TAGS`] as markup.
pub fn markdown_to_html(markdown: &str) -> String {
    let mut in_image = 0_usize;
    let events = Parser::new_ext(
        markdown,
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH,
    )
    .flat_map(|event| -> Vec<Event<'_>> {
        match event {
            Event::Html(html) | Event::InlineHtml(html) => sanitize(&html),
            Event::Start(Tag::Image { .. }) => {
                in_image += 1;
                Vec::new()
            }
            Event::End(TagEnd::Image) => {
                in_image = in_image.saturating_sub(1);
                Vec::new()
            }
            Event::Start(Tag::Link {
                link_type,
                dest_url,
                title,
                id,
            }) if in_image == 0 && is_safe_link(&dest_url) => vec![Event::Start(Tag::Link {
                link_type,
                dest_url,
                title,
                id,
            })],
            // An unsafe link's text stays, as text.
            Event::Start(Tag::Link { .. }) => Vec::new(),
            Event::End(TagEnd::Link) => vec![Event::End(TagEnd::Link)],
            other => vec![other],
        }
    })
    .collect::<Vec<_>>();
    let events = balance_links(events);
    let mut out = String::new();
    pulldown_cmark::html::push_html(&mut out, events.into_iter());
    out
}

/// Drops the end of each link whose start was dropped.
fn balance_links(events: Vec<Event<'_>>) -> Vec<Event<'_>> {
    // Links do not nest in Markdown: one open at a time.
    let mut open = false;
    events
        .into_iter()
        .filter(|event| match event {
            Event::Start(Tag::Link { .. }) => {
                open = true;
                true
            }
            Event::End(TagEnd::Link) => std::mem::replace(&mut open, false),
            _ => true,
        })
        .collect()
}

fn is_safe_link(url: &str) -> bool {
    let lower = url.trim().to_ascii_lowercase();
    lower.starts_with("https://")
        || lower.starts_with("http://")
        || (lower.starts_with('/') && !lower.starts_with("//"))
        || lower.starts_with('#')
}

/// Raw HTML of the comment: allowed tags kept, comments dropped, the rest as text.
fn sanitize(html: &str) -> Vec<Event<'static>> {
    let mut out = Vec::new();
    let mut rest = html;
    while !rest.is_empty() {
        if let Some(comment) = rest.strip_prefix("<!--") {
            rest = comment.split_once("-->").map_or("", |(_, after)| after);
            continue;
        }
        if let Some(tag) = ALLOWED_TAGS
            .iter()
            .find(|tag| rest.len() >= tag.len() && rest[..tag.len()].eq_ignore_ascii_case(tag))
        {
            out.push(Event::InlineHtml(CowStr::Borrowed(tag)));
            rest = &rest[tag.len()..];
            continue;
        }
        // Text up to the next `<` past the first character (which may be one).
        let first = rest.chars().next().map_or(1, char::len_utf8);
        let end = rest[first..].find('<').map_or(rest.len(), |at| at + first);
        out.push(Event::Text(CowStr::Boxed(rest[..end].into())));
        rest = &rest[end..];
    }
    out
}
