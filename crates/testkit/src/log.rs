//! The daemon's log as a test reads it: a `tracing` subscriber for the test's thread that
//! writes to memory with no redaction of its own, so a scan for a secret sees exactly what the
//! daemon wrote.

use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};

/// What the test's thread logged since [`CapturedLog::capture`].
#[derive(Clone, Default)]
pub struct CapturedLog(Arc<Mutex<Vec<u8>>>);

impl Write for CapturedLog {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl CapturedLog {
    /// Captures what this thread logs at `level` and above until the guard is dropped.
    pub fn capture(level: tracing::Level) -> (CapturedLog, tracing::subscriber::DefaultGuard) {
        let log = CapturedLog::default();
        let out = log.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(level)
            .with_writer(move || out.clone())
            .finish();
        (log, tracing::subscriber::set_default(subscriber))
    }

    /// The lines logged so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
    }
}
