//! `capstan preview` through the real binary, on real Git repositories made with the stock
//! `git` CLI: one branch per pull-request scenario, previewed against a converged snapshot;
//! posted to the lab forge (judged by GitHub's OpenAPI description, PyGithub and `gh`), by the
//! command and by the daemon's `--previews`; the dashboard's page of a preview, read in a real
//! headless Chromium.
//!
//! Belongs here: what `capstan preview` says and posts. The shared helpers are the test kit's
//! (`capstan_testkit`, crates/testkit).

mod daemon;
mod dashboard;
mod drains;
mod estimate;
mod fidelity;
mod fixture;
mod forge;
mod judges;
mod posting;
mod scenarios;
mod windows;
