//! The dashboard: the fleet, each cluster and its rollout as HTML pages, drawn from the status,
//! the last observation and plan, and the daemon's recent steps ([`View`]); and the previews of
//! pull requests ([`preview`]). The daemon serves them (`GET /`, `GET /clusters/NAME`,
//! `GET /previews/NUMBER`) with the stylesheet and script of [`assets`].
//!
//! Pure: every page is a function of its [`View`], `now` included, so it is tested without a
//! server.
//!
//! # Guarantees
//! - Everything shown is escaped (maud escapes every value spliced into a page): cluster
//!   names, errors, revisions and node names come from repositories and VMs.
//! - Each page is whole without JavaScript (reload to refresh); the script only swaps in the
//!   newer `<main>` when the daemon says a new status exists.
//! - Colour is never the only signal: each phase has a word and a symbol, each bar of the
//!   timeline its result in words, and the timeline is also a table.

mod cluster;
mod fleet;
pub mod history;
pub mod links;
pub mod preview;
mod timeline;

pub use cluster::cluster_page;
pub use fleet::fleet_page;
pub use history::{Outcome, StepHistory, StepRun};
pub use links::{CommitLinks, ForgeStyle};
pub use preview::{PreviewComment, markdown_to_html, preview_page};

use std::time::Duration;

use jiff::Timestamp;
use maud::{DOCTYPE, Markup, html};

use crate::observed::Observed;
use crate::plan::{Phase, Plan};
use crate::spec::Desired;
use crate::status::FleetStatus;

/// The stylesheet and script every page links to (served by the daemon from the binary, so
/// nothing is fetched from elsewhere).
pub mod assets {
    /// The hand-written part of the stylesheet: light and dark schemes, readable from 320 px
    /// wide.
    pub const CSS: &str = include_str!("assets/dashboard.css");

    /// `GET /assets/dashboard.css`: [`CSS`] and the rules that place the timeline's bars
    /// ([`super::timeline::placement_rules`]). A page carries no `style` attribute, so the
    /// daemon's Content-Security-Policy (`default-src 'self'`) needs no exception.
    pub fn stylesheet() -> &'static str {
        static STYLESHEET: std::sync::LazyLock<String> =
            std::sync::LazyLock::new(|| format!("{CSS}{}", super::timeline::placement_rules()));
        &STYLESHEET
    }
    /// `GET /assets/dashboard.js`: listens to `/events` and swaps in the newer `<main>`.
    pub const JS: &str = include_str!("assets/dashboard.js");
    /// Where the daemon serves [`CSS`].
    pub const CSS_PATH: &str = "/assets/dashboard.css";
    /// Where the daemon serves [`JS`].
    pub const JS_PATH: &str = "/assets/dashboard.js";
}

/// What a page is drawn from, as of one moment.
#[derive(Debug, Clone, Copy)]
pub struct View<'a> {
    /// The fleet's status as served on `/status`.
    pub status: &'a FleetStatus,
    /// The last observation (Proxmox nodes, machines' ages, step durations).
    pub observed: Option<&'a Observed>,
    /// The last plan (the predicted steps ahead).
    pub plan: Option<&'a Plan>,
    /// The revision's clusters (distributions).
    pub desired: Option<&'a Desired>,
    /// The steps run lately.
    pub history: &'a StepHistory,
    /// Where commits are shown, when the remote is on a known forge.
    pub links: Option<&'a CommitLinks>,
    /// The previews of open pull requests (`run --previews`), by number.
    pub previews: &'a [PreviewComment],
    /// The status generation the page shows (the script compares it with `/events`').
    pub generation: u64,
    /// Now.
    pub now: Timestamp,
}

/// The page for a path that names nothing the daemon knows (404).
pub fn not_found_page(what: &str, generation: u64) -> String {
    page(
        "Not found",
        generation,
        &html! {
            h1 { "Not found" }
            p { "The daemon knows no " (what) "." }
            p { a href="/" { "Back to the fleet" } }
        },
    )
}

