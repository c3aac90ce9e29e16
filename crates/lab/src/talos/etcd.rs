//! A simulated etcd cluster, one per Talos cluster, shared by its control planes' Talos APIs:
//! members with ids, names and peer URLs, a leader, and quorum (a majority of the members
//! healthy). Without quorum it answers nothing, as a real etcd that lost its majority.

use std::sync::{Arc, Mutex, MutexGuard};

/// An etcd member as the Talos API lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdMember {
    /// The member id (etcd's random non-zero 64-bit id).
    pub id: u64,
    /// Its name: the node's hostname, as Talos names members.
    pub name: String,
    /// Its peer URLs (`https://<address>:2380`).
    pub peer_urls: Vec<String>,
    /// Its client URLs (`https://<address>:2379`).
    pub client_urls: Vec<String>,
    /// Whether it answers (a fault the tests inject; not in the Talos API).
    pub healthy: bool,
}

/// Why the simulated etcd refused an operation. The messages are etcd's and Talos's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EtcdError {
    /// Bootstrap on a cluster that already has members.
    #[error("etcd data directory is not empty")]
    AlreadyBootstrapped,
    /// A join or call before any bootstrap.
    #[error("etcd is not bootstrapped")]
    NotBootstrapped,
    /// Fewer than a majority of the members are healthy.
    #[error("etcdserver: request timed out")]
    NoQuorum,
    /// The named or numbered member is not in the cluster.
    #[error("etcdserver: member not found")]
    MemberNotFound,
    /// A member with that name is already in the cluster.
    #[error("etcdserver: member {0} already exists")]
    MemberExists(String),
    /// The last member cannot leave or be removed.
    #[error(
        "etcd member count(1) is insufficient to maintain quorum if upgrade with etcd member leave is performed"
    )]
    LastMember,
    /// The system gave no randomness for a member id.
    #[error("no randomness for an etcd member id")]
    Random,
}

#[derive(Debug, Default)]
struct State {
    members: Vec<EtcdMember>,
    leader: Option<u64>,
}

/// A handle on one cluster's simulated etcd; clones share it.
#[derive(Debug, Clone, Default)]
pub struct EtcdCluster {
    state: Arc<Mutex<State>>,
}

impl EtcdCluster {
    /// An etcd with no member (nothing bootstrapped yet).
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain data behind; keep serving it.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Starts the cluster with `name` as its only member and leader (Talos's `Bootstrap`).
    ///
    /// # Errors
    /// [`EtcdError::AlreadyBootstrapped`] when it has members.
    pub fn bootstrap(&self, name: &str, address: &str) -> Result<u64, EtcdError> {
        let mut state = self.lock();
        if !state.members.is_empty() {
            return Err(EtcdError::AlreadyBootstrapped);
        }
        let member = new_member(name, address)?;
        let id = member.id;
        state.members.push(member);
        state.leader = Some(id);
        Ok(id)
    }

    /// Adds `name` as a member, as a control plane joining does.
    ///
    /// # Errors
    /// Not bootstrapped, no quorum, or a member of that name exists.
    pub fn join(&self, name: &str, address: &str) -> Result<u64, EtcdError> {
        let mut state = self.lock();
        check_serving(&state)?;
        if state.members.iter().any(|m| m.name == name) {
            return Err(EtcdError::MemberExists(name.to_owned()));
        }
        let member = new_member(name, address)?;
        let id = member.id;
        state.members.push(member);
        Ok(id)
    }

    /// The members, in the order they joined.
    ///
    /// # Errors
    /// Not bootstrapped, or no quorum.
    pub fn members(&self) -> Result<Vec<EtcdMember>, EtcdError> {
        let state = self.lock();
        check_serving(&state)?;
        Ok(state.members.clone())
    }

    /// The members whatever the quorum (for the lab's own checks, not the Talos API).
    pub fn members_unchecked(&self) -> Vec<EtcdMember> {
        self.lock().members.clone()
    }

    /// The leader's name, if there is a leader.
    pub fn leader(&self) -> Option<String> {
        let state = self.lock();
        let leader = state.leader?;
        state
            .members
            .iter()
            .find(|m| m.id == leader)
            .map(|m| m.name.clone())
    }

    /// Marks member `name` healthy or not (a fault: the VM stopped, its disk died).
    pub fn set_healthy(&self, name: &str, healthy: bool) {
        let mut state = self.lock();
        if let Some(member) = state.members.iter_mut().find(|m| m.name == name) {
            member.healthy = healthy;
        }
        let leader_healthy = state
            .leader
            .and_then(|id| state.members.iter().find(|m| m.id == id))
            .is_some_and(|m| m.healthy);
        if !leader_healthy {
            elect(&mut state, None);
        }
    }

    /// Whether a majority of the members is healthy.
    pub fn has_quorum(&self) -> bool {
        quorum(&self.lock())
    }

    /// Moves leadership away from `name` if it leads; the new leader's name, or `None` when
    /// `name` did not lead.
    ///
    /// # Errors
    /// Not bootstrapped, no quorum, or `name` is not a member.
    pub fn forfeit_leadership(&self, name: &str) -> Result<Option<String>, EtcdError> {
        let mut state = self.lock();
        check_serving(&state)?;
        let id = member_id(&state, name)?;
        if state.leader != Some(id) {
            return Ok(None);
        }
        elect(&mut state, Some(id));
        let leader = state.leader;
        Ok(state
            .members
            .iter()
            .find(|m| Some(m.id) == leader)
            .map(|m| m.name.clone()))
    }

    /// Removes member `name` itself (Talos's `EtcdLeaveCluster`).
    ///
    /// # Errors
    /// Not bootstrapped, no quorum, not a member, or the last member.
    pub fn leave(&self, name: &str) -> Result<(), EtcdError> {
        let mut state = self.lock();
        check_serving(&state)?;
        let id = member_id(&state, name)?;
        remove(&mut state, id)
    }

    /// Removes the member numbered `id` (Talos's `EtcdRemoveMemberByID`).
    ///
    /// # Errors
    /// Not bootstrapped, no quorum, no such member, or the last member.
    pub fn remove_by_id(&self, id: u64) -> Result<(), EtcdError> {
        let mut state = self.lock();
        check_serving(&state)?;
        remove(&mut state, id)
    }
}

fn new_member(name: &str, address: &str) -> Result<EtcdMember, EtcdError> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|_| EtcdError::Random)?;
    Ok(EtcdMember {
        // etcd never gives id 0 (it means "none" in its API).
        id: u64::from_le_bytes(bytes).max(1),
        name: name.to_owned(),
        peer_urls: vec![format!("https://{address}:2380")],
        client_urls: vec![format!("https://{address}:2379")],
        healthy: true,
    })
}

