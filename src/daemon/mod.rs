//! The reconciler daemon: per cluster, read the repository, observe, plan, execute the next
//! step, report, and schedule the next pass.

pub mod backoff;
