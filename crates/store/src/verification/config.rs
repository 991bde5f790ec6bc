//! The verification configuration file: Kubewarden's format (`apiVersion: v1`, `allOf`
//! and `anyOf` of `pubKey` and `genericIssuer` requirements with `annotations`) plus a
//! `trustRoot` naming the files keyless certificates and transparency-log timestamps
//! are checked against, read and checked whole before anything is verified with it.

use super::super::keys::PublicKey;
use rustls::pki_types::CertificateDer;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Why a verification configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file cannot be read.
    #[error("{}: cannot read it", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A field is missing or wrong.
    #[error("{}: {}{reason}", path.display(), at(field))]
    Invalid {
        /// The configuration file.
        path: PathBuf,
        /// The field (`anyOf.signatures[1].subject`), empty for the whole file.
        field: String,
        /// What is wrong.
        reason: String,
    },
}

fn at(field: &str) -> String {
    match field.is_empty() {
        true => String::new(),
        false => format!("{field}: "),
    }
}

/// A verification configuration, read and checked.
#[derive(Debug, Clone)]
pub struct VerificationConfig {
    /// Requirements every one of which a signature must meet.
    pub(super) all_of: Vec<Requirement>,
    /// Requirements at least `minimum_matches` of which signatures must meet.
    pub(super) any_of: Vec<Requirement>,
    /// How many of `any_of` (0 when there is none).
    pub(super) minimum_matches: usize,
    /// What keyless certificates and bundle timestamps are checked against.
    pub(super) trust_root: TrustRoot,
    /// The file it was read from, for messages.
    pub(super) path: PathBuf,
}

/// One requirement.
#[derive(Debug, Clone)]
pub(super) struct Requirement {
    /// Where it is in the file (`allOf[0]`), naming it in reports.
    pub(super) field: String,
    /// The owner given, for reports.
    pub(super) owner: Option<String>,
    /// What kind of signature meets it.
    pub(super) kind: Kind,
    /// Annotations the signature's payload must carry with these values.
    pub(super) annotations: BTreeMap<String, String>,
}

/// The kinds of requirement.
#[derive(Debug, Clone)]
pub(super) enum Kind {
    /// Signed with this key.
    PubKey(PublicKey),
    /// Signed keyless: a certificate to the trust root, for this issuer and subject.
    GenericIssuer {
        /// The OIDC issuer the certificate must name.
        issuer: String,
        /// Who it must name.
        subject: Subject,
    },
}

/// How a certificate's identity (its e-mail or URI name) is matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Subject {
    /// Exactly this.
    Equal(String),
    /// Starting with this, which ends with `/` (added when the file's does not, so
    /// that `https://github.com/acme` does not admit `https://github.com/acme-evil`).
    UrlPrefix(String),
}

/// The trust root of keyless signatures.
#[derive(Debug, Clone, Default)]
pub(super) struct TrustRoot {
    /// Self-signed certificate authorities: where a certificate's path must end.
    pub(super) anchors: Vec<rustls::pki_types::TrustAnchor<'static>>,
    /// The other certificates of the file: intermediates a path may use.
    pub(super) intermediates: Vec<CertificateDer<'static>>,
    /// Transparency-log (Rekor) keys: a bundle signed by one of them dates a signature.
    pub(super) log_keys: Vec<LogKey>,
}

/// A transparency log's key and the log ID it stands for.
#[derive(Debug, Clone)]
pub(super) struct LogKey {
    /// `hex(sha256(SubjectPublicKeyInfo))`: how a bundle names its log.
    pub(super) log_id: String,
    /// The key.
    pub(super) key: PublicKey,
}

