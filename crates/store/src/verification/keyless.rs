//! Keyless signatures: the certificate a signature carries, checked to the trust root's
//! certificate authorities at the time it was signed, and what it vouches for (the
//! identity in its e-mail or URI name, the OIDC issuer in Fulcio's extension).
//!
//! No transparency log is reached. The time of signing is the `integratedTime` of the
//! signature's Rekor bundle when the bundle's signed entry timestamp verifies with one
//! of the trust root's log keys and the entry is this signature's (its signature, its
//! payload's digest, its certificate); otherwise it is now, so a certificate must then
//! still be valid (what `cosign verify --insecure-ignore-tlog` does). Certificate
//! transparency (the SCTs Fulcio embeds) is not checked.

use super::super::cosign::{self, Signature};
use super::super::keys::PublicKey;
use super::config::TrustRoot;
use base64::Engine as _;
use rustls::pki_types::{CertificateDer, UnixTime};
use serde::{Deserialize, Serialize};
use x509_parser::der_parser::der::parse_der_utf8string;
use x509_parser::extensions::GeneralName;

/// Fulcio's OIDC issuer extension, a DER UTF8String (what Fulcio writes since 2022).
const ISSUER_V2: &str = "1.3.6.1.4.1.57264.1.8";
/// Its first form, the issuer's bytes as they are.
const ISSUER_V1: &str = "1.3.6.1.4.1.57264.1.1";
/// id-kp-codeSigning (1.3.6.1.5.5.7.3.3), the extended key usage a signing certificate has.
const CODE_SIGNING: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x03];

/// A signature's certificate, checked.
#[derive(Debug, Clone)]
pub(super) struct Certified {
    /// The key the payload must be signed with.
    pub(super) key: PublicKey,
    /// Its e-mail and URI names.
    pub(super) identities: Vec<String>,
    /// The OIDC issuer it names, if any.
    pub(super) issuer: Option<String>,
}

/// When a signature was made, as far as can be told.
#[derive(Debug, Clone, Copy)]
enum SigningTime {
    /// The transparency log's time, from a bundle that verified.
    Logged(jiff::Timestamp),
    /// Unknown: the certificate must be valid now.
    Now(jiff::Timestamp),
}

impl SigningTime {
    fn timestamp(self) -> jiff::Timestamp {
        match self {
            Self::Logged(t) | Self::Now(t) => t,
        }
    }
}

/// Checks the certificate of `signature` to `root` at its signing time; what it
/// certifies, or why not.
pub(super) fn certify(
    signature: &Signature,
    root: &TrustRoot,
    now: jiff::Timestamp,
) -> Result<Certified, String> {
    let pem_text = signature
        .certificate()
        .ok_or("it has no certificate (it is not a keyless signature)")?;
    let der =
        first_certificate(pem_text).ok_or("its certificate annotation holds no PEM certificate")?;
    let (_, cert) = x509_parser::parse_x509_certificate(&der)
        .map_err(|e| format!("its certificate does not parse: {e}"))?;
    let time = match (signature.bundle(), root.log_keys.is_empty()) {
        (Some(bundle), false) => SigningTime::Logged(
            logged_time(bundle, signature, &der, root)
                .map_err(|e| format!("its transparency-log bundle does not verify: {e}"))?,
        ),
        _ => SigningTime::Now(now),
    };
    let mut intermediates = root.intermediates.clone();
    if let Some(chain) = signature.chain() {
        // A signature's own chain offers intermediates; trust still ends at the root's.
        intermediates.extend(
            pem::parse_many(chain)
                .unwrap_or_default()
                .into_iter()
                .filter(|b| b.tag() == "CERTIFICATE")
                .map(|b| CertificateDer::from(b.into_contents())),
        );
    }
    let leaf = CertificateDer::from(der.clone());
    let end_entity = webpki::EndEntityCert::try_from(&leaf)
        .map_err(|e| format!("its certificate is not usable: {e}"))?;
    let seconds = u64::try_from(time.timestamp().as_second()).unwrap_or(0);
    end_entity
        .verify_for_usage(
            webpki::ALL_VERIFICATION_ALGS,
            &root.anchors,
            &intermediates,
            UnixTime::since_unix_epoch(std::time::Duration::from_secs(seconds)),
            // An issuer without extended key usages may issue for any (as Go, and so
            // cosign, has it); the signing certificate itself must say code signing.
            webpki::KeyUsage::required_if_present(CODE_SIGNING),
            None,
            None,
        )
        .map_err(|e| chain_error(e, time))?;
    let code_signing = matches!(cert.extended_key_usage(), Ok(Some(eku)) if eku.value.code_signing);
    if !code_signing {
        return Err("its certificate is not for code signing (extended key usage)".to_owned());
    }
    let key = PublicKey::from_spki(cert.public_key().raw)
        .map_err(|e| format!("its certificate's key: {e}"))?;
    let mut identities = Vec::new();
    if let Ok(Some(names)) = cert.subject_alternative_name() {
        for name in &names.value.general_names {
            match name {
                GeneralName::RFC822Name(email) => identities.push((*email).to_owned()),
                GeneralName::URI(uri) => identities.push((*uri).to_owned()),
                _ => {}
            }
        }
    }
    let extension = |oid: &str| {
        cert.extensions()
            .iter()
            .find(|e| e.oid.to_id_string() == oid)
            .map(|e| e.value)
    };
    let issuer = match (extension(ISSUER_V2), extension(ISSUER_V1)) {
        (Some(value), _) => parse_der_utf8string(value)
            .ok()
            .and_then(|(_, s)| s.as_str().ok().map(str::to_owned)),
        (None, Some(value)) => std::str::from_utf8(value).ok().map(str::to_owned),
        (None, None) => None,
    };
    Ok(Certified {
        key,
        identities,
        issuer,
    })
}

