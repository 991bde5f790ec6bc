//! Kubernetes' rules for names and labels, in one place: DNS-1123 labels and
//! subdomains (namespace and object names), label names, keys and values, and
//! qualified names, as the API server checks them. Each check returns whether the text
//! follows the rule; the label checks also say why not, for an error that names the
//! field.

/// An RFC 1123 label: at most 63 lowercase letters, digits and '-', starting and ending
/// with a letter or digit (a namespace's name).
pub fn is_dns_label(text: &str) -> bool {
    is_segment(text, |b| {
        b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'
    })
}

/// 1 to 63 bytes that `inner` allows, starting and ending with a letter or digit: the
/// shape of DNS labels and label names alike.
fn is_segment(text: &str, inner: fn(u8) -> bool) -> bool {
    let bytes = text.as_bytes();
    (1..=63).contains(&bytes.len())
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes.iter().all(|b| inner(*b))
}

/// An RFC 1123 subdomain: dot-separated labels, at most 253 characters (most objects'
/// names, a Node's among them).
pub fn is_dns_subdomain(text: &str) -> bool {
    text.len() <= 253 && text.split('.').all(is_dns_label)
}

/// A label name (a label key's name part, and a non-empty label value): at most 63
/// letters, digits, '-', '_' or '.', starting and ending with a letter or digit.
pub fn is_label_name(text: &str) -> bool {
    is_segment(text, |b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

/// A qualified name: `name`, or `prefix/name` with a DNS subdomain prefix.
pub fn is_qualified_name(text: &str) -> bool {
    match text.split_once('/') {
        Some((prefix, name)) => is_dns_subdomain(prefix) && is_label_name(name),
        None => is_label_name(text),
    }
}

/// A label key (a qualified name), or why it is not one.
pub fn label_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if prefix.is_some_and(|prefix| !is_dns_subdomain(prefix)) {
        return Err(format!(
            "label key {key:?}: the prefix must be a lowercase DNS subdomain"
        ));
    }
    if !is_label_name(name) {
        return Err(format!(
            "label key {key:?}: the name must be at most 63 letters, digits, '-', '_' or \
             '.', starting and ending with a letter or digit"
        ));
    }
    Ok(())
}

/// A label value (empty, or a label name), or why it is not one.
pub fn label_value(value: &str) -> Result<(), String> {
    if value.is_empty() || is_label_name(value) {
        Ok(())
    } else {
        Err(format!(
            "label value {value:?}: at most 63 letters, digits, '-', '_' or '.', starting \
             and ending with a letter or digit"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_names_follow_rfc_1123() {
        assert!(is_dns_label("worker-2"));
        for bad in ["", "-a", "a-", "A", "a.b", &"a".repeat(64)] {
            assert!(!is_dns_label(bad), "{bad:?}");
        }
        assert!(is_dns_subdomain("ip-10-0-0-1.eu-west-1.compute.internal"));
        assert!(is_dns_subdomain(&format!(
            "{}.{}",
            "a".repeat(63),
            "b".repeat(63)
        )));
        for bad in ["", "a..b", ".a", "a.", "a_b", &"a.".repeat(127)] {
            assert!(!is_dns_subdomain(bad), "{bad:?}");
        }
    }

    #[test]
    fn label_keys_values_and_qualified_names() {
        assert!(label_key("node-role.kubernetes.io/worker").is_ok());
        assert!(label_key("app").is_ok());
        let prefix = label_key("Bad_Prefix/x").unwrap_err();
        assert!(
            prefix.contains("the prefix must be a lowercase DNS subdomain"),
            "{prefix}"
        );
        let name = label_key("example.com/-x").unwrap_err();
        assert!(name.contains("the name must be at most 63"), "{name}");
        assert!(label_key("example.com/").is_err());
        assert!(label_key("Example.com/name").is_err());
        assert!(label_key("-app").is_err());
        assert!(label_key(&"a".repeat(64)).is_err());
        assert!(label_value("").is_ok());
        assert!(label_value("Is_OK.1").is_ok());
        assert!(label_value("no spaces").is_err());
        assert!(label_value(&"v".repeat(64)).is_err());
        assert!(is_qualified_name("operon.dev/phase"));
        assert!(!is_qualified_name("/phase"));
        assert!(!is_qualified_name("a/b/c"));
    }
}
