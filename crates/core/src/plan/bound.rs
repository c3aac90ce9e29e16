//! The lower bound of a rollout: from the duration of each step, the shortest schedule that
//! keeps the rules (kubeadm init before any join, one control plane absent at a time, removals
//! one at a time, a replacement Ready before the machine it replaces leaves, at most
//! `rollout.maxSurge` VMs above the declared count), with every clone the capacity allows
//! running at once. A measured rollout is judged against it: the ratio says how much of the
//! time went to waiting no rule asked for.
//!
//! Pure arithmetic on durations: no clock.

use std::time::Duration;

/// How long each step takes (the lab's timings, or what the daemon measured).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepDurations {
    /// Full clone of the template.
    pub clone: Duration,
    /// VM start.
    pub start: Duration,
    /// From start until the guest agent answers.
    pub boot: Duration,
    /// The prepare script (CRI-O and packages).
    pub prepare: Duration,
    /// `kubeadm init`.
    pub init: Duration,
    /// `kubeadm join`.
    pub join: Duration,
    /// From a join until the Node is Ready.
    pub node_ready: Duration,
    /// `kubeadm upgrade apply` on the control plane.
    pub upgrade: Duration,
    /// A member leaving: cordon, drain, Node deletion, reset and destroy.
    pub removal: Duration,
}

impl StepDurations {
    /// From the clone until the VM is prepared.
    fn prepared(&self) -> Duration {
        self.clone + self.start + self.boot + self.prepare
    }

    /// From the clone until the new machine is a Ready member.
    fn built(&self) -> Duration {
        self.prepared() + self.join + self.node_ready
    }
}

/// A new cluster: `control_planes` and `workers`, `parallel_clones` of them cloned at once
/// (what capacity allows, at least one).
pub fn bootstrap(
    durations: &StepDurations,
    control_planes: u32,
    workers: u32,
    parallel_clones: u32,
) -> Duration {
    let slots = parallel_clones.max(1) as usize;
    let machines = (control_planes + workers) as usize;
    // Clone waves: the i-th machine (control planes first) starts with wave i / slots.
    let prepared_at = |index: usize| {
        let wave = u32::try_from(index / slots).unwrap_or(u32::MAX);
        durations.clone * wave + durations.prepared()
    };
    if machines == 0 || control_planes == 0 {
        return Duration::ZERO;
    }
    let initialised = prepared_at(0) + durations.init;
    let mut done = initialised + durations.node_ready;
    // Control planes join one at a time: each (the first included) is absent until Ready.
    let mut last_control_plane = done;
    for index in 1..control_planes as usize {
        let begins = prepared_at(index).max(last_control_plane).max(initialised);
        last_control_plane = begins + durations.join + durations.node_ready;
        done = done.max(last_control_plane);
    }
    // Workers join together, as soon as init is done and they are prepared.
    for index in control_planes as usize..machines {
        let begins = prepared_at(index).max(initialised);
        done = done.max(begins + durations.join + durations.node_ready);
    }
    done
}

/// Replacing `machines` members of a built cluster (control planes first, then workers):
/// a replacement is cloned only while the cluster holds fewer than `max_surge` extra VMs,
/// members leave one at a time once their replacement is Ready. `upgrade` first moves the
/// control plane in place (a patch or minor upgrade).
pub fn replacement(
    durations: &StepDurations,
    machines: u32,
    max_surge: u32,
    upgrade: bool,
) -> Duration {
    let surge = max_surge.max(1) as usize;
    let start = if upgrade {
        durations.upgrade
    } else {
        Duration::ZERO
    };
    let mut removed: Vec<Duration> = Vec::with_capacity(machines as usize);
    for index in 0..machines as usize {
        // The surge budget frees up when the (index - surge)-th old VM is destroyed.
        let cloned = match index.checked_sub(surge) {
            Some(earlier) => removed[earlier],
            None => start,
        };
        let ready = cloned + durations.built();
        let previous = removed.last().copied().unwrap_or(start);
        removed.push(ready.max(previous) + durations.removal);
    }
    removed.last().copied().unwrap_or(start)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The timings the issue measured on real hosts.
    fn real() -> StepDurations {
        let s = Duration::from_secs_f64;
        StepDurations {
            clone: s(4.0),
            start: s(0.5),
            boot: s(3.0),
            prepare: s(12.0),
            init: s(6.0),
            join: s(3.0),
            node_ready: s(2.0),
            upgrade: s(6.0),
            removal: s(2.0),
        }
    }

    #[test]
    fn a_bootstrap_prepares_everything_at_once_then_joins_control_planes_one_at_a_time() {
        // prod: 19.5 s prepared, init done at 25.5 s, every worker Ready at 30.5 s.
        assert_eq!(bootstrap(&real(), 1, 3, 8), Duration::from_secs_f64(30.5));
        // platform: the first control plane is Ready at 27.5 s, the second at 32.5 s, the
        // third at 37.5 s.
        assert_eq!(bootstrap(&real(), 3, 5, 8), Duration::from_secs_f64(37.5));
        // Clones one at a time: the last worker is prepared 7 clones later, at 47.5 s.
        assert_eq!(bootstrap(&real(), 3, 5, 1), Duration::from_secs_f64(52.5));
    }

    #[test]
    fn a_surge_of_one_replaces_one_machine_after_the_other() {
        // Each replacement: 24.5 s to build, 2 s to remove.
        assert_eq!(
            replacement(&real(), 3, 1, false),
            Duration::from_secs_f64(79.5)
        );
        // A surge of 2 builds the next one while the previous is removed.
        assert!(replacement(&real(), 3, 2, false) < replacement(&real(), 3, 1, false));
        // A surge as large as the pool: every replacement built at once, removals in a row.
        assert_eq!(
            replacement(&real(), 3, 3, false),
            Duration::from_secs_f64(30.5)
        );
        assert_eq!(
            replacement(&real(), 6, 1, true),
            Duration::from_secs_f64(6.0 + 6.0 * 26.5)
        );
        assert_eq!(replacement(&real(), 0, 1, false), Duration::ZERO);
    }
}
