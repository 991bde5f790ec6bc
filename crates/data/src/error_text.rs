//! An error and its causes as one line of text, for logs and the CLI.

/// `error` and its causes joined by `: `, skipping a cause whose text the line already
/// holds: errors that name their cause in their message also return it as their
/// source, and would print it twice.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
