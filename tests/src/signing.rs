//! A throwaway Fulcio-like PKI for the tests of signed modules: a root CA and an
//! intermediate, code-signing certificates for an e-mail or URI identity with Fulcio's
//! OIDC issuer extension, and a transparency-log key that signs Rekor bundles for them,
//! as the Sigstore services would (none of which a test can reach).

use base64::Engine as _;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, CustomExtension, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, PublicKeyData as _, SanType,
    SigningKey as _,
};
use sha2::{Digest as _, Sha256};

/// Fulcio's OIDC issuer extension (a DER UTF8String).
const ISSUER_V2: &[u64] = &[1, 3, 6, 1, 4, 1, 57264, 1, 8];
/// Its first form (the issuer's bytes as they are).
const ISSUER_V1: &[u64] = &[1, 3, 6, 1, 4, 1, 57264, 1, 1];

/// The CAs and the log.
pub struct SigningPki {
    root: CertifiedIssuer<'static, KeyPair>,
    intermediate: CertifiedIssuer<'static, KeyPair>,
    log: KeyPair,
}

/// A day: year, month, day of the month.
pub type Day = (i32, u8, u8);

/// What a leaf certificate says.
#[derive(Debug, Clone)]
pub struct LeafSpec {
    /// An e-mail (when it has an `@` and no `://`) or a URI.
    pub identity: String,
    /// The OIDC issuer, in the extension of `legacy_issuer`'s form; none when `None`.
    pub issuer: Option<String>,
    /// Write the issuer in its first form (1.3.6.1.4.1.57264.1.1).
    pub legacy_issuer: bool,
    /// Valid from and to; for ever when `None`.
    pub validity: Option<(Day, Day)>,
    /// Leave out the code-signing extended key usage.
    pub no_code_signing: bool,
}

impl LeafSpec {
    /// A certificate for `identity` from `issuer`, valid for ever.
    pub fn new(identity: &str, issuer: &str) -> Self {
        Self {
            identity: identity.to_owned(),
            issuer: Some(issuer.to_owned()),
            legacy_issuer: false,
            validity: None,
            no_code_signing: false,
        }
    }
}

/// An issued certificate with its key.
#[derive(Debug, Clone)]
pub struct Leaf {
    /// The private key (PKCS#8 PEM).
    pub key_pem: String,
    /// The certificate (PEM).
    pub cert_pem: String,
    /// The intermediate that issued it (PEM), as cosign's chain annotation holds it.
    pub chain_pem: String,
}

impl Default for SigningPki {
    fn default() -> Self {
        Self::new()
    }
}

fn ca(name: &str) -> CertificateParams {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params.distinguished_name.push(DnType::CommonName, name);
    params
}

impl SigningPki {
    /// A fresh root, intermediate and log key.
    ///
    /// # Panics
    ///
    /// If a key cannot be made.
    pub fn new() -> Self {
        let root = CertifiedIssuer::self_signed(
            ca("operon test signing root"),
            KeyPair::generate().unwrap(),
        )
        .unwrap();
        let intermediate = CertifiedIssuer::signed_by(
            ca("operon test signing intermediate"),
            KeyPair::generate().unwrap(),
            &root,
        )
        .unwrap();
        Self {
            root,
            intermediate,
            log: KeyPair::generate().unwrap(),
        }
    }

    /// The root certificate (PEM): the trust root's certificate authority.
    pub fn root_pem(&self) -> String {
        self.root.pem()
    }

    /// The intermediate certificate (PEM).
    pub fn intermediate_pem(&self) -> String {
        self.intermediate.pem()
    }

    /// The log's public key (PEM): the trust root's transparency-log key.
    pub fn log_key_pem(&self) -> String {
        self.log.public_key_pem()
    }

    /// A key and a certificate as `spec` says, issued by the intermediate.
    ///
    /// # Panics
    ///
    /// If the certificate cannot be made.
    pub fn issue(&self, spec: &LeafSpec) -> Leaf {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        let name = spec.identity.clone().try_into().unwrap();
        params.subject_alt_names = vec![match spec.identity.contains('@')
            && !spec.identity.contains("://")
        {
            true => SanType::Rfc822Name(name),
            false => SanType::URI(name),
        }];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        if !spec.no_code_signing {
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::CodeSigning];
        }
        if let Some(((y1, m1, d1), (y2, m2, d2))) = spec.validity {
            params.not_before = rcgen::date_time_ymd(y1, m1, d1);
            params.not_after = rcgen::date_time_ymd(y2, m2, d2);
        }
        if let Some(issuer) = &spec.issuer {
            params.custom_extensions.push(match spec.legacy_issuer {
                true => CustomExtension::from_oid_content(ISSUER_V1, issuer.as_bytes().to_vec()),
                false => CustomExtension::from_oid_content(ISSUER_V2, utf8_string(issuer)),
            });
        }
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.intermediate).unwrap();
        Leaf {
            key_pem: key.serialize_pem(),
            cert_pem: cert.pem(),
            chain_pem: format!("{}{}", self.intermediate.pem(), self.root.pem()),
        }
    }

    /// A Rekor bundle (cosign's `dev.sigstore.cosign/bundle` annotation) recording a
    /// hashedrekord entry of `signature` (base64) over `payload` by `cert_pem`, logged
    /// at `integrated_time` (Unix seconds) and signed by the log's key.
    ///
    /// # Panics
    ///
    /// If the log cannot sign.
    pub fn bundle(
        &self,
        payload: &[u8],
        signature: &str,
        cert_pem: &str,
        integrated_time: i64,
    ) -> String {
        let b64 = base64::engine::general_purpose::STANDARD;
        let body = serde_json::json!({
            "apiVersion": "0.0.1",
            "kind": "hashedrekord",
            "spec": {
                "data": {"hash": {"algorithm": "sha256",
                                  "value": hex(&Sha256::digest(payload))}},
                "signature": {"content": signature,
                              "publicKey": {"content": b64.encode(cert_pem)}},
            },
        });
        let log_id = hex(&Sha256::digest(self.log.subject_public_key_info()));
        // The log signs the payload's canonical JSON (RFC 8785): keys sorted, no spaces.
        let canonical = format!(
            r#"{{"body":"{}","integratedTime":{integrated_time},"logID":"{log_id}","logIndex":7}}"#,
            b64.encode(body.to_string())
        );
        let set = self.log.sign(canonical.as_bytes()).unwrap();
        serde_json::json!({
            "SignedEntryTimestamp": b64.encode(set),
            "Payload": {
                "body": b64.encode(body.to_string()),
                "integratedTime": integrated_time,
                "logIndex": 7,
                "logID": log_id,
            },
        })
        .to_string()
    }
}

/// The DER UTF8String of a short `text`.
fn utf8_string(text: &str) -> Vec<u8> {
    let length = u8::try_from(text.len()).ok().filter(|l| *l < 0x80).unwrap();
    let mut der = vec![0x0c, length];
    der.extend_from_slice(text.as_bytes());
    der
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
