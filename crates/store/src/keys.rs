//! The keys of module signatures: public keys (PEM `PUBLIC KEY`, or a certificate's)
//! that check a signature over a payload as cosign makes it, and the private keys
//! `operon module sign` signs with. Verification takes ECDSA P-256 (cosign's default)
//! and P-384 (with SHA-256, cosign's default digest, or SHA-384), Ed25519, and RSA
//! PKCS#1 v1.5 with SHA-256 (2048 to 8192 bits). Signing takes an unencrypted PKCS#8 key
//! (PEM `PRIVATE KEY`) of ECDSA P-256 or Ed25519: signatures `cosign verify --key`
//! accepts with its defaults.

use rcgen::{PublicKeyData as _, SigningKey as _};
use ring::signature::{self as ring_signature, UnparsedPublicKey, VerificationAlgorithm};
use x509_parser::oid_registry::{
    OID_EC_P256, OID_KEY_TYPE_EC_PUBLIC_KEY, OID_NIST_EC_P384, OID_PKCS1_RSAENCRYPTION,
    OID_SIG_ED25519,
};
use x509_parser::prelude::FromDer as _;
use x509_parser::x509::SubjectPublicKeyInfo;

/// Why a key cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The text holds no PEM block of the kind wanted.
    #[error("no PEM {wanted} block: {reason}")]
    NotPem {
        /// The label wanted (`PUBLIC KEY`, `PRIVATE KEY`).
        wanted: &'static str,
        /// What was found instead.
        reason: String,
    },
    /// The key's DER does not parse.
    #[error("not a valid {what}: {reason}")]
    Malformed {
        /// What it should have been.
        what: &'static str,
        /// Why.
        reason: String,
    },
    /// A key of an algorithm or size this engine does not take.
    #[error("{0}")]
    Unsupported(String),
}

/// What a public key is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Algorithm {
    P256,
    P384,
    Ed25519,
    Rsa { bits: usize },
}

/// A public key that checks signatures.
#[derive(Clone, PartialEq, Eq)]
pub struct PublicKey {
    algorithm: Algorithm,
    /// The SubjectPublicKeyInfo, as a certificate or `PUBLIC KEY` PEM holds it.
    spki: Vec<u8>,
    /// The key as ring takes it: an EC point, 32 Ed25519 bytes, or RSAPublicKey.
    raw: Vec<u8>,
}

impl std::fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PublicKey({})", self.describe())
    }
}

impl PublicKey {
    /// The first `PUBLIC KEY` block of `text`.
    pub fn from_pem(text: &str) -> Result<Self, KeyError> {
        let blocks = pem::parse_many(text).map_err(|e| KeyError::NotPem {
            wanted: "PUBLIC KEY",
            reason: e.to_string(),
        })?;
        let block = blocks
            .iter()
            .find(|b| b.tag() == "PUBLIC KEY")
            .ok_or_else(|| KeyError::NotPem {
                wanted: "PUBLIC KEY",
                reason: match blocks.first() {
                    Some(b) => format!("found {} instead", b.tag()),
                    None => "found no PEM block".to_owned(),
                },
            })?;
        Self::from_spki(block.contents())
    }

    /// A DER SubjectPublicKeyInfo.
    pub fn from_spki(der: &[u8]) -> Result<Self, KeyError> {
        let malformed = |reason: String| KeyError::Malformed {
            what: "SubjectPublicKeyInfo",
            reason,
        };
        let (rest, spki) =
            SubjectPublicKeyInfo::from_der(der).map_err(|e| malformed(e.to_string()))?;
        if !rest.is_empty() {
            return Err(malformed("trailing bytes".to_owned()));
        }
        let oid = &spki.algorithm.algorithm;
        let raw = spki.subject_public_key.data.to_vec();
        let algorithm = if *oid == OID_KEY_TYPE_EC_PUBLIC_KEY {
            let curve = spki
                .algorithm
                .parameters
                .as_ref()
                .and_then(|p| p.as_oid().ok());
            match curve {
                Some(curve) if curve == OID_EC_P256 => Algorithm::P256,
                Some(curve) if curve == OID_NIST_EC_P384 => Algorithm::P384,
                Some(curve) => {
                    return Err(KeyError::Unsupported(format!(
                        "an ECDSA key on curve {curve}: only P-256 and P-384 are supported"
                    )));
                }
                None => return Err(malformed("an EC key names no curve".to_owned())),
            }
        } else if *oid == OID_SIG_ED25519 {
            Algorithm::Ed25519
        } else if *oid == OID_PKCS1_RSAENCRYPTION {
            let bits = match spki.parsed() {
                Ok(x509_parser::public_key::PublicKey::RSA(rsa)) => modulus_bits(rsa.modulus),
                _ => return Err(malformed("an RSA key that does not parse".to_owned())),
            };
            if !(2048..=8192).contains(&bits) {
                return Err(KeyError::Unsupported(format!(
                    "an RSA key of {bits} bits: 2048 to 8192 are supported"
                )));
            }
            Algorithm::Rsa { bits }
        } else {
            return Err(KeyError::Unsupported(format!(
                "a key of algorithm {oid}: ECDSA P-256/P-384, Ed25519 and RSA are supported"
            )));
        };
        Ok(Self {
            algorithm,
            spki: der.to_vec(),
            raw,
        })
    }

