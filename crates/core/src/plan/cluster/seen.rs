//! What `classify` found about each VM, kept between the batches of a prediction.
//!
//! A prediction plans again after every batch, and a batch acts on one VM or a few: the other
//! VMs' pool, marks and staleness are what they were. The prediction says which VMs its steps
//! acted on ([`Seen::acted_on`]); the next classification works those out again and reads the
//! others from here. Debug builds work every VM out and check that the kept facts agree.

use std::cell::{Ref, RefCell};

use super::classify::Facts;
use crate::spec::KubeVersion;

/// Each VM's facts at the last batch, in name order (the order of `observed.machines`).
#[derive(Debug, Default)]
pub(crate) struct Seen(RefCell<Kept>);

#[derive(Debug, Default)]
struct Kept {
    /// The target version the facts hold for (`None`: nothing is kept; the pools' specs, and
    /// so whether a VM is current, depend on it).
    version: Option<KubeVersion>,
    /// Per VM: its facts, and whether a step acted on it since.
    facts: Vec<(Facts, bool)>,
}

/// How a step changed the VMs of the cluster, by their index in name order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Acted {
    /// On the VM at this index (its tags, power, Node or config).
    On(usize),
    /// A VM now at this index was created.
    Created(usize),
    /// The VM at this index was destroyed.
    Destroyed(usize),
    /// On the cluster as a whole: nothing kept holds.
    All,
    /// On no VM (the kubeconfig, the certificates, a Node without a VM).
    Nothing,
}

impl Seen {
    /// Records what a step did, so the next classification works out those VMs again.
    pub(crate) fn acted_on(&self, acted: Acted) {
        let mut kept = self.0.borrow_mut();
        match acted {
            Acted::On(index) => match kept.facts.get_mut(index) {
                Some((_, changed)) => *changed = true,
                None => kept.version = None,
            },
            Acted::Created(index) if index <= kept.facts.len() => {
                // Marked as acted on: worked out at the next classification.
                kept.facts.insert(index, (Facts::default(), true));
            }
            Acted::Destroyed(index) if index < kept.facts.len() => {
                kept.facts.remove(index);
            }
            Acted::Created(_) | Acted::Destroyed(_) | Acted::All => kept.version = None,
            Acted::Nothing => {}
        }
    }

    /// The kept facts of `count` VMs at `version`, each with whether a step acted on it since
    /// (then its facts are out of date); `None` when none are kept.
    pub(super) fn kept(
        &self,
        version: KubeVersion,
        count: usize,
    ) -> Option<Ref<'_, [(Facts, bool)]>> {
        let kept = self.0.borrow();
        if kept.version != Some(version) || kept.facts.len() != count {
            return None;
        }
        Some(Ref::map(kept, |kept| kept.facts.as_slice()))
    }

    /// Keeps what a classification of `count` VMs at `version` found (`None`: nothing may
    /// be kept): the facts of every VM worked out again, or of all when none were kept.
    pub(super) fn keep(
        &self,
        version: Option<KubeVersion>,
        count: usize,
        facts_of: impl Fn(usize) -> Facts,
    ) {
        let mut kept = self.0.borrow_mut();
        if version.is_some() && kept.version == version && kept.facts.len() == count {
            for (index, (facts, changed)) in kept.facts.iter_mut().enumerate() {
                if *changed {
                    *facts = facts_of(index);
                    *changed = false;
                }
            }
            return;
        }
        kept.version = version;
        kept.facts.clear();
        if version.is_some() {
            kept.facts
                .extend((0..count).map(|index| (facts_of(index), false)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(pool: usize) -> Facts {
        Facts {
            pool,
            fenced: false,
            retiring: false,
            prepared: true,
            current: true,
            stale: None,
        }
    }

    fn kept(seen: &Seen, version: KubeVersion, count: usize) -> Option<Vec<(usize, bool)>> {
        let kept = seen.kept(version, count)?;
        Some(
            kept.iter()
                .map(|(facts, acted)| (facts.pool, *acted))
                .collect(),
        )
    }

    /// The facts follow the VMs through the steps of a batch: a created VM shifts those after
    /// it, a destroyed one takes its facts with it, and only the VMs acted on are out of date.
    #[test]
    fn kept_facts_follow_the_vms_a_step_creates_destroys_or_acts_on() {
        let version: KubeVersion = "1.36.2".parse().expect("version");
        let seen = Seen::default();
        assert_eq!(kept(&seen, version, 0), None, "nothing kept yet");
        seen.keep(Some(version), 3, facts);
        assert_eq!(
            kept(&seen, version, 3),
            Some(vec![(0, false), (1, false), (2, false)])
        );

        seen.acted_on(Acted::Created(1));
        seen.acted_on(Acted::On(3));
        assert_eq!(
            kept(&seen, version, 4),
            Some(vec![(0, false), (0, true), (1, false), (2, true)])
        );
        seen.acted_on(Acted::Destroyed(0));
        assert_eq!(
            kept(&seen, version, 3),
            Some(vec![(0, true), (1, false), (2, true)])
        );
        // Worked out again: only those acted on are replaced.
        seen.keep(Some(version), 3, |index| facts(index + 10));
        assert_eq!(
            kept(&seen, version, 3),
            Some(vec![(10, false), (1, false), (12, false)])
        );

        let next: KubeVersion = "1.36.3".parse().expect("version");
        assert_eq!(
            kept(&seen, next, 3),
            None,
            "another version: the pools' specs differ"
        );
        assert_eq!(
            kept(&seen, version, 4),
            None,
            "another count: not these VMs"
        );
        seen.acted_on(Acted::All);
        assert_eq!(
            kept(&seen, version, 3),
            None,
            "the cluster as a whole changed"
        );
    }
}
