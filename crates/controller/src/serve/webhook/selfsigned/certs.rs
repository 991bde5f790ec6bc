//! The certificates of the self-signed mode, with no I/O: making a CA and a serving
//! certificate it signs (rcgen, ECDSA P-256), and deciding what a stored set needs
//! (x509-parser reads dates and names; rustls's own verifier checks the chain, the
//! check a TLS client makes). Times are Unix seconds passed in, so every rule can be
//! tested at any date.
//!
//! The rules:
//! - `ca.crt` is the caBundle: the signing CA first, then earlier CAs until they expire,
//!   so certificates they signed stay trusted while the replicas catch up.
//! - The signing CA is replaced when it has less than twice the renewal window left.
//!   The new CA joins the bundle at once but signs serving certificates only once it is
//!   `settle` old (every replica, the leader included, has then seen it and put it in the
//!   webhook configurations), unless the serving certificate cannot wait that long.
//! - The serving certificate is renewed when it expires within the window, misses a
//!   requested name, does not match its key or does not chain to the bundle. It is made
//!   for the requested names plus those it had, so replicas asking for different names
//!   (during a rolling update) converge instead of taking turns.
//! - A serving certificate never outlives the CA that signs it.

use base64::Engine as _;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PKCS_ECDSA_P256_SHA256, SanType,
};
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier as _;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::sign::CertifiedKey;
use std::net::IpAddr;
use std::sync::Arc;
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;
use x509_parser::time::ASN1Time;

const DAY: i64 = 86_400;
/// How long a CA is valid.
pub(super) const CA_VALIDITY: i64 = 3650 * DAY;
/// How long a serving certificate is valid (at most: never past its CA).
pub(super) const LEAF_VALIDITY: i64 = 365 * DAY;
/// Certificates start this long before they are made, so a replica or an API server
/// whose clock is a little behind already accepts them.
const BACKDATE: i64 = 3600;

/// Why certificates could not be made.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// rcgen refused the parameters or the key (a name that is not ASCII, say).
    #[error(transparent)]
    Rcgen(#[from] rcgen::Error),
    /// A validity date out of the range X.509 can encode.
    #[error("{0} is not a date a certificate can hold")]
    Date(i64),
}

/// The DNS names and IP addresses a serving certificate is for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Names {
    pub(crate) dns: Vec<String>,
    pub(crate) ips: Vec<IpAddr>,
}

impl Names {
    pub(super) fn is_empty(&self) -> bool {
        self.dns.is_empty() && self.ips.is_empty()
    }

    /// The first of `wanted` this does not hold.
    fn missing(&self, wanted: &Names) -> Option<String> {
        let dns = wanted
            .dns
            .iter()
            .find(|w| !self.dns.iter().any(|d| d.eq_ignore_ascii_case(w)))
            .cloned();
        dns.or_else(|| {
            wanted
                .ips
                .iter()
                .find(|w| !self.ips.contains(w))
                .map(IpAddr::to_string)
        })
    }

    /// These names, then those of `other` not among them.
    fn union(&self, other: &Names) -> Names {
        let mut out = self.clone();
        for d in &other.dns {
            if !out.dns.iter().any(|o| o.eq_ignore_ascii_case(d)) {
                out.dns.push(d.clone());
            }
        }
        for ip in &other.ips {
            if !out.ips.contains(ip) {
                out.ips.push(*ip);
            }
        }
        out
    }

    /// The names, comma-separated: the Secret's annotation.
    pub(super) fn joined(&self) -> String {
        self.dns
            .iter()
            .cloned()
            .chain(self.ips.iter().map(IpAddr::to_string))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// A name a TLS client could ask for, to check the chain with.
    fn server_name(&self) -> Option<ServerName<'static>> {
        match (self.dns.first(), self.ips.first()) {
            (Some(dns), _) => ServerName::try_from(dns.clone()).ok(),
            (None, Some(ip)) => Some(ServerName::IpAddress((*ip).into())),
            (None, None) => None,
        }
    }
}

/// The four PEM documents of the Secret (a missing key is empty).
#[derive(Clone, Default, PartialEq, Eq)]
pub(super) struct Material {
    /// The CA bundle: the signing CA first.
    pub(crate) ca_crt: Vec<u8>,
    /// The signing CA's key.
    pub(crate) ca_key: Vec<u8>,
    /// The serving certificate.
    pub(crate) tls_crt: Vec<u8>,
    /// Its key.
    pub(crate) tls_key: Vec<u8>,
}