    /// Whether `signature` (DER for ECDSA, as cosign writes it) is this key's over
    /// `message`.
    pub fn verify(&self, message: &[u8], signature: &[u8]) -> bool {
        let algorithms: &[&dyn VerificationAlgorithm] = match self.algorithm {
            Algorithm::P256 => &[&ring_signature::ECDSA_P256_SHA256_ASN1],
            // cosign digests with SHA-256 whatever the curve unless told otherwise.
            Algorithm::P384 => &[
                &ring_signature::ECDSA_P384_SHA256_ASN1,
                &ring_signature::ECDSA_P384_SHA384_ASN1,
            ],
            Algorithm::Ed25519 => &[&ring_signature::ED25519],
            Algorithm::Rsa { .. } => &[&ring_signature::RSA_PKCS1_2048_8192_SHA256],
        };
        algorithms.iter().any(|algorithm| {
            UnparsedPublicKey::new(*algorithm, &self.raw)
                .verify(message, signature)
                .is_ok()
        })
    }

    /// The key as `PUBLIC KEY` PEM.
    pub fn to_pem(&self) -> String {
        pem::encode(&pem::Pem::new("PUBLIC KEY", self.spki.clone()))
    }

    /// Its DER SubjectPublicKeyInfo.
    pub fn spki(&self) -> &[u8] {
        &self.spki
    }

    /// What it is, for messages: `ECDSA P-256`, `RSA 4096`.
    pub fn describe(&self) -> String {
        match self.algorithm {
            Algorithm::P256 => "ECDSA P-256".to_owned(),
            Algorithm::P384 => "ECDSA P-384".to_owned(),
            Algorithm::Ed25519 => "Ed25519".to_owned(),
            Algorithm::Rsa { bits } => format!("RSA {bits}"),
        }
    }
}

/// The bits of an RSA modulus (a DER integer's bytes, maybe with a leading zero).
fn modulus_bits(modulus: &[u8]) -> usize {
    let significant = match modulus.iter().position(|b| *b != 0) {
        Some(first) => &modulus[first..],
        None => return 0,
    };
    significant.len() * 8 - significant[0].leading_zeros() as usize
}

/// A private key to sign payloads with.
pub struct SigningKey {
    pair: rcgen::KeyPair,
    public: PublicKey,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SigningKey({})", self.public.describe())
    }
}

impl SigningKey {
    /// The `PRIVATE KEY` (unencrypted PKCS#8) of `text`; other kinds of key file are
    /// refused with how to convert them.
    pub fn from_pem(text: &str) -> Result<Self, KeyError> {
        let blocks = pem::parse_many(text).map_err(|e| KeyError::NotPem {
            wanted: "PRIVATE KEY",
            reason: e.to_string(),
        })?;
        let Some(block) = blocks.iter().find(|b| b.tag() == "PRIVATE KEY") else {
            let tag = blocks.first().map(|b| b.tag().to_owned());
            return Err(match tag.as_deref() {
                Some("EC PRIVATE KEY" | "RSA PRIVATE KEY") => KeyError::Unsupported(format!(
                    "{} is not read (SEC1 or PKCS#1): convert it to PKCS#8 with `openssl pkcs8 -topk8 -nocrypt -in KEY -out KEY.p8.pem`",
                    tag.unwrap_or_default()
                )),
                Some("ENCRYPTED PRIVATE KEY") => KeyError::Unsupported(
                    "an encrypted PKCS#8 key: decrypt it with `openssl pkcs8 -in KEY -out PLAIN.pem`"
                        .to_owned(),
                ),
                Some(tag) if tag.starts_with("ENCRYPTED") && tag.contains("PRIVATE KEY") => {
                    KeyError::Unsupported(format!(
                        "a cosign key pair file ({tag}): sign with `cosign sign --key` (the same format; see the book's oci:// modules page), or make a key with `operon module keygen`"
                    ))
                }
                Some(tag) => KeyError::NotPem {
                    wanted: "PRIVATE KEY",
                    reason: format!("found {tag} instead"),
                },
                None => KeyError::NotPem {
                    wanted: "PRIVATE KEY",
                    reason: "found no PEM block".to_owned(),
                },
            });
        };
        let pair = rcgen::KeyPair::try_from(block.contents()).map_err(|e| KeyError::Malformed {
            what: "PKCS#8 private key",
            reason: e.to_string(),
        })?;
        Self::from_pair(pair)
    }

