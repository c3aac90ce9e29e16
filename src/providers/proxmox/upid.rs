//! Proxmox task ids (UPIDs): `UPID:<node>:<pid>:<pstart>:<starttime>:<type>:<id>:<user>:`
//! with pid, pstart and starttime in upper-case hex (pure).

/// A parsed UPID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upid {
    /// The node that runs the task (where its status must be read).
    pub node: String,
    /// Worker process id.
    pub pid: u32,
    /// Worker process start (clock ticks since boot).
    pub pstart: u64,
    /// Task start, Unix seconds.
    pub starttime: i64,
    /// Task type: `qmclone`, `qmstart`, ...
    pub kind: String,
    /// Task id, usually a VMID (for `qmclone` the *source* VMID).
    pub id: String,
    /// Who started it (`user@realm!token` for tokens).
    pub user: String,
}

impl Upid {
    /// Parses a UPID; `None` when it is not one.
    pub fn parse(text: &str) -> Option<Upid> {
        let rest = text.strip_prefix("UPID:")?;
        let parts: Vec<&str> = rest.splitn(8, ':').collect();
        if parts.len() != 8 || !parts[7].is_empty() {
            return None;
        }
        Some(Upid {
            node: non_empty(parts[0])?,
            pid: u32::from_str_radix(parts[1], 16).ok()?,
            pstart: u64::from_str_radix(parts[2], 16).ok()?,
            starttime: i64::from_str_radix(parts[3], 16).ok()?,
            kind: non_empty(parts[4])?,
            id: parts[5].to_owned(),
            user: non_empty(parts[6])?,
        })
    }
}

fn non_empty(text: &str) -> Option<String> {
    (!text.is_empty()).then(|| text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_real_upid_parses() {
        let upid =
            Upid::parse("UPID:pve-mp:00000ACD:00006AE8:679A423B:qmclone:112:capmox@pve!capi:")
                .expect("valid");
        assert_eq!(upid.node, "pve-mp");
        assert_eq!(upid.pid, 0xACD);
        assert_eq!(upid.pstart, 0x6AE8);
        assert_eq!(upid.starttime, 0x679A423B);
        assert_eq!(upid.kind, "qmclone");
        assert_eq!(upid.id, "112");
        assert_eq!(upid.user, "capmox@pve!capi");
    }

    #[test]
    fn malformed_upids_are_refused() {
        assert_eq!(Upid::parse("UPID:pve1:1:2:3:qmstart:100:root@pam"), None);
        assert_eq!(Upid::parse("pve1:1:2:3:qmstart:100:root@pam:"), None);
        assert_eq!(Upid::parse("UPID:pve1:zz:2:3:qmstart:100:root@pam:"), None);
    }
}
