//! [`Fence`]: a step's licence to act, checked before each change it makes, so that a replica
//! that lost the Lease sends nothing more. The election grants and ends the licence; steps
//! and providers only read it (this module depends on none of them).

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::watch;

/// Whoever decides whether this replica may act (the election's `Leadership`).
pub trait Licence: Send + Sync + std::fmt::Debug {
    /// Whether this replica may act now.
    fn is_leading(&self) -> bool;

    /// The deadline of the current licence, past which it ends with no news (`None`: no
    /// deadline, or no licence).
    fn leading_until(&self) -> Option<Instant>;

    /// A receiver that sees every change of leadership from now on.
    fn subscribe(&self) -> watch::Receiver<bool>;
}

/// A step's licence to act, checked before each command sent to a node, each Proxmox change
/// (clone, start, stop, shut down, destroy, tag), each Kubernetes change and each round of a
/// drain; [`Fence::lost`] lets a step in flight be stopped the moment leadership ends.
#[derive(Debug, Clone)]
pub struct Fence(Option<Arc<dyn Licence>>);

/// A step was stopped because its replica no longer leads: the new leader plans it again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("stopped before {before}: this replica no longer leads")]
pub struct NotLeading {
    /// What was about to be done.
    pub before: String,
}

impl Fence {
    /// The fence of a replica whose leadership `licence` decides.
    pub fn new(licence: Arc<dyn Licence>) -> Self {
        Fence(Some(licence))
    }

    /// A fence that never closes (no election: one replica, or a command that is no daemon).
    pub fn open() -> Self {
        Fence(None)
    }

    fn is_leading(&self) -> bool {
        self.0.as_ref().is_none_or(|licence| licence.is_leading())
    }

    /// Whether this replica may act now.
    ///
    /// # Errors
    /// [`NotLeading`], naming `before`, once this replica no longer leads.
    pub fn check(&self, before: impl std::fmt::Display) -> Result<(), NotLeading> {
        if self.is_leading() {
            Ok(())
        } else {
            Err(NotLeading {
                before: before.to_string(),
            })
        }
    }

    /// Completes once this replica no longer leads: when the election says so, or at the
    /// deadline of its licence even if no renewal ever answers (never, for [`Fence::open`]).
    pub async fn lost(&self) {
        let Some(licence) = &self.0 else {
            return std::future::pending().await;
        };
        // Subscribed before looking, so a change in between is not missed.
        let mut changed = licence.subscribe();
        loop {
            if !licence.is_leading() {
                return;
            }
            let deadline = licence.leading_until();
            tokio::select! {
                // The licence holds the sender; were it gone, the deadline still ends this.
                result = changed.changed() => {
                    if result.is_err() && deadline.is_none() {
                        return std::future::pending().await;
                    }
                }
                () = sleep_until(deadline) => {}
            }
        }
    }
}

/// Sleeps until `deadline`, or forever without one.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline.into()).await,
        None => std::future::pending().await,
    }
}

/// The [`NotLeading`] in `error`'s chain, if any: a step that stopped, not one that failed.
pub fn not_leading<'e>(error: &'e (dyn std::error::Error + 'static)) -> Option<&'e NotLeading> {
    let mut cause = Some(error);
    while let Some(current) = cause {
        if let Some(found) = current.downcast_ref::<NotLeading>() {
            return Some(found);
        }
        cause = current.source();
    }
    None
}

/// A licence a test ends by hand.
#[cfg(test)]
#[derive(Debug)]
pub(crate) struct Switch {
    leading: std::sync::atomic::AtomicBool,
    changed: watch::Sender<bool>,
}

#[cfg(test)]
impl Switch {
    /// A licence in force until [`Switch::end`].
    pub(crate) fn on() -> Arc<Switch> {
        Arc::new(Switch {
            leading: std::sync::atomic::AtomicBool::new(true),
            changed: watch::Sender::new(true),
        })
    }

    /// Ends the licence, as an election that sees another holder.
    pub(crate) fn end(&self) {
        self.leading
            .store(false, std::sync::atomic::Ordering::SeqCst);
        self.changed.send_replace(false);
    }
}

#[cfg(test)]
impl Licence for Switch {
    fn is_leading(&self) -> bool {
        self.leading.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn leading_until(&self) -> Option<Instant> {
        None
    }

    fn subscribe(&self) -> watch::Receiver<bool> {
        self.changed.subscribe()
    }
}
