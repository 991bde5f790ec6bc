//! The renewal rules at chosen dates: what is kept, what is renewed, under which CA.

use super::*;

const NOW: i64 = 1_780_000_000;
const WINDOW: i64 = 30 * DAY;
const SETTLE: i64 = 2 * 3600;

fn policy() -> Policy {
    Policy {
        renew_before: WINDOW,
        settle: SETTLE,
    }
}

fn names() -> Names {
    Names {
        dns: vec![
            "operon-webhooks".into(),
            "operon-webhooks.operon".into(),
            "operon-webhooks.operon.svc".into(),
            "operon-webhooks.operon.svc.cluster.local".into(),
        ],
        ips: vec![IpAddr::from([127, 0, 0, 1])],
    }
}

fn keep(plan: Plan) -> i64 {
    match plan {
        Plan::Keep { not_after } => not_after,
        Plan::Replace { reasons, .. } => panic!("replaced: {reasons:?}"),
    }
}

fn replace(plan: Plan) -> (Material, Names, i64, String) {
    match plan {
        Plan::Replace {
            material,
            names,
            not_after,
            reasons,
        } => (material, names, not_after, reasons.join("; ")),
        Plan::Keep { .. } => panic!("kept"),
    }
}

fn plan_at(stored: &Material, now: i64) -> Plan {
    plan(stored, &names(), &policy(), now).unwrap()
}

/// The CAs of a bundle, expired or not.
fn cas(material: &Material) -> Vec<Ca> {
    valid_cas(&material.ca_crt, i64::MIN)
}

/// Whether the serving certificate chains to `ca` at `at`.
fn signed_by(material: &Material, ca: &Ca, at: i64) -> bool {
    let leaf = first_certificate(&material.tls_crt).unwrap();
    chains(&leaf, std::slice::from_ref(ca), &names(), at).is_ok()
}

#[test]
fn a_fresh_set_is_kept_until_its_renewal_window() {
    let (fresh, not_after) = fresh(&names(), NOW).unwrap();
    assert_eq!(not_after, NOW + LEAF_VALIDITY);
    assert_eq!(keep(plan_at(&fresh, NOW)), not_after);
    assert_eq!(keep(plan_at(&fresh, not_after - WINDOW - 1)), not_after);

    let later = not_after - WINDOW + 1;
    let (renewed, held, renewed_until, reasons) = replace(plan_at(&fresh, later));
    assert!(reasons.contains("expires"), "{reasons}");
    assert_eq!(held, names());
    assert_eq!(renewed_until, later + LEAF_VALIDITY);
    assert_eq!(
        (&renewed.ca_crt, &renewed.ca_key),
        (&fresh.ca_crt, &fresh.ca_key),
        "the CA is kept"
    );
    assert!(signed_by(&renewed, &cas(&fresh)[0], later));
    assert_eq!(keep(plan_at(&renewed, later)), renewed_until);
}

#[test]
fn a_missing_name_renews_for_the_old_names_and_the_new() {
    let (fresh, _) = fresh(&names(), NOW).unwrap();
    let mut wanted = names();
    wanted.dns = vec!["operon-webhooks.example.com".into()];
    wanted.ips = vec![IpAddr::from([10, 0, 0, 7])];
    let (renewed, held, _, reasons) = replace(plan(&fresh, &wanted, &policy(), NOW).unwrap());
    assert!(reasons.contains("operon-webhooks.example.com"), "{reasons}");
    assert_eq!(held, wanted.union(&names()));
    assert_eq!(renewed.ca_crt, fresh.ca_crt);
    // Both sets of names are served now: two replicas asking for each are satisfied.
    keep(plan(&renewed, &wanted, &policy(), NOW).unwrap());
    keep(plan_at(&renewed, NOW));
}

