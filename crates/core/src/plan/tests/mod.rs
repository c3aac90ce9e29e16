//! Table tests: one group per lifecycle rule, each on a built world changed one way, asserting
//! whole ordered plans and the exact refusal messages.

mod authentication;
mod bootstrap;
mod devices;
mod in_flight;
mod labels;
mod predictions;
mod rule_01_create_before_remove;
mod rule_02_one_disruption_at_a_time;
mod rule_03_min_workers;
mod rule_04_removals_one_at_a_time;
mod rule_05_drain_timeout;
mod rule_06_orphans;
mod rule_07_upgrades;
mod rule_08_endpoint_fixed;
mod rule_09_quorum;
mod rule_10_certificates;
mod rule_11_maintenance_window;
mod rule_12_removed_cluster;
mod rule_13_fencing;
mod rule_14_drift;
mod rule_15_capacity;
mod rule_16_replace_guard;
mod rule_17_network_fixed;
mod stages;
mod suspension;
mod talos;

use super::fixtures::*;
use super::*;
use crate::model::{NodeName, Role, VmId};
use crate::observed::{
    DrainObserved, FluxSecret, FluxTarget, Observed, ObservedMachine, PodRef, PowerState, VmConfig,
};
use crate::spec::Cluster;

fn s(action: &'static str, machine: &NodeName) -> (&'static str, String) {
    (action, machine.to_string())
}

fn c(action: &'static str) -> (&'static str, String) {
    (action, String::new())
}

/// The removal of one member: the five steps, in order.
fn removal(machine: &NodeName) -> Vec<(&'static str, String)> {
    [
        "cordon",
        "drain",
        "delete-node",
        "reset-node",
        "destroy-machine",
    ]
    .into_iter()
    .map(|a| s(a, machine))
    .collect()
}

/// Each rule's table tests are in a file of their own, `rule_<number>_<rule>.rs`.
#[test]
fn every_rule_has_a_test_file_named_after_it() {
    let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/plan/tests");
    for (index, rule) in Rule::ALL.into_iter().enumerate() {
        assert_eq!(
            usize::from(rule.number()),
            index + 1,
            "Rule::ALL is in number order"
        );
        let mut name = String::new();
        for (at, letter) in format!("{rule:?}").chars().enumerate() {
            if letter.is_ascii_uppercase() && at > 0 {
                name.push('_');
            }
            name.push(letter.to_ascii_lowercase());
        }
        let file = format!("rule_{:02}_{name}.rs", rule.number());
        assert!(
            folder.join(&file).exists(),
            "rule {}: {file}",
            rule.number()
        );
    }
}