fn first_certificate(text: &str) -> Option<Vec<u8>> {
    pem::parse_many(text)
        .ok()?
        .into_iter()
        .find(|b| b.tag() == "CERTIFICATE")
        .map(pem::Pem::into_contents)
}

fn chain_error(error: webpki::Error, time: SigningTime) -> String {
    let when = |t: UnixTime| {
        i64::try_from(t.as_secs())
            .ok()
            .and_then(|s| jiff::Timestamp::from_second(s).ok())
            .map_or_else(|| "?".to_owned(), |t| t.to_string())
    };
    let at = match time {
        SigningTime::Logged(t) => {
            format!("when it was signed ({t}, from its transparency-log bundle)")
        }
        SigningTime::Now(t) => format!(
            "now ({t}): without a transparency-log timestamp (a bundle and trustRoot.transparencyLogKeys) a certificate must still be valid"
        ),
    };
    match error {
        webpki::Error::CertExpired { not_after, .. } => {
            format!("its certificate (or an issuer's) expired at {} and was checked {at}", when(not_after))
        }
        webpki::Error::CertNotValidYet { not_before, .. } => format!(
            "its certificate (or an issuer's) is valid only from {}, checked {at}",
            when(not_before)
        ),
        // A CA of the same name that did not sign it is no better than none.
        webpki::Error::UnknownIssuer | webpki::Error::InvalidSignatureForPublicKey => {
            "its certificate does not chain to a certificate authority of trustRoot.certificateAuthorities".to_owned()
        }
        webpki::Error::RequiredEkuNotFoundContext(_) => {
            "a certificate of its chain is not for code signing (extended key usage)".to_owned()
        }
        other => format!("its certificate does not verify to the trust root: {other}"),
    }
}

/// A Rekor bundle as cosign stores it.
#[derive(Deserialize)]
struct Bundle {
    #[serde(rename = "SignedEntryTimestamp")]
    signed_entry_timestamp: String,
    #[serde(rename = "Payload")]
    payload: BundlePayload,
}

/// What the log signed; its fields in the order of their names, which is how the log
/// canonicalises it (RFC 8785) before signing.
#[derive(Serialize, Deserialize)]
struct BundlePayload {
    body: String,
    #[serde(rename = "integratedTime")]
    integrated_time: i64,
    #[serde(rename = "logID")]
    log_id: String,
    #[serde(rename = "logIndex")]
    log_index: i64,
}

/// The time the log recorded `signature`, from its bundle; why not when the bundle
/// is not the log's or not this signature's.
fn logged_time(
    bundle: &str,
    signature: &Signature,
    certificate: &[u8],
    root: &TrustRoot,
) -> Result<jiff::Timestamp, String> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let bundle: Bundle = serde_json::from_str(bundle).map_err(|e| format!("not JSON: {e}"))?;
    let payload = &bundle.payload;
    let log = root
        .log_keys
        .iter()
        .find(|k| k.log_id == payload.log_id)
        .ok_or_else(|| {
            format!(
                "it is from log {}, whose key trustRoot.transparencyLogKeys does not hold",
                payload.log_id
            )
        })?;
    let canonical = serde_json::to_vec(payload).map_err(|e| e.to_string())?;
    let set = b64
        .decode(&bundle.signed_entry_timestamp)
        .map_err(|e| format!("its SignedEntryTimestamp is not base64: {e}"))?;
    if !log.key.verify(&canonical, &set) {
        return Err("its SignedEntryTimestamp is not the log's signature".to_owned());
    }
    let body = b64
        .decode(&payload.body)
        .map_err(|e| format!("its body is not base64: {e}"))?;
    let body: serde_json::Value =
        serde_json::from_slice(&body).map_err(|e| format!("its body is not JSON: {e}"))?;
    let kind = body["kind"].as_str().unwrap_or_default();
    if !matches!(kind, "hashedrekord" | "rekord") {
        return Err(format!(
            "its entry is of kind {kind:?}, not hashedrekord or rekord"
        ));
    }
    let spec = &body["spec"];
    if spec["signature"]["content"].as_str() != signature.signature() {
        return Err("its entry holds another signature".to_owned());
    }
    let digest = cosign::sha256(&signature.payload);
    if spec["data"]["hash"]["algorithm"] != "sha256"
        || spec["data"]["hash"]["value"].as_str() != digest.strip_prefix("sha256:")
    {
        return Err("its entry is for another payload".to_owned());
    }
    let logged_key = spec["signature"]["publicKey"]["content"]
        .as_str()
        .and_then(|k| b64.decode(k).ok())
        .and_then(|pem_bytes| first_certificate(&String::from_utf8_lossy(&pem_bytes)));
    if logged_key.as_deref() != Some(certificate) {
        return Err("its entry holds another certificate".to_owned());
    }
    jiff::Timestamp::from_second(payload.integrated_time)
        .map_err(|e| format!("its integratedTime: {e}"))
}
