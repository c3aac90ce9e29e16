//! Waits: poll a condition until it holds or a deadline passes, then fail the test with what
//! was awaited and the last thing seen. Nothing here asserts a duration: the patience is how
//! long a loaded machine may take, not a performance claim.

use std::fmt::Display;
use std::time::{Duration, Instant};

/// How long a wait may take by default (the lab builds a cluster in seconds; a loaded 2-core
/// machine running several test binaries is much slower).
pub const PATIENCE: Duration = Duration::from_secs(90);

/// How often a wait looks by default.
pub const EVERY: Duration = Duration::from_millis(50);

/// A wait for something, named for the failure message.
#[derive(Debug, Clone)]
pub struct Wait {
    what: String,
    patience: Duration,
    every: Duration,
}

/// A wait for `what` (said in the failure message: "timed out waiting for {what}").
pub fn on(what: impl Display) -> Wait {
    Wait {
        what: what.to_string(),
        patience: PATIENCE,
        every: EVERY,
    }
}

impl Wait {
    /// Waits at most `patience` (default [`PATIENCE`]).
    #[must_use]
    pub fn within(mut self, patience: Duration) -> Wait {
        self.patience = patience;
        self
    }

    /// Looks every `every` (default [`EVERY`]).
    #[must_use]
    pub fn every(mut self, every: Duration) -> Wait {
        self.every = every;
        self
    }

    /// What is awaited.
    pub fn what(&self) -> &str {
        &self.what
    }

    /// Polls `check` until it gives `Ok`; fails the test after the patience with what was
    /// awaited and the last `Err` (what was seen instead).
    pub async fn until<T>(self, mut check: impl AsyncFnMut() -> Result<T, String>) -> T {
        let deadline = Instant::now() + self.patience;
        loop {
            let seen = match check().await {
                Ok(value) => return value,
                Err(seen) => seen,
            };
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {}: {seen}",
                self.what
            );
            tokio::time::sleep(self.every).await;
        }
    }

    /// Polls `done` until it holds; fails the test after the patience, naming what was
    /// awaited.
    pub async fn until_true(self, mut done: impl FnMut() -> bool) {
        self.until(async || if done() { Ok(()) } else { Err(String::new()) })
            .await;
    }

    /// [`Wait::until`] on this thread, sleeping between looks (for a test with no runtime).
    pub fn blocking<T>(self, mut check: impl FnMut() -> Result<T, String>) -> T {
        let deadline = Instant::now() + self.patience;
        loop {
            let seen = match check() {
                Ok(value) => return value,
                Err(seen) => seen,
            };
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {}: {seen}",
                self.what
            );
            std::thread::sleep(self.every);
        }
    }
}

/// Waits until the guest agent of a started VM answers a ping; fails the test when it says
/// anything but "not running yet", or after [`PATIENCE`].
pub async fn agent(
    client: &capstan::providers::proxmox::ProxmoxClient,
    vm: &capstan::providers::proxmox::VmRef,
) {
    on(format!("the guest agent of VM {}", vm.vmid))
        .every(Duration::from_millis(20))
        .until(async || {
            match capstan::providers::proxmox::ProxmoxProvider::agent_ping(client, vm).await {
                Ok(()) => Ok(()),
                Err(err) if err.is_agent_unavailable() => Err(err.to_string()),
                Err(err) => panic!("the guest agent of VM {} does not answer: {err}", vm.vmid),
            }
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_wait_returns_what_the_check_found() {
        let mut looks = 0;
        let found = on("the third look")
            .every(Duration::from_millis(1))
            .until(async || {
                looks += 1;
                if looks == 3 {
                    Ok(looks)
                } else {
                    Err(format!("look {looks}"))
                }
            })
            .await;
        assert_eq!(found, 3);
    }

    #[test]
    #[should_panic(expected = "timed out waiting for nothing to happen: still nothing")]
    fn a_wait_that_runs_out_names_what_it_awaited_and_what_it_saw() {
        on("nothing to happen")
            .within(Duration::ZERO)
            .blocking(|| Err::<(), _>("still nothing".to_owned()));
    }
}
