//! The systemd built-in against a fake `org.freedesktop.systemd1` on a private
//! `dbus-daemon`: the calls systemd's D-Bus API documents (`LoadUnit`, then the `Unit`
//! and `Service` properties), as the agent makes them on a node's system bus.

use super::systemd::{UNITS, UNITS_PARAM, unit_status};
use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use zbus::OwnedObjectPath;

/// A `dbus-daemon` of its own, stopped when dropped.
struct Bus {
    daemon: Child,
    address: String,
    _dir: tempfile::TempDir,
}

impl Drop for Bus {
    fn drop(&mut self) {
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
    }
}

fn private_bus() -> Bus {
    let dir = tempfile::tempdir().unwrap();
    let address = format!("unix:path={}", dir.path().join("bus").display());
    let mut daemon = Command::new("dbus-daemon")
        .args(["--session", "--nofork", "--print-address", "--address"])
        .arg(&address)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("dbus-daemon (Debian package dbus-daemon) runs");
    // It prints its address once it listens.
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(daemon.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert!(line.starts_with("unix:"), "dbus-daemon printed {line:?}");
    Bus {
        daemon,
        address,
        _dir: dir,
    }
}

struct FakeManager;

#[zbus::interface(name = "org.freedesktop.systemd1.Manager")]
impl FakeManager {
    fn load_unit(&self, name: &str) -> zbus::fdo::Result<OwnedObjectPath> {
        let escaped = name.replace('.', "_2e").replace('-', "_2d");
        OwnedObjectPath::try_from(format!("/org/freedesktop/systemd1/unit/{escaped}"))
            .map_err(|e| zbus::fdo::Error::InvalidArgs(e.to_string()))
    }
}

struct FakeUnit {
    id: &'static str,
    load_state: &'static str,
    active_state: &'static str,
    sub_state: &'static str,
    since: u64,
}

#[zbus::interface(name = "org.freedesktop.systemd1.Unit")]
impl FakeUnit {
    #[zbus(property)]
    fn id(&self) -> String {
        self.id.to_owned()
    }
    #[zbus(property)]
    fn description(&self) -> String {
        format!("fake {}", self.id)
    }
    #[zbus(property)]
    fn load_state(&self) -> String {
        self.load_state.to_owned()
    }
    #[zbus(property)]
    fn active_state(&self) -> String {
        self.active_state.to_owned()
    }
    #[zbus(property)]
    fn sub_state(&self) -> String {
        self.sub_state.to_owned()
    }
    #[zbus(property)]
    fn unit_file_state(&self) -> String {
        "enabled".to_owned()
    }
    #[zbus(property)]
    fn active_enter_timestamp(&self) -> u64 {
        self.since
    }
}

struct FakeService {
    main_pid: u32,
    restarts: u32,
}

#[zbus::interface(name = "org.freedesktop.systemd1.Service")]
impl FakeService {
    #[zbus(property, name = "MainPID")]
    fn main_pid(&self) -> u32 {
        self.main_pid
    }
    #[zbus(property, name = "NRestarts")]
    fn n_restarts(&self) -> u32 {
        self.restarts
    }
    #[zbus(property)]
    fn result(&self) -> String {
        "success".to_owned()
    }
}

/// Serves systemd with `kubelet.service` running and `containerd.service` failed, and
/// `missing.service` not found, on `bus`.
async fn fake_systemd(bus: &Bus) -> zbus::Connection {
    zbus::connection::Builder::address(bus.address.as_str())
        .name("org.freedesktop.systemd1")
        .serve_at("/org/freedesktop/systemd1", FakeManager)
        .serve_at(
            "/org/freedesktop/systemd1/unit/kubelet_2eservice",
            FakeUnit {
                id: "kubelet.service",
                load_state: "loaded",
                active_state: "active",
                sub_state: "running",
                since: 1_795_478_400_000_000,
            },
        )
        .serve_at(
            "/org/freedesktop/systemd1/unit/kubelet_2eservice",
            FakeService {
                main_pid: 4242,
                restarts: 3,
            },
        )
        .serve_at(
            "/org/freedesktop/systemd1/unit/containerd_2eservice",
            FakeUnit {
                id: "containerd.service",
                load_state: "loaded",
                active_state: "failed",
                sub_state: "failed",
                since: 0,
            },
        )
        .serve_at(
            "/org/freedesktop/systemd1/unit/containerd_2eservice",
            FakeService {
                main_pid: 0,
                restarts: 7,
            },
        )
        .serve_at(
            "/org/freedesktop/systemd1/unit/missing_2eservice",
            FakeUnit {
                id: "missing.service",
                load_state: "not-found",
                active_state: "inactive",
                sub_state: "dead",
                since: 0,
            },
        )
        .build()
        .await
        .expect("the fake systemd is on the bus")
}

#[tokio::test]
async fn unit_states_come_from_systemd_over_the_bus() {
    let bus = private_bus();
    let _systemd = fake_systemd(&bus).await;

    // No units named: kubelet and containerd.
    let out = unit_status(&bus.address, &BTreeMap::new()).await.unwrap();
    let units: serde_json::Value = serde_json::from_str(&out.results[UNITS]).unwrap();
    assert_eq!(units[0]["name"], "kubelet.service");
    assert_eq!(units[0]["activeState"], "active");
    assert_eq!(units[0]["subState"], "running");
    assert_eq!(units[0]["mainPID"], 4242);
    assert_eq!(units[0]["restarts"], 3);
    assert_eq!(units[0]["activeEnterTimestamp"], "2026-11-24T00:00:00Z");
    assert_eq!(units[1]["activeState"], "failed");
    assert_eq!(units[1]["restarts"], 7);
    assert!(units[1]["activeEnterTimestamp"].is_null(), "never active");
    assert_eq!(
        out.output,
        "kubelet.service: active (loaded/running)\ncontainerd.service: failed (loaded/failed)"
    );

    // An uninstalled unit is reported as systemd loads it: not-found, no service fields.
    let input = BTreeMap::from([(UNITS_PARAM.to_owned(), " missing.service ,".to_owned())]);
    let out = unit_status(&bus.address, &input).await.unwrap();
    let units: serde_json::Value = serde_json::from_str(&out.results[UNITS]).unwrap();
    assert_eq!(units.as_array().unwrap().len(), 1);
    assert_eq!(units[0]["loadState"], "not-found");
    assert!(units[0].get("mainPID").is_none());
}

#[tokio::test]
async fn no_bus_or_no_units_fail_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let nowhere = format!("unix:path={}", dir.path().join("none").display());
    let err = unit_status(&nowhere, &BTreeMap::new()).await.unwrap_err();
    assert!(
        err.message
            .starts_with(&format!("cannot reach the system bus at {nowhere}"))
            && err.message.contains("Helm agent.systemd.enabled"),
        "{err}"
    );
    let input = BTreeMap::from([(UNITS_PARAM.to_owned(), " , ".to_owned())]);
    let err = unit_status(&nowhere, &input).await.unwrap_err();
    assert_eq!(err.message, format!("{UNITS_PARAM} names no unit"));
}
