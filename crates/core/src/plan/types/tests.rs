//! Unit tests of the plan's types.

use super::*;

#[test]
fn action_kinds_are_named_as_the_actions_serialise() {
    let names: Vec<&str> = ActionKind::ALL.iter().map(|kind| kind.name()).collect();
    assert_eq!(
        names,
        [
            "create-machine",
            "init-control-plane",
            "prepare-node",
            "join-node",
            "cordon",
            "drain",
            "delete-node",
            "reset-node",
            "destroy-machine",
            "upgrade-control-plane",
            "renew-certificates",
            "deliver-kubeconfig",
            "fence-machine",
            "label-nodes",
            "tag-machines",
            "delete-cluster",
        ]
    );
    for kind in ActionKind::ALL {
        let json = serde_json::to_string(&kind).expect("serialise");
        assert_eq!(json, format!("\"{kind}\""));
        let back: ActionKind = serde_json::from_str(&json).expect("deserialise");
        assert_eq!(back, kind);
    }
    assert!(serde_json::from_str::<ActionKind>("\"clone\"").is_err());
}

#[test]
fn action_kinds_sort_by_name() {
    let mut kinds = ActionKind::ALL.to_vec();
    kinds.sort();
    let names: Vec<&str> = kinds.iter().map(|kind| kind.name()).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted);
}
