//! Belongs here: capstan following a Git remote: real servers on loopback (`git daemon`, OpenSSH's `sshd`,
//! lighttpd serving `git http-backend`), commits made with the stock `git` CLI.
//!
//! - `transports`: a pushed commit is seen over each transport; force-push, remote down,
//!   host-key mismatch, refused token, links, size limits, `--path`.
//! - `daemon`: the daemon on a lab follows the remote: a push is applied, an idle daemon only
//!   asks for refs, an unreachable remote keeps the last revision.
//! - `webhooks`: GitHub's real payloads trigger a poll; bad signatures do not.
//! - `cli`: `validate` and `plan` read a remote branch's tip.
//! - `k3s`: `capstan run --lab` builds the seed's K3s cluster from a pushed commit, its
//!   datastore a real MariaDB whose admin password comes from the environment.
//! - `demo`: the `capstan demo` walkthrough, followed with `git commit` and `git push`.
//! - `dashboard`: the demo's dashboard in a real headless Chromium (WebDriver through
//!   chromedriver): the fleet Ready, a pushed scale-up shown live, the rollout's timeline.
//! - `status_branch`: the daemon commits the status back to `capstan-status`: bootstrap, idle,
//!   scale-up, a concurrent writer, a remote refusing pushes, a token planted in Proxmox's words,
//!   a standby replica.
//! - `status_writer`: the writer alone: a planted secret, the debounce on the lab clock, an
//!   unreachable remote, a push over SSH, the demo's status commits, a status branch equal to
//!   the followed branch.
//! - `verify`: verified commits (SSH and OpenPGP signatures) with `git verify-commit`,
//!   `ssh-keygen` and GnuPG as judges; the daemon refusing unsigned and unknown-key revisions,
//!   taking a rotated key without a restart, and a force-push to an unsigned commit.
//! - `rollback`: under verification, an older signed commit force-pushed back is refused in
//!   both modes, by the daemon that applied the newer one and by a new one with an empty
//!   mirror (the last verified revision is kept in the management cluster).
//!
//! The shared helpers are the test kit's (`capstan_testkit`, crates/testkit): the in-process
//! daemon (`World` with `Setup::git`), `capstan run` as a process, the remote, the waits.

mod cli;
mod daemon;
mod dashboard;
mod demo;
mod http_limits;
mod k3s;
mod rollback;
mod servers;
mod status_branch;
mod status_writer;
mod transports;
mod verify;
mod webhooks;