impl std::fmt::Debug for Material {
    // Keys never reach a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Material")
            .field("ca_crt", &String::from_utf8_lossy(&self.ca_crt))
            .field("tls_crt", &String::from_utf8_lossy(&self.tls_crt))
            .finish_non_exhaustive()
    }
}

/// When to renew.
#[derive(Debug, Clone, Copy)]
pub(super) struct Policy {
    /// Renew a serving certificate that expires within this many seconds; replace a CA
    /// that expires within twice as many.
    pub(crate) renew_before: i64,
    /// How old a new CA must be before it signs a serving certificate that could wait.
    pub(crate) settle: i64,
}

/// What a stored set needs.
#[derive(Debug)]
pub(super) enum Plan {
    /// It is good as it is.
    Keep {
        /// When its serving certificate expires.
        not_after: i64,
    },
    /// Store this instead.
    Replace {
        material: Material,
        /// The names the serving certificate holds.
        names: Names,
        /// When the serving certificate expires.
        not_after: i64,
        /// Why, for the log.
        reasons: Vec<String>,
    },
}

/// A CA certificate from the bundle.
#[derive(Debug, Clone)]
struct Ca {
    der: CertificateDer<'static>,
    not_before: i64,
    not_after: i64,
}

/// The CA that signs, with its key.
struct Signing {
    ca: Ca,
    issuer: Issuer<'static, KeyPair>,
}

/// The state of the stored serving certificate.
enum Leaf {
    /// Good beyond the renewal window.
    Good { not_after: i64, names: Names },
    /// Good, but inside the renewal window.
    Expiring { not_after: i64, names: Names },
    /// Not usable as it is.
    Unusable { reason: String, names: Names },
}

/// Decides what `stored` needs so that it serves `wanted` at `now`.
pub(super) fn plan(
    stored: &Material,
    wanted: &Names,
    policy: &Policy,
    now: i64,
) -> Result<Plan, CertError> {
    let mut reasons = Vec::new();
    let mut bundle = valid_cas(&stored.ca_crt, now);
    let leaf = inspect_leaf(stored, &bundle, wanted, policy, now);

    let current = signing_ca(stored).and_then(|s| {
        if s.ca.not_after - now > 2 * policy.renew_before {
            Ok(s)
        } else {
            Err(format!("the CA expires at {}", timestamp(s.ca.not_after)))
        }
    });
    let (signing, new_ca) = match current {
        Ok(signing) => (signing, false),
        Err(reason) => {
            reasons.push(reason);
            let signing = make_ca(now)?;
            bundle.insert(0, signing.ca.clone());
            (signing, true)
        }
    };

    let young = now < signing.ca.not_before + BACKDATE + policy.settle;
    let (renew, old_names) = match leaf {
        Leaf::Good { not_after, names } => (None, (not_after, names)),
        Leaf::Expiring { not_after, names } if young && not_after - now > policy.settle => {
            // Signing with a CA the webhook configurations may not name yet would break
            // calls to this replica; the current certificate lasts until the CA settles.
            (None, (not_after, names))
        }
        Leaf::Expiring { not_after, names } => (
            Some(format!(
                "the serving certificate expires at {}",
                timestamp(not_after)
            )),
            (not_after, names),
        ),
        Leaf::Unusable { reason, names } => (Some(reason), (0, names)),
    };
    let (kept_not_after, had) = old_names;
    if renew.is_none() && !new_ca {
        return Ok(Plan::Keep {
            not_after: kept_not_after,
        });
    }
    let ca_crt = bundle
        .iter()
        .flat_map(|ca| pem("CERTIFICATE", &ca.der))
        .collect();
    // A kept CA keeps its key's bytes, whatever PEM form they were stored in.
    let ca_key = if new_ca {
        signing.issuer.key().serialize_pem().into_bytes()
    } else {
        stored.ca_key.clone()
    };
    let Some(reason) = renew else {
        return Ok(Plan::Replace {
            material: Material {
                ca_crt,
                ca_key,
                ..stored.clone()
            },
            names: had,
            not_after: kept_not_after,
            reasons,
        });
    };
    reasons.push(reason);
    let names = wanted.union(&had);
    let (tls_crt, tls_key, not_after) = issue(&names, &signing, now)?;
    Ok(Plan::Replace {
        material: Material {
            ca_crt,
            ca_key,
            tls_crt,
            tls_key,
        },
        names,
        not_after,
        reasons,
    })
}

