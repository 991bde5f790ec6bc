//! Kubernetes' syntax for names, in one place, as apimachinery's
//! `k8s.io/apimachinery/pkg/util/validation` checks it: DNS-1123 labels (namespace
//! names) and subdomains (most objects' names), qualified names (label keys, and
//! annotation keys in any case), label values, apiVersions, and fully qualified names
//! (webhooks'). The `is_` checks say whether the text follows the rule; the label and
//! annotation checks also say why not, for an error that names the field.

use thiserror::Error;

/// The longest DNS label, and the longest name part of a qualified name and label value.
pub const MAX_LABEL: usize = 63;

/// The longest DNS subdomain, so the longest name of most objects.
pub const MAX_SUBDOMAIN: usize = 253;

/// Why a label key, label value or annotation key is refused. The messages name the
/// text and say what the rule allows, so a field path in front of them is enough.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NameError {
    /// A label key's part before '/' is empty or not a lowercase DNS subdomain.
    #[error("label key {key:?}: the prefix must be a lowercase DNS subdomain")]
    LabelKeyPrefix {
        /// The whole key.
        key: String,
    },
    /// A label key's name (after the '/', or all of it) breaks the label-name rule.
    #[error(
        "label key {key:?}: the name must be at most 63 letters, digits, '-', '_' or '.', \
         starting and ending with a letter or digit"
    )]
    LabelKeyName {
        /// The whole key.
        key: String,
    },
    /// A non-empty label value breaks the label-name rule.
    #[error(
        "label value {value:?}: at most 63 letters, digits, '-', '_' or '.', starting and \
         ending with a letter or digit"
    )]
    LabelValue {
        /// The value.
        value: String,
    },
    /// An annotation key's part before '/' is empty or not a DNS subdomain (in any case).
    #[error("annotation key {key:?}: the prefix must be a DNS subdomain")]
    AnnotationKeyPrefix {
        /// The whole key.
        key: String,
    },
    /// An annotation key's name breaks the label-name rule.
    #[error(
        "annotation key {key:?}: the name must be at most 63 letters, digits, '-', '_' or \
         '.', starting and ending with a letter or digit"
    )]
    AnnotationKeyName {
        /// The whole key.
        key: String,
    },
}

/// 1 to `max` bytes that `inner` allows, starting and ending with a letter or digit: the
/// shape of DNS labels, a subdomain's segments and label names alike.
fn is_segment(text: &str, max: usize, inner: fn(u8) -> bool) -> bool {
    let bytes = text.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            bytes.len() <= max
                && first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes.iter().all(|b| inner(*b))
        }
        _ => false,
    }
}

fn is_dns_byte(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'
}

/// An RFC 1123 label: at most 63 lowercase letters, digits and '-', starting and ending
/// with a letter or digit (a namespace's name).
pub fn is_dns_label(text: &str) -> bool {
    is_segment(text, MAX_LABEL, is_dns_byte)
}

/// An RFC 1123 subdomain: at most 253 characters of dot-separated segments of lowercase
/// letters, digits and '-', each starting and ending with a letter or digit (most
/// objects' names, a Node's among them). As in apimachinery, a segment may be longer than
/// a DNS label's 63 characters: an object name without dots is one segment.
pub fn is_dns_subdomain(text: &str) -> bool {
    text.len() <= MAX_SUBDOMAIN
        && text
            .split('.')
            .all(|segment| is_segment(segment, MAX_SUBDOMAIN, is_dns_byte))
}

/// A label name (a qualified name's name part, and a non-empty label value): at most 63
/// letters in either case, digits, '-', '_' or '.', starting and ending with a letter or
/// digit.
fn is_label_name(text: &str) -> bool {
    is_segment(text, MAX_LABEL, |b| {
        b.is_ascii_alphanumeric() || b"-_.".contains(&b)
    })
}