#[test]
fn a_serving_certificate_of_another_ca_or_key_is_renewed_under_the_stored_ca() {
    let (ours, _) = fresh(&names(), NOW).unwrap();
    let (theirs, _) = fresh(&names(), NOW).unwrap();
    let foreign = Material {
        tls_crt: theirs.tls_crt.clone(),
        tls_key: theirs.tls_key.clone(),
        ..ours.clone()
    };
    let (renewed, _, _, reasons) = replace(plan_at(&foreign, NOW));
    assert!(reasons.contains("does not chain"), "{reasons}");
    assert_eq!(renewed.ca_crt, ours.ca_crt);
    assert!(signed_by(&renewed, &cas(&ours)[0], NOW));

    let wrong_key = Material {
        tls_key: theirs.tls_key.clone(),
        ..ours.clone()
    };
    let (renewed, _, _, reasons) = replace(plan_at(&wrong_key, NOW));
    assert!(reasons.contains("tls.key does not fit"), "{reasons}");
    assert_eq!(renewed.ca_key, ours.ca_key);

    let garbage = Material {
        tls_crt: b"not a certificate".to_vec(),
        ..ours.clone()
    };
    let (renewed, _, _, reasons) = replace(plan_at(&garbage, NOW));
    assert!(reasons.contains("tls.crt"), "{reasons}");
    assert_eq!(renewed.ca_crt, ours.ca_crt);
}

#[test]
fn an_unusable_ca_is_replaced_and_the_old_one_stays_trusted_while_valid() {
    let (ours, _) = fresh(&names(), NOW).unwrap();
    let (theirs, _) = fresh(&names(), NOW).unwrap();
    let lost_key = Material {
        ca_key: theirs.ca_key.clone(),
        ..ours.clone()
    };
    let (renewed, _, _, reasons) = replace(plan_at(&lost_key, NOW));
    assert!(reasons.contains("ca.key does not fit"), "{reasons}");
    let bundle = cas(&renewed);
    assert_eq!(bundle.len(), 2);
    assert_eq!(bundle[1].der, cas(&ours)[0].der);
    // The serving certificate still chains to the bundle: it is kept.
    assert_eq!(renewed.tls_crt, ours.tls_crt);
    keep(plan_at(&renewed, NOW));

    let (empty, _, _, reasons) = replace(plan_at(&Material::default(), NOW));
    assert!(reasons.contains("ca.crt holds no certificate"), "{reasons}");
    assert_eq!(cas(&empty).len(), 1);
    assert!(signed_by(&empty, &cas(&empty)[0], NOW));
}

#[test]
fn a_new_ca_joins_the_bundle_a_window_before_it_signs() {
    let (first, _) = fresh(&names(), NOW).unwrap();
    let old = cas(&first).remove(0);
    let ca_end = old.not_after;
    assert_eq!(ca_end, NOW + CA_VALIDITY);

    // The expired serving certificate is renewed under the old CA, up to its end.
    let t1 = ca_end - 70 * DAY;
    let (m1, _, until, _) = replace(plan_at(&first, t1));
    assert_eq!(until, ca_end, "a certificate never outlives its CA");
    assert_eq!(m1.ca_crt, first.ca_crt);

    // Twice the window before the CA ends: a new CA, first in the bundle; the serving
    // certificate is kept.
    let t2 = ca_end - 50 * DAY;
    let (m2, _, until, reasons) = replace(plan_at(&m1, t2));
    assert!(reasons.contains("the CA expires"), "{reasons}");
    assert_eq!(until, ca_end);
    assert_eq!(m2.tls_crt, m1.tls_crt);
    let bundle = cas(&m2);
    assert_eq!(bundle.len(), 2);
    assert_eq!(bundle[1].der, old.der);
    let new = bundle[0].clone();
    assert_eq!(keep(plan_at(&m2, t2 + DAY)), ca_end);

    // In the serving certificate's window, the new CA, a window old, signs.
    let t3 = ca_end - 25 * DAY;
    let (m3, _, until, _) = replace(plan_at(&m2, t3));
    assert_eq!(until, t3 + LEAF_VALIDITY);
    assert_eq!((&m3.ca_crt, &m3.ca_key), (&m2.ca_crt, &m2.ca_key));
    assert!(signed_by(&m3, &new, t3));
    assert!(!signed_by(&m3, &old, t3));

    // The old CA's end changes nothing; it leaves the bundle at the next write.
    assert_eq!(keep(plan_at(&m3, ca_end + DAY)), until);
    let t4 = until - 20 * DAY;
    let (m4, _, _, _) = replace(plan_at(&m3, t4));
    assert_eq!(cas(&m4).len(), 1);
    assert_eq!(cas(&m4)[0].der, new.der);
}