/// A new CA and a serving certificate it signs for `names`; and when that expires.
pub(super) fn fresh(names: &Names, now: i64) -> Result<(Material, i64), CertError> {
    let signing = make_ca(now)?;
    let (tls_crt, tls_key, not_after) = issue(names, &signing, now)?;
    let material = Material {
        ca_crt: pem("CERTIFICATE", &signing.ca.der),
        ca_key: signing.issuer.key().serialize_pem().into_bytes(),
        tls_crt,
        tls_key,
    };
    Ok((material, not_after))
}

/// The CAs of a bundle that parse, are CAs and have not expired, in order.
fn valid_cas(pem: &[u8], now: i64) -> Vec<Ca> {
    CertificateDer::pem_slice_iter(pem)
        .filter_map(Result::ok)
        .filter_map(|der| ca(der).ok())
        .filter(|ca| ca.not_after > now)
        .collect()
}

fn ca(der: CertificateDer<'static>) -> Result<Ca, String> {
    let (not_before, not_after) = {
        let cert = parse(&der)?;
        if !cert.is_ca() {
            return Err("is not a CA certificate".to_owned());
        }
        let validity = cert.validity();
        (
            validity.not_before.timestamp(),
            validity.not_after.timestamp(),
        )
    };
    Ok(Ca {
        der,
        not_before,
        not_after,
    })
}

fn parse<'a>(der: &'a CertificateDer<'_>) -> Result<X509Certificate<'a>, String> {
    x509_parser::parse_x509_certificate(der)
        .map(|(_, cert)| cert)
        .map_err(|e| format!("does not parse: {e}"))
}

fn first_certificate(pem: &[u8]) -> Result<CertificateDer<'static>, String> {
    match CertificateDer::pem_slice_iter(pem).next() {
        Some(Ok(der)) => Ok(der),
        Some(Err(e)) => Err(format!("is not PEM: {e}")),
        None => Err("holds no certificate".to_owned()),
    }
}

/// Whether `key_pem` is the key of the certificate `der`.
fn keys_match(der: &CertificateDer<'static>, key_pem: &[u8]) -> Result<(), String> {
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| format!("no PEM key: {e}"))?;
    let signing =
        rustls::crypto::ring::sign::any_supported_type(&key).map_err(|e| e.to_string())?;
    CertifiedKey::new(vec![der.clone()], signing)
        .keys_match()
        .map_err(|e| e.to_string())
}

/// The first CA of the bundle and its key, if they are usable for signing.
fn signing_ca(stored: &Material) -> Result<Signing, String> {
    let der = first_certificate(&stored.ca_crt).map_err(|e| format!("ca.crt {e}"))?;
    let ca = ca(der).map_err(|e| format!("the first certificate of ca.crt {e}"))?;
    keys_match(&ca.der, &stored.ca_key).map_err(|e| format!("ca.key does not fit ca.crt: {e}"))?;
    let text = std::str::from_utf8(&stored.ca_key).map_err(|e| format!("ca.key: {e}"))?;
    let key = KeyPair::from_pem(text).map_err(|e| format!("ca.key: {e}"))?;
    let issuer = Issuer::from_ca_cert_der(&ca.der, key).map_err(|e| format!("ca.crt: {e}"))?;
    Ok(Signing { ca, issuer })
}

/// The state of the stored serving certificate, against the bundle and the names.
fn inspect_leaf(
    stored: &Material,
    bundle: &[Ca],
    wanted: &Names,
    policy: &Policy,
    now: i64,
) -> Leaf {
    let unusable = |reason: String, names: Names| Leaf::Unusable { reason, names };
    let der = match first_certificate(&stored.tls_crt) {
        Ok(der) => der,
        Err(e) => return unusable(format!("tls.crt {e}"), Names::default()),
    };
    let (names, not_after) = match parse(&der) {
        Ok(cert) => (san_names(&cert), cert.validity().not_after.timestamp()),
        Err(e) => return unusable(format!("tls.crt {e}"), Names::default()),
    };
    if let Err(e) = keys_match(&der, &stored.tls_key) {
        return unusable(format!("tls.key does not fit tls.crt: {e}"), names);
    }
    if let Some(missing) = names.missing(wanted) {
        return unusable(
            format!("the serving certificate is not for {missing}"),
            names,
        );
    }
    if not_after <= now {
        return unusable(
            format!(
                "the serving certificate expired at {}",
                timestamp(not_after)
            ),
            names,
        );
    }
    if let Err(e) = chains(&der, bundle, wanted, now) {
        return unusable(
            format!("the serving certificate does not chain to ca.crt: {e}"),
            names,
        );
    }
    if not_after - now <= policy.renew_before {
        Leaf::Expiring { not_after, names }
    } else {
        Leaf::Good { not_after, names }
    }
}

