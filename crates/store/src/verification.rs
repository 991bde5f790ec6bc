//! Which signatures an `oci://` module must carry before it runs: a verification
//! configuration ([`VerificationConfig`], Kubewarden's format with a trust root given
//! as files) checked against the cosign signatures of the module's manifest
//! ([`super::cosign`]), with a [`Report`] saying which requirement each signature met
//! and why the others did not.
//!
//! A signature counts only for the manifest its payload names, with a signature over
//! the payload's exact bytes by a requirement's key (`pubKey`), or by the key of a
//! certificate that chains to the trust root and names the requirement's issuer and
//! subject (`genericIssuer`, see `keyless`); a requirement's `annotations` must be in
//! the payload. Every `allOf` requirement and `anyOf.minimumMatches` of the `anyOf`
//! ones must be met.
//!
//! Built on ring, rustls-webpki and x509-parser, which the engine's TLS stack already
//! compiles, rather than the `sigstore` crate: sigstore 0.15 ignores a certificate
//! without a Rekor bundle and reaches Fulcio, Rekor and a TUF repository for its trust
//! root (none of which an air-gapped cluster has), and it brings openssl or aws-lc-rs,
//! reqwest 0.13 and an OpenID client into a process that otherwise uses ring alone.

mod config;
mod keyless;
#[cfg(test)]
mod tests;

pub use config::{ConfigError, VerificationConfig};

use super::cosign::{Payload, Signature};
use base64::Engine as _;
use config::{Kind, Requirement, Subject};

/// What checking a manifest's signatures found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The manifest whose signatures were checked.
    pub manifest_digest: String,
    /// Its signatures, by their layers' digests, in the signature manifest's order
    /// (signatures of one payload share a digest: reports name them by number too).
    pub signatures: Vec<String>,
    /// Each requirement, `allOf` first, in the file's order.
    pub requirements: Vec<RequirementReport>,
    /// How many `anyOf` requirements must be met (0 when there is no `anyOf`).
    pub minimum_matches: usize,
}

/// One requirement's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequirementReport {
    /// The requirement: where it is in the file, its kind and owner.
    pub requirement: String,
    /// Whether it is one of `anyOf`.
    pub any_of: bool,
    /// The signatures that meet it (indexes into [`Report::signatures`]).
    pub met_by: Vec<usize>,
    /// The others, each with why it does not.
    pub not_met: Vec<(usize, String)>,
}

impl Report {
    /// Whether the signatures meet the configuration.
    pub fn verified(&self) -> bool {
        let all = self
            .requirements
            .iter()
            .filter(|r| !r.any_of)
            .all(|r| !r.met_by.is_empty());
        all && self.any_of_met() >= self.minimum_matches
    }

    /// How reports name signature `index`: `signature 2 (sha256:0123456789ab)`.
    pub fn signature_name(&self, index: usize) -> String {
        let digest = self.signatures.get(index).map_or("", |d| short(d));
        format!("signature {} ({digest})", index + 1)
    }

    fn any_of_met(&self) -> usize {
        self.requirements
            .iter()
            .filter(|r| r.any_of && !r.met_by.is_empty())
            .count()
    }
}

/// The reason of a refusal, for a condition's message: what is missing, and why each
/// signature falls short.
impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.signatures.is_empty() {
            return write!(
                f,
                "manifest {} has no signature (no cosign signature under its sha256-….sig tag)",
                self.manifest_digest
            );
        }
        let mut unmet = Vec::new();
        for r in self.requirements.iter().filter(|r| r.met_by.is_empty()) {
            if r.any_of && self.any_of_met() >= self.minimum_matches {
                continue;
            }
            let why: Vec<String> = r
                .not_met
                .iter()
                .map(|(signature, why)| format!("{}: {why}", self.signature_name(*signature)))
                .collect();
            unmet.push(format!("{} is not met ({})", r.requirement, why.join("; ")));
        }
        let any_of = self.requirements.iter().filter(|r| r.any_of).count();
        let short_of_any = any_of > 0 && self.any_of_met() < self.minimum_matches;
        let count = self.signatures.len();
        write!(
            f,
            "manifest {} ({count} signature{}): ",
            self.manifest_digest,
            if count == 1 { "" } else { "s" }
        )?;
        if short_of_any {
            write!(
                f,
                "{} of anyOf's {any_of} met, {} needed; ",
                self.any_of_met(),
                self.minimum_matches
            )?;
        }
        write!(f, "{}", unmet.join("; "))
    }
}

/// A digest shortened for messages: `sha256:0123456789ab`.
fn short(digest: &str) -> &str {
    digest.get(..19).unwrap_or(digest)
}