    /// A new ECDSA P-256 key (cosign's kind), and its `PRIVATE KEY` PEM.
    pub fn generate() -> Result<(Self, String), KeyError> {
        let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
            .map_err(|e| KeyError::Unsupported(format!("generating a key: {e}")))?;
        let pem = pair.serialize_pem();
        Ok((Self::from_pair(pair)?, pem))
    }

    fn from_pair(pair: rcgen::KeyPair) -> Result<Self, KeyError> {
        let algorithm = pair.algorithm();
        if algorithm == &rcgen::PKCS_ECDSA_P384_SHA384 {
            // ring signs P-384 only over SHA-384, which `cosign verify` does not try
            // unless told to; a P-256 key is cosign's own default.
            return Err(KeyError::Unsupported(
                "an ECDSA P-384 key: sign with P-256 (cosign's default) or Ed25519".to_owned(),
            ));
        }
        if algorithm != &rcgen::PKCS_ECDSA_P256_SHA256 && algorithm != &rcgen::PKCS_ED25519 {
            return Err(KeyError::Unsupported(
                "an RSA key: RSA signatures are verified, but sign with P-256 (cosign's default) or Ed25519".to_owned(),
            ));
        }
        let public = PublicKey::from_spki(&pair.subject_public_key_info())?;
        Ok(Self { pair, public })
    }

    /// The signature over `message`, as cosign stores it (before base64).
    pub fn sign(&self, message: &[u8]) -> Result<Vec<u8>, KeyError> {
        self.pair
            .sign(message)
            .map_err(|e| KeyError::Unsupported(format!("signing: {e}")))
    }

    /// Its public key.
    pub fn public_key(&self) -> &PublicKey {
        &self.public
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_key_signs_what_its_public_key_verifies() {
        let (key, pem) = SigningKey::generate().unwrap();
        assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----"));
        let signature = key.sign(b"payload").unwrap();
        let public = PublicKey::from_pem(&key.public_key().to_pem()).unwrap();
        assert_eq!(public.describe(), "ECDSA P-256");
        assert!(public.verify(b"payload", &signature));
        assert!(!public.verify(b"payload!", &signature));
        let again = SigningKey::from_pem(&pem).unwrap();
        assert_eq!(again.public_key(), key.public_key());
        let (other, _) = SigningKey::generate().unwrap();
        assert!(!other.public_key().verify(b"payload", &signature));
    }

    #[test]
    fn ed25519_keys_sign_and_verify() {
        let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
        let key = SigningKey::from_pem(&pair.serialize_pem()).unwrap();
        let signature = key.sign(b"m").unwrap();
        assert!(key.public_key().verify(b"m", &signature));
        assert_eq!(key.public_key().describe(), "Ed25519");
        assert!(!key.public_key().verify(b"n", &signature));
    }

    #[test]
    fn other_key_files_are_refused_with_what_to_do() {
        let p384 = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P384_SHA384).unwrap();
        let error = SigningKey::from_pem(&p384.serialize_pem()).unwrap_err();
        assert!(error.to_string().contains("sign with P-256"), "{error}");
        assert_eq!(
            modulus_bits(&[0x00, 0x80, 0, 0]),
            24,
            "the sign byte is not a bit"
        );
        assert_eq!(modulus_bits(&[0x01, 0xff]), 9);
        // ... but a P-384 public key verifies.
        assert_eq!(
            PublicKey::from_pem(&p384.public_key_pem())
                .unwrap()
                .describe(),
            "ECDSA P-384"
        );
        let sec1 = "-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n";
        let error = SigningKey::from_pem(sec1).unwrap_err();
        assert!(
            error.to_string().contains("openssl pkcs8 -topk8"),
            "{error}"
        );
        let cosign = "-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n";
        let error = SigningKey::from_pem(cosign).unwrap_err();
        assert!(error.to_string().contains("cosign sign --key"), "{error}");
        let error = SigningKey::from_pem("no key here").unwrap_err();
        assert_eq!(
            error.to_string(),
            "no PEM PRIVATE KEY block: found no PEM block"
        );
        let error = PublicKey::from_pem(&p384.serialize_pem()).unwrap_err();
        assert_eq!(
            error.to_string(),
            "no PEM PUBLIC KEY block: found PRIVATE KEY instead"
        );
    }
}