fn quorum(state: &State) -> bool {
    let healthy = state.members.iter().filter(|m| m.healthy).count();
    healthy * 2 > state.members.len()
}

fn check_serving(state: &State) -> Result<(), EtcdError> {
    if state.members.is_empty() {
        return Err(EtcdError::NotBootstrapped);
    }
    if !quorum(state) {
        return Err(EtcdError::NoQuorum);
    }
    Ok(())
}

fn member_id(state: &State, name: &str) -> Result<u64, EtcdError> {
    state
        .members
        .iter()
        .find(|m| m.name == name)
        .map(|m| m.id)
        .ok_or(EtcdError::MemberNotFound)
}

fn remove(state: &mut State, id: u64) -> Result<(), EtcdError> {
    let index = state
        .members
        .iter()
        .position(|m| m.id == id)
        .ok_or(EtcdError::MemberNotFound)?;
    if state.members.len() == 1 {
        return Err(EtcdError::LastMember);
    }
    state.members.remove(index);
    if state.leader == Some(id) {
        elect(state, None);
    }
    Ok(())
}

/// Makes the first healthy member other than `except` the leader (none when there is none
/// or quorum is lost).
fn elect(state: &mut State, except: Option<u64>) {
    state.leader = if quorum(state) {
        state
            .members
            .iter()
            .find(|m| m.healthy && Some(m.id) != except)
            .map(|m| m.id)
    } else {
        None
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn three() -> EtcdCluster {
        let etcd = EtcdCluster::new();
        etcd.bootstrap("cp-1", "10.0.0.1").expect("bootstraps");
        etcd.join("cp-2", "10.0.0.2").expect("joins");
        etcd.join("cp-3", "10.0.0.3").expect("joins");
        etcd
    }

    #[test]
    fn bootstrap_happens_once() {
        let etcd = EtcdCluster::new();
        assert_eq!(etcd.members(), Err(EtcdError::NotBootstrapped));
        etcd.bootstrap("cp-1", "10.0.0.1").expect("bootstraps");
        assert_eq!(
            etcd.bootstrap("cp-1", "10.0.0.1"),
            Err(EtcdError::AlreadyBootstrapped)
        );
        assert_eq!(etcd.leader().as_deref(), Some("cp-1"));
    }

    #[test]
    fn a_cluster_of_three_that_lost_two_is_unavailable() {
        let etcd = three();
        etcd.set_healthy("cp-1", false);
        assert!(etcd.has_quorum());
        assert_ne!(etcd.leader().as_deref(), Some("cp-1"));
        etcd.set_healthy("cp-2", false);
        assert!(!etcd.has_quorum());
        assert_eq!(etcd.members(), Err(EtcdError::NoQuorum));
        assert_eq!(etcd.leader(), None);
    }

    #[test]
    fn forfeit_moves_the_leader_and_leave_removes_the_member() {
        let etcd = three();
        assert_eq!(etcd.forfeit_leadership("cp-2"), Ok(None));
        let new = etcd.forfeit_leadership("cp-1").expect("forfeits");
        assert_eq!(new.as_deref(), Some("cp-2"));
        etcd.leave("cp-1").expect("leaves");
        let names: Vec<String> = etcd
            .members()
            .expect("lists")
            .into_iter()
            .map(|m| m.name)
            .collect();
        assert_eq!(names, ["cp-2", "cp-3"]);
    }

    #[test]
    fn the_last_member_cannot_leave() {
        let etcd = three();
        let members = etcd.members().expect("lists");
        etcd.remove_by_id(members[1].id).expect("removes");
        assert_eq!(
            etcd.remove_by_id(members[1].id),
            Err(EtcdError::MemberNotFound)
        );
        etcd.leave("cp-3").expect("leaves");
        assert_eq!(etcd.leave("cp-1"), Err(EtcdError::LastMember));
    }
}
