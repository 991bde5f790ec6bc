//! `$VALIDATING_RESPONSE_PATH` / `$ADMISSION_RESPONSE_PATH` (`{allowed, message,
//! warnings, patch}`, where `patch` is a base64 JSON Patch or the patch itself) and
//! `$CONVERSION_RESPONSE_PATH` (`{convertedObjects}` or `{failedMessage}`), read into
//! the responses a wasm hook returns and written back in the same shapes.

use super::files::{CONVERSION_RESPONSE, HookFile, HookFileError};
use super::json_text;
use operon_data::model::{ConversionResponse, ValidatingResponse};
use serde::Deserialize;
use serde_json::{Value, json};

/// `$VALIDATING_RESPONSE_PATH` / `$ADMISSION_RESPONSE_PATH`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ValidatingDocument {
    allowed: bool,
    message: Option<String>,
    #[serde(default)]
    warnings: Vec<String>,
    patch: Option<Value>,
}

/// Reads a validating (or admission) response; `None` when the hook wrote nothing.
pub fn parse_validating(
    file: HookFile,
    text: &str,
) -> Result<Option<ValidatingResponse>, HookFileError> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    let doc: ValidatingDocument =
        serde_json::from_str(text).map_err(|e| file.error(e.line(), e.to_string()))?;
    let patch = match doc.patch {
        None | Some(Value::Null) => None,
        Some(Value::String(encoded)) => {
            let bytes = base64_decode(&encoded)
                .map_err(|e| file.error(1, format!("patch is not valid base64: {e}")))?;
            let patch: Value = serde_json::from_slice(&bytes)
                .map_err(|e| file.error(1, format!("patch is not a JSON Patch: {e}")))?;
            Some(patch)
        }
        Some(patch) => Some(patch),
    };
    if let Some(patch) = &patch
        && !patch.is_array()
    {
        return Err(file.error(1, "patch must be a JSON Patch (an array of operations)"));
    }
    Ok(Some(ValidatingResponse {
        allowed: doc.allowed,
        message: doc.message.filter(|m| !m.is_empty()),
        warnings: doc.warnings,
        patch: patch.map(|p| p.to_string()),
    }))
}

/// `$CONVERSION_RESPONSE_PATH`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ConversionDocument {
    #[serde(default)]
    converted_objects: Vec<Value>,
    failed_message: Option<String>,
}

/// Reads a conversion response; `None` when the hook wrote nothing.
pub fn parse_conversion(text: &str) -> Result<Option<ConversionResponse>, HookFileError> {
    let file = CONVERSION_RESPONSE;
    if text.trim().is_empty() {
        return Ok(None);
    }
    let doc: ConversionDocument =
        serde_json::from_str(text).map_err(|e| file.error(e.line(), e.to_string()))?;
    if let Some(index) = doc.converted_objects.iter().position(|o| !o.is_object()) {
        return Err(file.error(1, format!("convertedObjects[{index}] is not an object")));
    }
    Ok(Some(ConversionResponse {
        failed_message: doc.failed_message.filter(|m| !m.is_empty()),
        converted_objects: doc.converted_objects.iter().map(Value::to_string).collect(),
    }))
}

/// Standard base64 with or without padding, whitespace ignored (`base64 -w0` or not).
fn base64_decode(text: &str) -> Result<Vec<u8>, base64::DecodeError> {
    use base64::Engine as _;
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const LENIENT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    let compact: String = text.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    LENIENT.decode(compact)
}

/// A validating response in the shape [`parse_validating`] reads back, with the patch
/// as a JSON value rather than base64 so that people can read it.
pub fn validating_to_json(response: &ValidatingResponse) -> Value {
    json!({
        "allowed": response.allowed,
        "message": response.message,
        "warnings": response.warnings,
        "patch": response.patch.as_deref().map(json_text),
    })
}

/// A conversion response in the shape [`parse_conversion`] reads back.
pub fn conversion_to_json(response: &ConversionResponse) -> Value {
    json!({
        "failedMessage": response.failed_message,
        "convertedObjects": response
            .converted_objects
            .iter()
            .map(|object| json_text(object))
            .collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shell_operator::files::{ADMISSION_RESPONSE, VALIDATING_RESPONSE};

    #[test]
    fn validating_responses_with_warnings_and_base64_patches() {
        assert_eq!(parse_validating(VALIDATING_RESPONSE, "  \n").unwrap(), None);
        let r = parse_validating(
            VALIDATING_RESPONSE,
            r#"{"allowed": true, "warnings": ["It is Tuesday"]}"#,
        )
        .unwrap()
        .unwrap();
        assert!(r.allowed);
        assert_eq!(r.warnings, ["It is Tuesday"]);
        // [{"op":"add","path":"/x","value":1}]
        let r = parse_validating(
            ADMISSION_RESPONSE,
            r#"{"allowed": true, "patch": "W3sib3AiOiJhZGQiLCJwYXRoIjoiL3giLCJ2YWx1ZSI6MX1d"}"#,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            r.patch.as_deref(),
            Some(r#"[{"op":"add","path":"/x","value":1}]"#)
        );
        let err = parse_validating(VALIDATING_RESPONSE, "{\"message\": \"no\"}").unwrap_err();
        assert!(err.reason.contains("allowed"), "{err}");
    }

    #[test]
    fn conversion_responses() {
        let r = parse_conversion(r#"{"convertedObjects": [{"apiVersion": "v2", "kind": "X"}]}"#)
            .unwrap()
            .unwrap();
        assert_eq!(r.converted_objects, [r#"{"apiVersion":"v2","kind":"X"}"#]);
        let r = parse_conversion(r#"{"failedMessage": "nope"}"#)
            .unwrap()
            .unwrap();
        assert_eq!(r.failed_message.as_deref(), Some("nope"));
        assert!(parse_conversion("[1]").is_err());
    }

    #[test]
    fn written_responses_read_back_unchanged() {
        let validating = ValidatingResponse {
            allowed: false,
            message: Some("no latest tags".to_owned()),
            warnings: vec!["checked".to_owned()],
            patch: Some(r#"[{"op":"add","path":"/x","value":1}]"#.to_owned()),
        };
        let text = validating_to_json(&validating).to_string();
        assert_eq!(
            parse_validating(VALIDATING_RESPONSE, &text).unwrap(),
            Some(validating)
        );
        let conversion = ConversionResponse {
            failed_message: None,
            converted_objects: vec![r#"{"apiVersion":"v2","kind":"X"}"#.to_owned()],
        };
        let text = conversion_to_json(&conversion).to_string();
        assert_eq!(parse_conversion(&text).unwrap(), Some(conversion));
    }

    #[test]
    fn base64_patches_may_be_wrapped() {
        // [{"op":"add","path":"/x","value":1}], wrapped at 20 characters.
        let text =
            r#"{"allowed": true, "patch": "W3sib3AiOiJhZGQiLCJw\nYXRoIjoiL3giLCJ2YWx1\nZSI6MX1d"}"#;
        let r = parse_validating(VALIDATING_RESPONSE, text)
            .unwrap()
            .unwrap();
        assert_eq!(
            r.patch.as_deref(),
            Some(r#"[{"op":"add","path":"/x","value":1}]"#)
        );
        let err = parse_validating(VALIDATING_RESPONSE, r#"{"allowed": true, "patch": "%%%"}"#)
            .unwrap_err();
        assert!(err.reason.contains("base64"), "{err}");
    }
}
