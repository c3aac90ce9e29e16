//! A lab with an older Talos in it: a template whose clones boot Talos v1.11.5 (next to the
//! default world's `talos-v1.13.9` templates and `local` ISO storage), with fast Proxmox tasks.

use capstan_lab::values::LabDuration;
use capstan_lab::world::{LabConfig, ProxmoxWorld, Timings, WorldTemplate};

/// The Talos version the template's clones boot.
pub const TALOS_VERSION: &str = "v1.11.5";
/// The Talos template's name (VMID 9400, on pve1).
pub const TALOS_TEMPLATE: &str = "talos-1.11";

/// The default Proxmox world (which has a `local` ISO storage) with fast tasks and the Talos
/// template.
pub fn talos_world() -> ProxmoxWorld {
    let ms = LabDuration::millis;
    let mut world = ProxmoxWorld {
        timings: Timings {
            clone: ms(20),
            config: ms(5),
            start: ms(10),
            boot: ms(30),
            shutdown: ms(10),
            stop: ms(10),
            ..Timings::default()
        },
        ..ProxmoxWorld::default()
    };
    let mut templates = world.effective_templates();
    templates.push(WorldTemplate {
        talos: Some(TALOS_VERSION.into()),
        tags: vec!["talos".into()],
        ..WorldTemplate::new(TALOS_TEMPLATE, 9400, "pve1")
    });
    world.templates = Some(templates);
    world
}

/// A lab config of [`talos_world`] (for [`crate::World::with_lab`]).
pub fn talos_lab() -> LabConfig {
    LabConfig {
        proxmox: talos_world(),
        ..LabConfig::default()
    }
}
