//! The address a lab VM has on the lab's subnet: the one it configures itself with (a Talos
//! VM's static address from its cidata), else a lease from the DHCP range; either is kept until
//! the VM is destroyed, and is what its guest agent reports.

use std::net::Ipv4Addr;

use super::guest::GuestSoftware;
use super::state::SimState;

impl SimState {
    /// The MAC address of `vmid`'s `net0`, lowercase.
    pub fn mac_address(&self, vmid: u32) -> Option<String> {
        self.vms
            .get(&vmid)?
            .config
            .get("net0")
            .and_then(|net| net.split(',').next())
            .and_then(|model| model.split_once('=').map(|(_, mac)| mac.to_lowercase()))
    }

    /// Gives `vmid`, starting, the address `guest` configures itself with, or else one from
    /// the DHCP range; an address it holds already it keeps (until it is destroyed).
    pub fn address_at_start(&mut self, vmid: u32, guest: &dyn GuestSoftware) -> Option<Ipv4Addr> {
        if let Some(address) = self.leases.get(&vmid) {
            return Some(*address);
        }
        let own = self.identity(vmid).and_then(|identity| {
            let mac = self.mac_address(vmid)?;
            guest.static_address(&identity, &mac)
        });
        if let Some(address) = own {
            self.leases.insert(vmid, address);
            return Some(address);
        }
        self.lease(vmid)
    }
}
