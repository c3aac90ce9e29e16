//! What a VM's disk carries beyond its config (the K3s air-gap install, the Talos release and
//! its system extensions, cloud-init): set on a template by the world, copied whole to its
//! clones.

use super::state::VmState;

/// What a VM's disk image carries beyond its config: copied whole by a clone.
pub struct DiskImage {
    k3s_airgap: Option<String>,
    talos: Option<String>,
    talos_extensions: Vec<String>,
    cloud_init: bool,
}

impl VmState {
    /// What its disk image carries, for a clone of it.
    pub fn image(&self) -> DiskImage {
        DiskImage {
            k3s_airgap: self.k3s_airgap.clone(),
            talos: self.talos.clone(),
            talos_extensions: self.talos_extensions.clone(),
            cloud_init: self.cloud_init,
        }
    }

    /// Takes `image` as its disk's (a clone's copy of its source's).
    pub fn take_image(&mut self, image: DiskImage) {
        self.k3s_airgap = image.k3s_airgap;
        self.talos = image.talos;
        self.talos_extensions = image.talos_extensions;
        self.cloud_init = image.cloud_init;
    }
}