impl Requirement {
    /// How reports name it: `allOf[0] (pubKey, owner alice)`.
    pub(super) fn describe(&self) -> String {
        let kind = match &self.kind {
            Kind::PubKey(key) => format!("pubKey {}", key.describe()),
            Kind::GenericIssuer { issuer, subject } => match subject {
                Subject::Equal(s) => format!("genericIssuer {issuer}, subject {s}"),
                Subject::UrlPrefix(p) => format!("genericIssuer {issuer}, subject {p}…"),
            },
        };
        match &self.owner {
            Some(owner) => format!("{} ({kind}, owner {owner})", self.field),
            None => format!("{} ({kind})", self.field),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawConfig {
    api_version: Option<String>,
    #[serde(default)]
    all_of: Vec<RawRequirement>,
    any_of: Option<RawAnyOf>,
    trust_root: Option<RawTrustRoot>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawAnyOf {
    minimum_matches: Option<usize>,
    #[serde(default)]
    signatures: Vec<RawRequirement>,
}

/// Every field any kind takes: which ones a kind needs and refuses is checked after,
/// so that the message names the kind.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawRequirement {
    kind: String,
    owner: Option<String>,
    key: Option<String>,
    issuer: Option<String>,
    subject: Option<RawSubject>,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawSubject {
    equal: Option<String>,
    url_prefix: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawTrustRoot {
    certificate_authorities: Option<PathBuf>,
    transparency_log_keys: Option<PathBuf>,
}

impl VerificationConfig {
    /// Reads and checks the configuration in `path`; the trust root's files are
    /// relative to its directory.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Checks the configuration `text`, read from `path`.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let invalid = |field: &str, reason: String| ConfigError::Invalid {
            path: path.to_owned(),
            field: field.to_owned(),
            reason,
        };
        let deserializer = yaml_serde::Deserializer::from_str(text);
        let raw: RawConfig = serde_path_to_error::deserialize(deserializer).map_err(|e| {
            let field = e.path().to_string();
            let field = if field == "." { String::new() } else { field };
            invalid(&field, e.into_inner().to_string())
        })?;
        match raw.api_version.as_deref() {
            Some("v1") => {}
            Some(other) => {
                return Err(invalid(
                    "apiVersion",
                    format!("{other:?} is not a version this engine reads (v1)"),
                ));
            }
            None => return Err(invalid("apiVersion", "missing (apiVersion: v1)".to_owned())),
        }
        let dir = path.parent().unwrap_or(Path::new("."));
        let trust_root = match &raw.trust_root {
            Some(root) => read_trust_root(root, dir).map_err(|(f, r)| invalid(&f, r))?,
            None => TrustRoot::default(),
        };
        let mut all_of = Vec::new();
        for (i, raw) in raw.all_of.into_iter().enumerate() {
            let field = format!("allOf[{i}]");
            all_of.push(requirement(raw, field, &trust_root).map_err(|(f, r)| invalid(&f, r))?);
        }
        let (mut any_of, mut minimum_matches) = (Vec::new(), 0);
        if let Some(raw_any) = raw.any_of {
            for (i, raw) in raw_any.signatures.into_iter().enumerate() {
                let field = format!("anyOf.signatures[{i}]");
                any_of.push(requirement(raw, field, &trust_root).map_err(|(f, r)| invalid(&f, r))?);
            }
            minimum_matches = raw_any.minimum_matches.unwrap_or(1);
            if minimum_matches == 0 || minimum_matches > any_of.len() {
                return Err(invalid(
                    "anyOf.minimumMatches",
                    format!(
                        "{minimum_matches}: must be from 1 to the {} signatures listed",
                        any_of.len()
                    ),
                ));
            }
        }
        if all_of.is_empty() && any_of.is_empty() {
            return Err(invalid(
                "",
                "neither allOf nor anyOf names a signature: every module would pass".to_owned(),
            ));
        }
        Ok(Self {
            all_of,
            any_of,
            minimum_matches,
            trust_root,
            path: path.to_owned(),
        })
    }

    /// The file it was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn requirement(
    raw: RawRequirement,
    field: String,
    trust_root: &TrustRoot,
) -> Result<Requirement, (String, String)> {
    let at = |sub: &str| format!("{field}.{sub}");
    let refuse = |present: bool, sub: &str, kind: &str| match present {
        true => Err((at(sub), format!("a {kind} requirement takes no {sub}"))),
        false => Ok(()),
    };
    let kind = match raw.kind.as_str() {
        "pubKey" => {
            refuse(raw.issuer.is_some(), "issuer", "pubKey")?;
            refuse(raw.subject.is_some(), "subject", "pubKey")?;
            let key = raw
                .key
                .ok_or_else(|| (at("key"), "missing: the PEM public key".to_owned()))?;
            Kind::PubKey(PublicKey::from_pem(&key).map_err(|e| (at("key"), e.to_string()))?)
        }
        "genericIssuer" => {
            refuse(raw.key.is_some(), "key", "genericIssuer")?;
            let issuer = raw
                .issuer
                .filter(|i| !i.is_empty())
                .ok_or_else(|| (at("issuer"), "missing: the OIDC issuer's URL".to_owned()))?;
            let subject = match raw.subject {
                Some(RawSubject {
                    equal: Some(equal),
                    url_prefix: None,
                }) if !equal.is_empty() => Subject::Equal(equal),
                Some(RawSubject {
                    equal: None,
                    url_prefix: Some(prefix),
                }) if !prefix.is_empty() => match prefix.ends_with('/') {
                    true => Subject::UrlPrefix(prefix),
                    false => Subject::UrlPrefix(format!("{prefix}/")),
                },
                _ => {
                    return Err((
                        at("subject"),
                        "give exactly one of equal or urlPrefix, not empty".to_owned(),
                    ));
                }
            };
            if trust_root.anchors.is_empty() {
                return Err((
                    "trustRoot.certificateAuthorities".to_owned(),
                    format!(
                        "{field} is a keyless (genericIssuer) requirement: name the file of the certificate authorities its certificates chain to"
                    ),
                ));
            }
            Kind::GenericIssuer { issuer, subject }
        }
        "githubAction" => {
            return Err((
                at("kind"),
                "githubAction is not supported: write it as genericIssuer with issuer https://token.actions.githubusercontent.com and subject.urlPrefix https://github.com/OWNER/REPOSITORY/".to_owned(),
            ));
        }
        other => {
            return Err((
                at("kind"),
                format!("{other:?} is not a kind of requirement (pubKey, genericIssuer)"),
            ));
        }
    };
    Ok(Requirement {
        field,
        owner: raw.owner,
        kind,
        annotations: raw.annotations,
    })
}

fn read_trust_root(raw: &RawTrustRoot, dir: &Path) -> Result<TrustRoot, (String, String)> {
    let mut root = TrustRoot::default();
    let read = |field: &str, file: &Path| {
        let path = dir.join(file);
        std::fs::read_to_string(&path)
            .map_err(|e| (field.to_owned(), format!("{}: {e}", path.display())))
    };
    if let Some(file) = &raw.certificate_authorities {
        let field = "trustRoot.certificateAuthorities";
        let text = read(field, file)?;
        let bad = |reason: String| (field.to_owned(), format!("{}: {reason}", file.display()));
        let blocks = pem::parse_many(&text).map_err(|e| bad(e.to_string()))?;
        for (i, block) in blocks
            .iter()
            .filter(|b| b.tag() == "CERTIFICATE")
            .enumerate()
        {
            let der = CertificateDer::from(block.contents().to_vec());
            let (_, cert) = x509_parser::parse_x509_certificate(&der)
                .map_err(|e| bad(format!("certificate {}: {e}", i + 1)))?;
            if cert.subject().as_raw() == cert.issuer().as_raw() {
                let anchor = webpki::anchor_from_trusted_cert(&der)
                    .map_err(|e| bad(format!("certificate {}: {e}", i + 1)))?;
                root.anchors.push(anchor.to_owned());
            } else {
                root.intermediates.push(der);
            }
        }
        if root.anchors.is_empty() {
            return Err(bad(
                "holds no self-signed CA certificate to anchor a chain".to_owned()
            ));
        }
    }
    if let Some(file) = &raw.transparency_log_keys {
        let field = "trustRoot.transparencyLogKeys";
        let text = read(field, file)?;
        let bad = |reason: String| (field.to_owned(), format!("{}: {reason}", file.display()));
        let blocks = pem::parse_many(&text).map_err(|e| bad(e.to_string()))?;
        for (i, block) in blocks
            .iter()
            .filter(|b| b.tag() == "PUBLIC KEY")
            .enumerate()
        {
            let key = PublicKey::from_spki(block.contents())
                .map_err(|e| bad(format!("key {}: {e}", i + 1)))?;
            root.log_keys.push(LogKey {
                log_id: super::super::cosign::sha256(key.spki())
                    .trim_start_matches("sha256:")
                    .to_owned(),
                key,
            });
        }
        if root.log_keys.is_empty() {
            return Err(bad("holds no PEM PUBLIC KEY".to_owned()));
        }
    }
    Ok(root)
}