/// Where a qualified name's prefix and name part are wrong, if anywhere: `(prefix
/// refused, name refused)`.
fn qualified_name_faults(text: &str) -> (bool, bool) {
    // The last '/' separates, so that `a/b/c` has the prefix `a/b`, which no subdomain is.
    match text.rsplit_once('/') {
        Some((prefix, name)) => (!is_dns_subdomain(prefix), !is_label_name(name)),
        None => (false, !is_label_name(text)),
    }
}

/// A qualified name: `name`, or `prefix/name` with a DNS subdomain prefix (label keys,
/// and the names of a webhook's match conditions).
pub fn is_qualified_name(text: &str) -> bool {
    qualified_name_faults(text) == (false, false)
}

/// A label key (a qualified name), or why it is not one.
pub fn label_key(key: &str) -> Result<(), NameError> {
    match qualified_name_faults(key) {
        (true, _) => Err(NameError::LabelKeyPrefix {
            key: key.to_owned(),
        }),
        (false, true) => Err(NameError::LabelKeyName {
            key: key.to_owned(),
        }),
        (false, false) => Ok(()),
    }
}

/// A label value (empty, or a label name), or why it is not one.
pub fn label_value(value: &str) -> Result<(), NameError> {
    if value.is_empty() || is_label_name(value) {
        Ok(())
    } else {
        Err(NameError::LabelValue {
            value: value.to_owned(),
        })
    }
}

/// An annotation key, or why it is not one: a qualified name in any case (the API server
/// checks the key lowercased, so `Example.com/Note` is one).
pub fn annotation_key(key: &str) -> Result<(), NameError> {
    match qualified_name_faults(&key.to_ascii_lowercase()) {
        (true, _) => Err(NameError::AnnotationKeyPrefix {
            key: key.to_owned(),
        }),
        (false, true) => Err(NameError::AnnotationKeyName {
            key: key.to_owned(),
        }),
        (false, false) => Ok(()),
    }
}

/// An apiVersion: `version` (the core group's, a DNS label such as `v1`) or
/// `group/version` with a DNS subdomain group.
pub fn is_api_version(text: &str) -> bool {
    match text.split_once('/') {
        None => is_dns_label(text),
        Some((group, version)) => is_dns_subdomain(group) && is_dns_label(version),
    }
}

