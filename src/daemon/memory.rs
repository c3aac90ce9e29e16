//! Giving back to the system the memory a pass freed.
//!
//! glibc's malloc keeps what a pass frees inside its arenas: in holes between the allocations
//! that outlive the pass (each cluster's API client and its connection, the last observation),
//! of which only a free top of each heap goes back to the system. Between idle passes that is
//! memory held for nothing: at 200 clusters about 10 MB, a sixth of the daemon's RSS
//! (`cargo bench --bench fleet -- 200`: 64 to 66 MB before, 54 to 56 after). `malloc_trim`
//! hands the whole free pages inside the holes back (`MADV_DONTNEED`), in 1 to 2.5 ms per idle
//! pass at that size. A pass takes some again while it runs (58 MB at most, in that bench):
//! this lowers the memory held between passes more than the peak of one.

/// Returns the free pages of every malloc arena to the system.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)] // capstan's one foreign call: see the module's documentation.
pub fn release_freed_memory() {
    // SAFETY: malloc_trim takes no pointer and locks each arena while it walks it, so any
    // thread may call it at any time (malloc_trim(3)).
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Other allocators (musl's, macOS's) return freed memory themselves: nothing to do.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn release_freed_memory() {}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::release_freed_memory;

    /// The process's anonymous resident memory, in bytes.
    fn anonymous_resident() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
        let kib: u64 = status
            .lines()
            .find_map(|line| line.strip_prefix("RssAnon:"))
            .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("RssAnon in /proc/self/status");
        kib * 1024
    }

    #[test]
    fn memory_freed_between_survivors_goes_back_to_the_system() {
        // 64 MiB in 1 KiB blocks, with a small survivor after every 63 blocks: once the blocks
        // are freed, the heap is 63 KiB holes that its top cannot give back by itself.
        const HOLES: usize = 1024;
        let mut blocks = Vec::with_capacity(HOLES * 63);
        let mut survivors = Vec::with_capacity(HOLES);
        for _ in 0..HOLES {
            for _ in 0..63 {
                blocks.push(vec![1u8; 1024]);
            }
            survivors.push(Box::new(1u64));
        }
        // Measured while the blocks are held: another test of this process may release freed
        // memory too, between the drop and this test's own release.
        let before = anonymous_resident();
        drop(blocks);
        release_freed_memory();
        let after = anonymous_resident();
        // Each 63 KiB hole holds 14 or 15 whole pages: about 55 MiB. Other tests run
        // beside this one, so the assertion leaves them room.
        assert!(
            before.saturating_sub(after) > 24 << 20,
            "{before} bytes resident with the blocks, {after} after they were freed and released"
        );
        assert_eq!(survivors.len(), HOLES);
    }
}
