//! VMIDs for new clones. Proxmox's `/cluster/nextid` reserves nothing, so clones one daemon
//! starts at once were all offered the same id and all but one failed with "already exists"
//! and retried (with backoff: 19 machines of the demo took twice as long). The client
//! remembers the ids its clones in flight hold and looks past them.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

use crate::model::VmId;

/// The VMIDs this client's clones in flight hold, shared by its copies.
#[derive(Debug, Clone, Default)]
pub(super) struct VmidClaims(Arc<Mutex<BTreeSet<u32>>>);

/// One held VMID; dropping it (the clone done or failed) releases it.
#[derive(Debug)]
pub(super) struct Claim {
    claims: Option<VmidClaims>,
    id: VmId,
}

impl Claim {
    /// `id`, not held (nothing to release).
    pub(super) fn unheld(id: VmId) -> Claim {
        Claim { claims: None, id }
    }

    /// The VMID held.
    pub(super) fn id(&self) -> VmId {
        self.id
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if let Some(claims) = &self.claims {
            claims.held().remove(&self.id.0);
        }
    }
}

impl VmidClaims {
    fn held(&self) -> std::sync::MutexGuard<'_, BTreeSet<u32>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The first id at or after `from` that no clone of ours holds.
    pub(super) fn first_unclaimed_from(&self, from: VmId) -> VmId {
        let held = self.held();
        let mut id = from.0;
        while held.contains(&id) {
            id = id.saturating_add(1);
        }
        VmId(id)
    }

    /// Holds `id`, unless a clone of ours took it meanwhile.
    pub(super) fn try_claim(&self, id: VmId) -> Option<Claim> {
        self.held().insert(id.0).then(|| Claim {
            claims: Some(self.clone()),
            id,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_id_is_skipped_until_its_clone_ends() {
        let claims = VmidClaims::default();
        let first = claims.try_claim(VmId(100)).expect("free");
        assert!(claims.try_claim(VmId(100)).is_none(), "held");
        let second = claims
            .try_claim(claims.first_unclaimed_from(VmId(100)))
            .expect("past it");
        assert_eq!(second.id(), VmId(101));
        assert_eq!(claims.first_unclaimed_from(VmId(100)), VmId(102));
        drop(first);
        assert_eq!(claims.first_unclaimed_from(VmId(100)), VmId(100));
    }
}
