//! Leader election against a fake Lease API behind a tower-test mock service: the
//! server keeps one Lease, checks `resourceVersion` preconditions as the API server
//! does, and records every request.

use super::*;
use crate::serve::fake_lease::{FakeLeases, PATH, client};
use serde_json::Value;
use std::sync::{Arc, Mutex};

fn elector(fake: &Arc<Mutex<FakeLeases>>, identity: &str) -> LeaderElector {
    let mut options = LeaseOptions::new("operon", "ops");
    options.identity = identity.to_owned();
    LeaderElector::new(client(fake.clone()), options)
}

fn holder(fake: &Arc<Mutex<FakeLeases>>) -> Value {
    fake.lock().unwrap().lease.as_ref().unwrap()["spec"]["holderIdentity"].clone()
}

#[tokio::test(start_paused = true)]
async fn one_of_two_replicas_leads_and_the_other_takes_over_when_renewals_stop() {
    let fake = Arc::new(Mutex::new(FakeLeases::default()));
    let mut a = elector(&fake, "a");
    let mut b = elector(&fake, "b");
    assert_eq!(a.try_acquire_or_renew().await.unwrap(), Attempt::Leading);
    assert_eq!(
        b.try_acquire_or_renew().await.unwrap(),
        Attempt::Following { holder: "a".into() }
    );
    // a renews; b keeps following although more than a lease duration passed in total,
    // because the record keeps changing.
    for _ in 0..10 {
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(a.try_acquire_or_renew().await.unwrap(), Attempt::Leading);
        assert!(matches!(
            b.try_acquire_or_renew().await.unwrap(),
            Attempt::Following { .. }
        ));
    }
    // a dies. b sees the same record for 15 s and takes the Lease.
    tokio::time::advance(Duration::from_secs(14)).await;
    assert!(matches!(
        b.try_acquire_or_renew().await.unwrap(),
        Attempt::Following { .. }
    ));
    tokio::time::advance(Duration::from_secs(2)).await;
    assert_eq!(b.try_acquire_or_renew().await.unwrap(), Attempt::Leading);
    let lease = fake.lock().unwrap().lease.clone().unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], "b");
    assert_eq!(lease["spec"]["leaseTransitions"], 1);
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 15);
    // a comes back: it follows.
    assert_eq!(
        a.try_acquire_or_renew().await.unwrap(),
        Attempt::Following { holder: "b".into() }
    );
}

#[tokio::test(start_paused = true)]
async fn a_stale_write_loses_on_the_resource_version_and_makes_no_second_leader() {
    let fake = Arc::new(Mutex::new(FakeLeases::default()));
    let mut a = elector(&fake, "a");
    let mut b = elector(&fake, "b");
    assert_eq!(a.try_acquire_or_renew().await.unwrap(), Attempt::Leading);
    assert!(matches!(
        b.try_acquire_or_renew().await.unwrap(),
        Attempt::Following { .. }
    ));
    // b has seen the same record for longer than the lease duration, but a renews
    // between b's read and b's write: b's write carries the old resourceVersion.
    tokio::time::advance(Duration::from_secs(16)).await;
    fake.lock().unwrap().renew_after_get = true;
    let attempt = b.try_acquire_or_renew().await.unwrap();
    assert_eq!(attempt, Attempt::Following { holder: "a".into() });
    assert_eq!(holder(&fake), "a");
    let log = fake.lock().unwrap().log.clone();
    assert_eq!(
        log.last().unwrap().0,
        "PUT",
        "b tried, and the server refused"
    );
}

#[tokio::test(start_paused = true)]
async fn a_leader_that_cannot_renew_stops_before_the_lease_expires() {
    let fake = Arc::new(Mutex::new(FakeLeases::default()));
    let mut a = elector(&fake, "a");
    let (_stop, mut stopped) = watch::channel(false);
    assert!(a.acquire(&mut stopped).await);
    let started = Instant::now();
    fake.lock().unwrap().down = true;
    let lost = a.renew(&mut stopped).await.unwrap_err();
    assert!(matches!(lost, LeadershipLost::RenewFailed(..)), "{lost}");
    let gave_up_after = started.elapsed();
    // The renew deadline (10 s) plus at most one retry period with jitter: before the
    // lease duration (15 s) ran out for the followers.
    assert!(gave_up_after < Duration::from_secs(15), "{gave_up_after:?}");
    assert!(
        gave_up_after >= Duration::from_secs(10),
        "{gave_up_after:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_released_lease_is_taken_at_once() {
    let fake = Arc::new(Mutex::new(FakeLeases::default()));
    let mut a = elector(&fake, "a");
    let mut b = elector(&fake, "b");
    assert_eq!(a.try_acquire_or_renew().await.unwrap(), Attempt::Leading);
    assert!(matches!(
        b.try_acquire_or_renew().await.unwrap(),
        Attempt::Following { .. }
    ));
    a.release().await.unwrap();
    assert_eq!(holder(&fake), Value::Null);
    assert_eq!(b.try_acquire_or_renew().await.unwrap(), Attempt::Leading);
    let log = fake.lock().unwrap().log.clone();
    assert_eq!(log[0], ("GET".into(), format!("{PATH}/operon")));
    assert_eq!(
        log[1],
        ("POST".into(), format!("{PATH}?&fieldManager=operon"))
    );
}

#[tokio::test(start_paused = true)]
async fn followers_learn_where_the_leader_serves_and_a_new_leader_replaces_it() {
    let fake = Arc::new(Mutex::new(FakeLeases::default()));
    let address = |ip: &str| LeaderAddress {
        url: format!("https://{ip}:9680"),
        server_name: Some("operon-webhooks.ops.svc".to_owned()),
    };
    let mut a = elector(&fake, "a");
    a.options.advertise = Some(address("10.0.0.1"));
    let mut b = elector(&fake, "b");
    b.options.advertise = Some(address("10.0.0.2"));
    let mut c = elector(&fake, "c");
    let (from_b, from_c) = (b.leader_address(), c.leader_address());
    assert_eq!(a.try_acquire_or_renew().await.unwrap(), Attempt::Leading);
    assert!(matches!(
        b.try_acquire_or_renew().await.unwrap(),
        Attempt::Following { .. }
    ));
    assert_eq!(*from_b.borrow(), Some(address("10.0.0.1")));
    // a dies; b takes over and advertises itself, so c forwards to b.
    tokio::time::advance(Duration::from_secs(16)).await;
    assert_eq!(b.try_acquire_or_renew().await.unwrap(), Attempt::Leading);
    assert_eq!(*from_b.borrow(), None, "a leader forwards to nobody");
    assert!(matches!(
        c.try_acquire_or_renew().await.unwrap(),
        Attempt::Following { .. }
    ));
    assert_eq!(*from_c.borrow(), Some(address("10.0.0.2")));
    // A leader that advertises nothing removes what the one before it advertised.
    b.release().await.unwrap();
    assert_eq!(c.try_acquire_or_renew().await.unwrap(), Attempt::Leading);
    let lease = fake.lock().unwrap().lease.clone().unwrap();
    assert!(
        lease["metadata"]["annotations"]
            .as_object()
            .is_none_or(|a| a.is_empty()),
        "{lease}"
    );
}