fn san_names(cert: &X509Certificate<'_>) -> Names {
    let mut names = Names::default();
    let Ok(Some(san)) = cert.subject_alternative_name() else {
        return names;
    };
    for name in &san.value.general_names {
        match name {
            GeneralName::DNSName(dns) => names.dns.push((*dns).to_owned()),
            GeneralName::IPAddress(bytes) => {
                if let Ok(v4) = <[u8; 4]>::try_from(*bytes) {
                    names.ips.push(IpAddr::from(v4));
                } else if let Ok(v6) = <[u8; 16]>::try_from(*bytes) {
                    names.ips.push(IpAddr::from(v6));
                }
            }
            _ => {}
        }
    }
    names
}

/// Whether a TLS client trusting only `bundle` accepts `der` for the first wanted name.
fn chains(
    der: &CertificateDer<'static>,
    bundle: &[Ca],
    wanted: &Names,
    now: i64,
) -> Result<(), String> {
    let mut roots = rustls::RootCertStore::empty();
    for ca in bundle {
        roots.add(ca.der.clone()).map_err(|e| e.to_string())?;
    }
    if roots.is_empty() {
        return Err("ca.crt holds no valid CA".to_owned());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|e| e.to_string())?;
    let name = wanted
        .server_name()
        .ok_or_else(|| "no name to check it for".to_owned())?;
    let at = UnixTime::since_unix_epoch(std::time::Duration::from_secs(
        u64::try_from(now).unwrap_or(0),
    ));
    verifier
        .verify_server_cert(der, &[], &name, &[], at)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

fn set_validity(params: &mut CertificateParams, from: i64, to: i64) -> Result<(), CertError> {
    let date = |secs| ASN1Time::from_timestamp(secs).map_err(|_| CertError::Date(secs));
    params.not_before = date(from)?.to_datetime();
    params.not_after = date(to)?.to_datetime();
    Ok(())
}

/// A new CA, valid for [`CA_VALIDITY`].
fn make_ca(now: i64) -> Result<Signing, CertError> {
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    let mut params = CertificateParams::default();
    // The time in the name tells CAs apart in a bundle (the kube-apiserver's
    // self-signed CAs are named the same way).
    params.distinguished_name = DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, format!("operon-webhook-ca@{now}"));
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    set_validity(&mut params, now - BACKDATE, now + CA_VALIDITY)?;
    let der = params.self_signed(&key)?.der().clone();
    Ok(Signing {
        ca: Ca {
            der,
            not_before: now - BACKDATE,
            not_after: now + CA_VALIDITY,
        },
        issuer: Issuer::new(params, key),
    })
}

/// A serving certificate for `names` signed by `signing`, and its key (PEM), and when
/// it expires.
fn issue(names: &Names, signing: &Signing, now: i64) -> Result<(Vec<u8>, Vec<u8>, i64), CertError> {
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    let common = names
        .dns
        .first()
        .cloned()
        .or_else(|| names.ips.first().map(IpAddr::to_string))
        .unwrap_or_default();
    params.distinguished_name.push(DnType::CommonName, common);
    params.subject_alt_names = names
        .dns
        .iter()
        .map(|d| Ok(SanType::DnsName(d.clone().try_into()?)))
        .chain(names.ips.iter().map(|ip| Ok(SanType::IpAddress(*ip))))
        .collect::<Result<_, rcgen::Error>>()?;
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    let not_after = (now + LEAF_VALIDITY).min(signing.ca.not_after);
    set_validity(&mut params, now - BACKDATE, not_after)?;
    let cert = params.signed_by(&key, &signing.issuer)?;
    Ok((
        cert.pem().into_bytes(),
        key.serialize_pem().into_bytes(),
        not_after,
    ))
}

/// PEM text of one DER document.
fn pem(label: &str, der: &[u8]) -> Vec<u8> {
    let text = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    // RFC 7468: lines of 64 characters; base64 text is ASCII.
    for line in text.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out.into_bytes()
}

/// A Unix time as RFC 3339, for messages.
pub(super) fn timestamp(secs: i64) -> String {
    jiff::Timestamp::from_second(secs).map_or_else(|_| secs.to_string(), |t| t.to_string())
}

#[cfg(test)]
mod tests;