/// A whole page: `main` in the shell every page shares.
fn page(title: &str, generation: u64, main: &Markup) -> String {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="color-scheme" content="light dark";
                title { (title) " · capstan" }
                link rel="stylesheet" href=(assets::CSS_PATH);
                script src=(assets::JS_PATH) defer {}
            }
            body data-generation=(generation) {
                a.skip href="#main" { "Skip to content" }
                header {
                    nav aria-label="Site" {
                        a.brand href="/" { "capstan" }
                        " "
                        span #live role="status" aria-live="polite" { "reload to refresh" }
                    }
                }
                main #main data-generation=(generation) { (main) }
                footer {
                    p { "Served by the capstan daemon. " a href="/status" { "Status as JSON" } }
                }
            }
        }
    }
    .into_string()
}

/// A phase's word and symbol (the colour comes from its class).
pub fn phase_label(phase: Phase) -> (&'static str, &'static str) {
    match phase {
        Phase::Pending => ("○", "Pending"),
        Phase::Provisioning => ("◔", "Provisioning"),
        Phase::Ready => ("✓", "Ready"),
        Phase::Updating => ("↻", "Updating"),
        Phase::Blocked => ("✕", "Blocked"),
        Phase::Deleting => ("⌫", "Deleting"),
    }
}

/// A phase as a badge: symbol, word and colour.
fn phase_badge(phase: Phase) -> Markup {
    let (symbol, word) = phase_label(phase);
    html! {
        span class=(format!("phase phase-{}", word.to_ascii_lowercase())) {
            span aria-hidden="true" { (symbol) } " " (word)
        }
    }
}

/// A time, in UTC to the second, machine-readable too.
/// What a cluster waits on, each with since when; "nothing" when it waits on nothing.
fn waits(waiting_on: &[crate::status::WaitingOn], now: Timestamp) -> Markup {
    html! {
        @if waiting_on.is_empty() { "nothing" }
        @for wait in waiting_on {
            span.wait {
                @if let Some(step) = wait.step { code { (step.name()) } ": " }
                (wait.resource)
                @if let Some(at) = wait.since { ", since " (since(at, now)) }
            }
            " "
        }
    }
}

/// A table's column headers.
fn header(columns: &[&str]) -> Markup {
    html! {
        thead { tr { @for column in columns { th scope="col" { (column) } } } }
    }
}

fn time(at: Timestamp) -> Markup {
    let shown = at.strftime("%Y-%m-%d %H:%M:%S UTC").to_string();
    html! { time datetime=(at.to_string()) { (shown) } }
}

/// A time and how long ago it was.
fn since(at: Timestamp, now: Timestamp) -> Markup {
    let ago = now.duration_since(at);
    html! {
        (time(at))
        @if ago.is_positive() {
            " (" (duration(ago.unsigned_abs())) " ago)"
        }
    }
}

/// A duration in words a person reads at a glance: `850 ms`, `42 s`, `3 min 05 s`, `2 h 10 min`,
/// `3 d 4 h`.
pub fn duration(took: Duration) -> String {
    let seconds = took.as_secs();
    match seconds {
        0 => format!("{} ms", took.as_millis()),
        1..60 => format!("{seconds} s"),
        60..3600 => format!("{} min {:02} s", seconds / 60, seconds % 60),
        3600..86_400 => format!("{} h {:02} min", seconds / 3600, seconds % 3600 / 60),
        _ => format!("{} d {} h", seconds / 86_400, seconds % 86_400 / 3600),
    }
}

/// A revision, linked to its commit when the remote is on a known forge.
fn revision(revision: &str, links: Option<&CommitLinks>) -> Markup {
    match links.and_then(|links| links.commit(revision)) {
        Some(href) => html! { a href=(href) { code { (revision) } } },
        None => html! { code { (revision) } },
    }
}

#[cfg(test)]
mod tests;