/// A fully qualified name: a DNS subdomain of at least three segments (an admission
/// webhook's name, apimachinery's `IsFullyQualifiedName`).
pub fn is_fully_qualified_name(text: &str) -> bool {
    is_dns_subdomain(text) && text.split('.').count() >= 3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dns_label_is_1_to_63_lowercase_letters_digits_and_inner_dashes() {
        for good in ["a", "0", "worker-2", "a-b-c", "123", &"a".repeat(63)] {
            assert!(is_dns_label(good), "{good:?}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "-",
            "A",
            "aB",
            "a.b",
            "a_b",
            "a b",
            "é",
            &"a".repeat(64),
        ] {
            assert!(!is_dns_label(bad), "{bad:?}");
        }
    }

    #[test]
    fn a_dns_subdomain_is_at_most_253_characters_of_dot_separated_segments() {
        let longest = format!(
            "{}.{}.{}.{}",
            "a".repeat(63),
            "b".repeat(63),
            "c".repeat(63),
            "d".repeat(61)
        );
        assert_eq!(longest.len(), 253);
        for good in [
            "a",
            "worker-2",
            "ip-10-0-0-1.eu-west-1.compute.internal",
            "operon.dev",
            "1.2.3",
            &longest,
            // One segment longer than a DNS label: a ConfigMap may be named so.
            &"a".repeat(64),
            &"a".repeat(253),
        ] {
            assert!(is_dns_subdomain(good), "{good:?}");
        }
        for bad in [
            "",
            "a..b",
            ".a",
            "a.",
            ".",
            "-a",
            "a-",
            "a.-b",
            "a-.b",
            "a_b",
            "A",
            "Example.com",
            "a/b",
            &format!("{longest}a"),
            &"a".repeat(254),
            &"a.".repeat(127),
        ] {
            assert!(!is_dns_subdomain(bad), "{bad:?}");
        }
    }

    #[test]
    fn a_qualified_name_is_a_name_part_with_an_optional_subdomain_prefix() {
        for good in [
            "app",
            "App_1.x",
            "operon.dev/phase",
            "node-role.kubernetes.io/worker",
            "kubernetes.io/metadata.name",
            &"n".repeat(63),
            &format!("{}/{}", "p".repeat(253), "n".repeat(63)),
        ] {
            assert!(is_qualified_name(good), "{good:?}");
            assert_eq!(label_key(good), Ok(()), "{good:?}");
        }
        for bad in [
            "",
            "/phase",
            "operon.dev/",
            "a/b/c",
            "Operon.dev/phase",
            "a..b/phase",
            "-app",
            "app-",
            "a b",
            "operon.dev/-x",
            &"n".repeat(64),
            &format!("{}/n", "p".repeat(254)),
            &format!("p/{}", "n".repeat(64)),
        ] {
            assert!(!is_qualified_name(bad), "{bad:?}");
            assert!(label_key(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn label_key_errors_say_which_part_is_wrong() {
        let prefix = label_key("Bad_Prefix/x").unwrap_err();
        assert_eq!(
            prefix.to_string(),
            "label key \"Bad_Prefix/x\": the prefix must be a lowercase DNS subdomain"
        );
        assert!(matches!(
            label_key("/x"),
            Err(NameError::LabelKeyPrefix { .. })
        ));
        assert!(matches!(
            label_key("a/b/c"),
            Err(NameError::LabelKeyPrefix { .. })
        ));
        let name = label_key("example.com/-x").unwrap_err();
        assert_eq!(
            name.to_string(),
            "label key \"example.com/-x\": the name must be at most 63 letters, digits, '-', \
             '_' or '.', starting and ending with a letter or digit"
        );
        assert!(matches!(
            label_key("example.com/"),
            Err(NameError::LabelKeyName { .. })
        ));
    }

    #[test]
    fn a_label_value_is_empty_or_a_label_name() {
        for good in ["", "a", "Is_OK.1", "v-1", &"v".repeat(63)] {
            assert_eq!(label_value(good), Ok(()), "{good:?}");
        }
        for bad in ["no spaces", "-a", "a-", "_a", "a.", "a/b", &"v".repeat(64)] {
            assert_eq!(
                label_value(bad),
                Err(NameError::LabelValue {
                    value: bad.to_owned()
                }),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn an_annotation_key_is_a_qualified_name_in_any_case() {
        for good in ["note", "Example.COM/Note", "operon.dev/seen-version"] {
            assert_eq!(annotation_key(good), Ok(()), "{good:?}");
        }
        assert!(matches!(
            annotation_key("a..b/note"),
            Err(NameError::AnnotationKeyPrefix { .. })
        ));
        assert!(matches!(
            annotation_key("example.com/a b"),
            Err(NameError::AnnotationKeyName { .. })
        ));
        assert!(annotation_key("").is_err());
    }

    #[test]
    fn an_api_version_is_a_version_or_group_slash_version() {
        for good in ["v1", "apps/v1", "operon.dev/v1alpha1", "a/b"] {
            assert!(is_api_version(good), "{good:?}");
        }
        for bad in [
            "", "/v1", "apps/", "Apps/v1", "apps/V1", "a..b/v1", "a/b/c", "v1.2",
        ] {
            assert!(!is_api_version(bad), "{bad:?}");
        }
    }

    #[test]
    fn a_fully_qualified_name_has_three_segments() {
        assert!(is_fully_qualified_name("pods.operon.dev"));
        for bad in ["operon.dev", "a..b.c", "Pods.operon.dev", ""] {
            assert!(!is_fully_qualified_name(bad), "{bad:?}");
        }
    }
}