#[test]
fn a_serving_certificate_due_with_its_ca_waits_for_the_new_ca_to_settle() {
    let (first, _) = fresh(&names(), NOW).unwrap();
    let ca_end = NOW + CA_VALIDITY;
    let t1 = ca_end - 385 * DAY;
    let (m1, _, until, _) = replace(plan_at(&first, t1));
    assert_eq!(until, ca_end - 20 * DAY);

    // The CA is due and so is the serving certificate, which still has 25 days: it
    // waits, so it is not signed by a CA the configurations do not hold yet.
    let t2 = ca_end - 45 * DAY;
    let (m2, _, _, _) = replace(plan_at(&m1, t2));
    assert_eq!(m2.tls_crt, m1.tls_crt);
    assert_eq!(cas(&m2).len(), 2);
    assert_eq!(keep(plan_at(&m2, t2 + SETTLE - 60)), until);

    let t3 = t2 + SETTLE + 60;
    let (m3, _, _, _) = replace(plan_at(&m2, t3));
    assert!(signed_by(&m3, &cas(&m2)[0], t3));

    // With less time left than the settling, it is renewed at once.
    let late = until - SETTLE / 2;
    let (m4, _, _, _) = replace(plan_at(&m1, late));
    assert!(signed_by(&m4, &cas(&m4)[0], late));
}

#[test]
fn names_are_read_back_from_the_certificate() {
    let (fresh, _) = fresh(&names(), NOW).unwrap();
    let der = first_certificate(&fresh.tls_crt).unwrap();
    assert_eq!(san_names(&parse(&der).unwrap()), names());
    assert_eq!(
        names().joined(),
        "operon-webhooks,operon-webhooks.operon,operon-webhooks.operon.svc,\
         operon-webhooks.operon.svc.cluster.local,127.0.0.1"
    );
}

/// The key identifiers a verifier (Go's, in the API server) matches a certificate to
/// its CA by: the authority key identifier of the serving certificate, and the subject
/// key identifier of its CA.
fn key_ids(pem: &[u8]) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
    use x509_parser::extensions::ParsedExtension;
    let der = first_certificate(pem).unwrap();
    let cert = parse(&der).unwrap();
    let (mut authority, mut subject) = (None, None);
    for extension in cert.extensions() {
        match extension.parsed_extension() {
            ParsedExtension::AuthorityKeyIdentifier(aki) => {
                authority = aki.key_identifier.as_ref().map(|k| k.0.to_vec());
            }
            ParsedExtension::SubjectKeyIdentifier(ski) => subject = Some(ski.0.to_vec()),
            _ => {}
        }
    }
    (authority, subject)
}

#[test]
fn a_renewed_certificate_names_its_ca_by_key_identifier() {
    let (fresh, _) = fresh(&names(), NOW).unwrap();
    let later = NOW + LEAF_VALIDITY - WINDOW / 2;
    let (renewed, _, _, _) = replace(plan_at(&fresh, later));
    let (_, ca_subject) = key_ids(&fresh.ca_crt);
    assert!(ca_subject.is_some());
    assert_eq!(key_ids(&fresh.tls_crt).0, ca_subject);
    assert_eq!(key_ids(&renewed.tls_crt).0, ca_subject);
}
