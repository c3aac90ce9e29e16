//! Error messages as one line: an error and every cause below it, as logs and status print them.

/// `err` and its chain of sources, joined by `": "`; each layer's message names only its own
/// layer, so nothing repeats.
pub fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