impl VerificationConfig {
    /// Checks `signatures` of the manifest `manifest_digest` against this
    /// configuration; `now` dates keyless signatures that carry no verified timestamp.
    pub fn verify(
        &self,
        manifest_digest: &str,
        signatures: &[Signature],
        now: jiff::Timestamp,
    ) -> Report {
        let checked: Vec<Checked> = signatures
            .iter()
            .map(|signature| self.check(manifest_digest, signature, now))
            .collect();
        let mut requirements = Vec::new();
        for (requirement, any_of) in
            (self.all_of.iter().map(|r| (r, false))).chain(self.any_of.iter().map(|r| (r, true)))
        {
            let mut report = RequirementReport {
                requirement: requirement.describe(),
                any_of,
                met_by: Vec::new(),
                not_met: Vec::new(),
            };
            for (index, (signature, checked)) in signatures.iter().zip(&checked).enumerate() {
                match meets(requirement, signature, checked) {
                    Ok(()) => report.met_by.push(index),
                    Err(why) => report.not_met.push((index, why)),
                }
            }
            requirements.push(report);
        }
        Report {
            manifest_digest: manifest_digest.to_owned(),
            signatures: signatures.iter().map(|s| s.layer_digest.clone()).collect(),
            requirements,
            minimum_matches: self.minimum_matches,
        }
    }

    /// What every requirement needs of `signature`, checked once.
    fn check(&self, manifest_digest: &str, signature: &Signature, now: jiff::Timestamp) -> Checked {
        let common = (|| {
            if let Some(problem) = &signature.problem {
                return Err(problem.clone());
            }
            let encoded = signature
                .signature()
                .ok_or("its layer has no dev.cosignproject.cosign/signature annotation")?;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(encoded.trim())
                .map_err(|e| format!("its signature is not base64: {e}"))?;
            let payload = Payload::parse(&signature.payload)?;
            let signed = &payload.critical.image.docker_manifest_digest;
            if signed != manifest_digest {
                return Err(format!("it signs manifest {signed}, not this one"));
            }
            Ok((payload, bytes))
        })();
        let keyless = match (&common, signature.certificate()) {
            (Ok(_), Some(_)) if !self.trust_root.anchors.is_empty() => {
                Some(keyless::certify(signature, &self.trust_root, now))
            }
            _ => None,
        };
        Checked { common, keyless }
    }
}

/// A signature's checks that do not depend on the requirement.
struct Checked {
    /// Its payload and signature bytes, when it signs this manifest.
    common: Result<(Payload, Vec<u8>), String>,
    /// Its certificate, checked to the trust root (when it has one and there is a root).
    keyless: Option<Result<keyless::Certified, String>>,
}

/// Whether `signature` meets `requirement`, or why not.
fn meets(
    requirement: &Requirement,
    signature: &Signature,
    checked: &Checked,
) -> Result<(), String> {
    let (payload, bytes) = checked.common.as_ref().map_err(Clone::clone)?;
    match &requirement.kind {
        Kind::PubKey(key) => {
            if !key.verify(&signature.payload, bytes) {
                return Err("it is not signed with this key".to_owned());
            }
        }
        Kind::GenericIssuer { issuer, subject } => {
            let certified = match &checked.keyless {
                Some(certified) => certified.as_ref().map_err(Clone::clone)?,
                None => {
                    return Err("it has no certificate (it is not a keyless signature)".to_owned());
                }
            };
            if !certified.key.verify(&signature.payload, bytes) {
                return Err("it is not signed with its certificate's key".to_owned());
            }
            match &certified.issuer {
                Some(named) if named == issuer => {}
                Some(named) => return Err(format!("its certificate's issuer is {named}")),
                None => {
                    return Err(
                        "its certificate names no OIDC issuer (extension 1.3.6.1.4.1.57264.1.8 or .1.1)"
                            .to_owned(),
                    );
                }
            }
            let matches = |identity: &String| match subject {
                Subject::Equal(wanted) => identity == wanted,
                Subject::UrlPrefix(prefix) => identity.starts_with(prefix.as_str()),
            };
            if !certified.identities.iter().any(matches) {
                return Err(format!(
                    "its certificate is for {}",
                    match certified.identities.is_empty() {
                        true => "no e-mail or URI identity".to_owned(),
                        false => certified.identities.join(", "),
                    }
                ));
            }
        }
    }
    if !payload.has_annotations(&requirement.annotations) {
        let wanted: Vec<String> = (requirement.annotations.iter())
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        return Err(format!(
            "its payload lacks the annotations {}",
            wanted.join(", ")
        ));
    }
    Ok(())
}
