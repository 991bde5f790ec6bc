//! Built-in processors: KubeDiag's agent serves operations of its own under
//! `/processor/<name>`, and an `httpServer` step with no address (and no port) reaches
//! them. Operon keeps those Operations working: such a step runs a built-in of the
//! process that runs the step (the node's agent, [`crate::node_ops`]) instead of a
//! request to a server. Where no built-ins are offered (the controller, `operon run`)
//! the step fails with a message saying where it runs.

use super::Runner;
use super::processors::{ProcessorError, Processors};
use operon_data::api::HttpServer;
use std::sync::Arc;

/// The path prefix of KubeDiag's built-in processors.
pub(crate) const PREFIX: &str = "/processor/";

/// The built-in processors one process offers, by path.
pub trait BuiltIns: Send + Sync + std::fmt::Debug {
    /// The runner of the built-in at `path` (e.g. `/processor/podListCollector`), or
    /// `None` when there is none. Built-ins written as wasm operations get their
    /// runner from `processors`, like any Operation.
    fn runner(
        &self,
        path: &str,
        processors: &Processors,
    ) -> Option<Result<Arc<dyn Runner>, ProcessorError>>;

    /// Every path served, for error messages.
    fn paths(&self) -> Vec<&'static str>;
}

/// The built-in path an `httpServer` processor names: one with neither address nor
/// port whose path is under [`PREFIX`], as KubeDiag's agent would serve it.
pub(crate) fn built_in_path(server: &HttpServer) -> Option<&str> {
    if server.address.is_some() || server.port.is_some() {
        return None;
    }
    server
        .path
        .as_deref()
        .filter(|path| path.starts_with(PREFIX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(address: Option<&str>, port: Option<i64>, path: Option<&str>) -> HttpServer {
        HttpServer {
            address: address.map(str::to_owned),
            port,
            path: path.map(str::to_owned),
            scheme: None,
        }
    }

    #[test]
    fn only_an_address_less_portless_processor_path_is_built_in() {
        let path = Some("/processor/podListCollector");
        assert_eq!(
            built_in_path(&server(None, None, path)),
            Some("/processor/podListCollector")
        );
        assert_eq!(built_in_path(&server(Some("10.0.0.1"), None, path)), None);
        assert_eq!(built_in_path(&server(None, Some(8090), path)), None);
        assert_eq!(built_in_path(&server(None, None, Some("/healthz"))), None);
        assert_eq!(built_in_path(&server(None, None, None)), None);
    }
}
