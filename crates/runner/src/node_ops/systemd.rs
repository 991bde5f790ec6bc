//! The systemd built-in: the state of named units, asked of systemd over the system
//! D-Bus (`org.freedesktop.systemd1`), as `systemctl show` would. Reading unit
//! properties needs no privilege, only the bus socket: the agent reaches the node's when
//! its pod mounts it (Helm `agent.systemd.enabled`).

use crate::{RunError, RunOutput};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use zbus::OwnedObjectPath;
use zbus::proxy::CacheProperties;

/// The result key: a JSON array, one object per unit.
pub(crate) const UNITS: &str = "collector.system.systemd.units";
/// The input naming the units, comma separated (KubeDiag's `param.` naming).
pub(crate) const UNITS_PARAM: &str = "param.collector.system.systemd.units";
/// The units asked about when the input names none: what a node's workloads stand on.
pub(crate) const DEFAULT_UNITS: &str = "kubelet.service,containerd.service";
/// Where the node's system bus is by default (D-Bus's well-known system bus address).
pub const DEFAULT_BUS: &str = "unix:path=/run/dbus/system_bus_socket";
/// Units one run may ask about.
const MAX_UNITS: usize = 64;

#[zbus::proxy(
    interface = "org.freedesktop.systemd1.Manager",
    default_service = "org.freedesktop.systemd1",
    default_path = "/org/freedesktop/systemd1"
)]
trait Manager {
    /// The unit's object, loading it if needed (`GetUnit` fails for a unit not loaded,
    /// which is what an uninstalled unit is).
    fn load_unit(&self, name: &str) -> zbus::Result<OwnedObjectPath>;
}

#[zbus::proxy(
    interface = "org.freedesktop.systemd1.Unit",
    default_service = "org.freedesktop.systemd1"
)]
trait Unit {
    #[zbus(property)]
    fn id(&self) -> zbus::Result<String>;
    #[zbus(property)]
    fn description(&self) -> zbus::Result<String>;
    #[zbus(property)]
    fn load_state(&self) -> zbus::Result<String>;
    #[zbus(property)]
    fn active_state(&self) -> zbus::Result<String>;
    #[zbus(property)]
    fn sub_state(&self) -> zbus::Result<String>;
    #[zbus(property)]
    fn unit_file_state(&self) -> zbus::Result<String>;
    /// Microseconds since the epoch; 0 when it never entered the active state.
    #[zbus(property)]
    fn active_enter_timestamp(&self) -> zbus::Result<u64>;
}

#[zbus::proxy(
    interface = "org.freedesktop.systemd1.Service",
    default_service = "org.freedesktop.systemd1"
)]
trait Service {
    #[zbus(property, name = "MainPID")]
    fn main_pid(&self) -> zbus::Result<u32>;
    #[zbus(property, name = "NRestarts")]
    fn n_restarts(&self) -> zbus::Result<u32>;
    #[zbus(property)]
    fn result(&self) -> zbus::Result<String>;
}

/// The unit names an input asks for.
fn unit_names(input: &BTreeMap<String, String>) -> Result<Vec<String>, RunError> {
    let text = input.get(UNITS_PARAM).map_or(DEFAULT_UNITS, String::as_str);
    let names: Vec<String> = text
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .collect();
    if names.is_empty() {
        return Err(RunError::new(format!("{UNITS_PARAM} names no unit")));
    }
    if names.len() > MAX_UNITS {
        return Err(RunError::new(format!(
            "{UNITS_PARAM} names {} units, at most {MAX_UNITS}",
            names.len()
        )));
    }
    Ok(names)
}

/// `/processor/systemdUnitCollector`: the state of the units the input names, from the
/// systemd on the bus at `bus`.
pub(crate) async fn unit_status(
    bus: &str,
    input: &BTreeMap<String, String>,
) -> Result<RunOutput, RunError> {
    let names = unit_names(input)?;
    let connection = zbus::connection::Builder::address(bus)
        .build()
        .await
        .map_err(|e| {
            RunError::new(format!(
                "cannot reach the system bus at {bus}: {e} (the agent's pod must mount the node's bus socket: Helm agent.systemd.enabled)"
            ))
        })?;
    let manager = ManagerProxy::new(&connection)
        .await
        .map_err(|e| RunError::caused_by(format!("systemd on {bus}: {e}"), e))?;
    let mut units = Vec::with_capacity(names.len());
    let mut lines = Vec::with_capacity(names.len());
    for name in &names {
        let unit = one_unit(&connection, &manager, name)
            .await
            .map_err(|e| RunError::caused_by(format!("systemd unit {name}: {e}"), e))?;
        lines.push(format!(
            "{name}: {} ({}/{})",
            unit["activeState"].as_str().unwrap_or("?"),
            unit["loadState"].as_str().unwrap_or("?"),
            unit["subState"].as_str().unwrap_or("?"),
        ));
        units.push(unit);
    }
    let encoded = serde_json::to_string(&units)
        .map_err(|e| RunError::caused_by(format!("cannot encode: {e}"), e))?;
    Ok(RunOutput {
        results: BTreeMap::from([(UNITS.to_owned(), encoded)]),
        output: lines.join("\n"),
    })
}

async fn one_unit(
    connection: &zbus::Connection,
    manager: &ManagerProxy<'_>,
    name: &str,
) -> zbus::Result<Value> {
    let path = manager.load_unit(name).await?;
    // Each run reads the properties once: a cache would subscribe to changes first.
    let unit = UnitProxy::builder(connection)
        .path(path.clone())
        .cache_properties(CacheProperties::No)
        .build()
        .await?;
    let load_state = unit.load_state().await?;
    let mut out = json!({
        "name": name,
        "id": unit.id().await?,
        "description": unit.description().await?,
        "loadState": load_state,
        "activeState": unit.active_state().await?,
        "subState": unit.sub_state().await?,
        "unitFileState": unit.unit_file_state().await.unwrap_or_default(),
        "activeEnterTimestamp": timestamp(unit.active_enter_timestamp().await?),
    });
    if name.ends_with(".service") && load_state == "loaded" {
        let service = ServiceProxy::builder(connection)
            .path(path)
            .cache_properties(CacheProperties::No)
            .build()
            .await?;
        out["mainPID"] = json!(service.main_pid().await?);
        out["restarts"] = json!(service.n_restarts().await?);
        out["result"] = json!(service.result().await?);
    }
    Ok(out)
}

/// systemd's microseconds since the epoch as RFC 3339; `None` for 0 (never).
fn timestamp(micros: u64) -> Option<String> {
    if micros == 0 {
        return None;
    }
    let micros = i64::try_from(micros).ok()?;
    jiff::Timestamp::from_microsecond(micros)
        .ok()
        .map(|t| t.round(jiff::Unit::Second).unwrap_or(t).to_string())
}
