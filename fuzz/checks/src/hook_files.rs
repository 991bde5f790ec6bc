//! The files a shell-operator hook writes: `$KUBERNETES_PATCH_PATH` (a stream of JSON
//! or YAML patch operations), `$METRICS_PATH` (JSON lines), `$VALIDATING_RESPONSE_PATH`
//! and `$CONVERSION_RESPONSE_PATH`. The first byte picks the file.
//!
//! Beyond not panicking: an error names the file's variable; what reads, written back
//! by the same module, reads again as the same operations or response.

use operon_hooks::shell_operator::{files, metrics, patches, responses};

/// Checks one input; panics on a finding.
pub fn check(data: &[u8]) {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    match which % 4 {
        0 => match patches::parse(text) {
            Ok(operations) => {
                let written = patches::to_text(&operations);
                let again = patches::parse(&written)
                    .unwrap_or_else(|e| panic!("{written:?} does not read again: {e}"));
                assert_eq!(again, operations);
            }
            Err(e) => assert!(e.to_string().starts_with("KUBERNETES_PATCH_PATH"), "{e}"),
        },
        1 => match metrics::parse(text) {
            Ok(operations) => {
                let written = metrics::to_text(&operations);
                let again = metrics::parse(&written)
                    .unwrap_or_else(|e| panic!("{written:?} does not read again: {e}"));
                assert_eq!(again, operations);
            }
            Err(e) => assert!(e.to_string().starts_with("METRICS_PATH"), "{e}"),
        },
        2 => match responses::parse_validating(files::VALIDATING_RESPONSE, text) {
            Ok(Some(response)) => {
                let written = responses::validating_to_json(&response).to_string();
                let again = responses::parse_validating(files::VALIDATING_RESPONSE, &written)
                    .unwrap_or_else(|e| panic!("{written} does not read again: {e}"));
                assert_eq!(again, Some(response));
            }
            Ok(None) => assert!(text.trim().is_empty()),
            Err(e) => assert!(e.to_string().starts_with("VALIDATING_RESPONSE_PATH"), "{e}"),
        },
        _ => match responses::parse_conversion(text) {
            Ok(Some(response)) => {
                let written = responses::conversion_to_json(&response).to_string();
                let again = responses::parse_conversion(&written)
                    .unwrap_or_else(|e| panic!("{written} does not read again: {e}"));
                assert_eq!(again, Some(response));
            }
            Ok(None) => assert!(text.trim().is_empty()),
            Err(e) => assert!(e.to_string().starts_with("CONVERSION_RESPONSE_PATH"), "{e}"),
        },
    }
}
