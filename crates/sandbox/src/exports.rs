//! Calling a component's exports in the WIT version it was built against.
//!
//! A loaded component keeps the typed `InstancePre` of its version ([`OperationPre`],
//! [`HookPre`]). The calls themselves read the same in every version except for the
//! types and translations they use, so they are one trait per world
//! ([`OperationExports`], [`HookExports`]), implemented for each version's bindings by
//! one macro, and the sandbox's call path is written once, generic over the trait.

use super::bindings;
use super::convert;
use super::host::CallState;
use super::module::WitVersion;
use operon_data::model;
use wasmtime::Store;

/// Where a call failed: before the guest ran (instantiation) or while it ran.
pub(super) enum Phase {
    Start(wasmtime::Error),
    Call(wasmtime::Error),
}

/// What a call's body yields: the guest's own answer, or where the call failed.
pub(super) type Outcome<T> = Result<Result<T, String>, Phase>;

/// An operation component, prepared with the typed exports of its WIT version.
#[derive(Clone)]
pub(super) enum OperationPre {
    /// Built against `operon:engine@0.3.0`.
    V0_3(bindings::operation::OperationPre<CallState>),
    /// Built against `operon:engine@0.2.0`.
    V0_2(bindings::v0_2::operation::OperationPre<CallState>),
    /// Built against `operon:engine@0.1.0`.
    V0_1(bindings::v0_1::operation::OperationPre<CallState>),
}

impl OperationPre {
    pub(super) fn version(&self) -> WitVersion {
        match self {
            Self::V0_3(_) => WitVersion::V0_3,
            Self::V0_2(_) => WitVersion::V0_2,
            Self::V0_1(_) => WitVersion::V0_1,
        }
    }
}

/// A hook component, prepared with the typed exports of its WIT version.
#[derive(Clone)]
pub(super) enum HookPre {
    /// Built against `operon:engine@0.3.0`.
    V0_3(bindings::hook::HookPre<CallState>),
    /// Built against `operon:engine@0.2.0`.
    V0_2(bindings::v0_2::hook::HookPre<CallState>),
    /// Built against `operon:engine@0.1.0`.
    V0_1(bindings::v0_1::hook::HookPre<CallState>),
}

impl HookPre {
    pub(super) fn version(&self) -> WitVersion {
        match self {
            Self::V0_3(_) => WitVersion::V0_3,
            Self::V0_2(_) => WitVersion::V0_2,
            Self::V0_1(_) => WitVersion::V0_1,
        }
    }
}

/// A hook's configuration with its addon-operator lifecycle bindings (by name, with
/// their orders), which the model's configuration does not hold.
pub(super) type Configured = (model::HookConfig, Vec<(String, f64)>);

/// The `operation` world's export, in one WIT version.
pub(super) trait OperationExports {
    /// Instantiates the component in `store` and calls `run`.
    async fn run(
        &self,
        store: &mut Store<CallState>,
        input: model::OperationInput,
    ) -> Outcome<model::OperationOutput>;
}

/// The `hook` world's exports, in one WIT version.
pub(super) trait HookExports {
    /// This version's `hook-input`, made before the call from a borrow of the model
    /// input, which the caller keeps.
    type Input;

    /// The WIT input for `input`.
    fn input(input: &model::HookInput) -> Self::Input;

    /// Instantiates the component in `store` and calls `configure`.
    async fn configure(&self, store: &mut Store<CallState>) -> Outcome<Configured>;

    /// Instantiates the component in `store` and calls `handle`.
    async fn handle(
        &self,
        store: &mut Store<CallState>,
        input: &Self::Input,
    ) -> Outcome<model::HookOutput>;
}

/// Implements both worlds' traits for one version: its operation `Pre`, its hook `Pre`,
/// its bindings' `types` module and its translations (a path, as tokens).
macro_rules! impl_exports {
    ($operation:ty, $hook:ty, $types:ty, $($convert:tt)+) => {
        impl OperationExports for $operation {
            async fn run(
                &self,
                store: &mut Store<CallState>,
                input: model::OperationInput,
            ) -> Outcome<model::OperationOutput> {
                let input = $($convert)+::operation_input(input);
                let guest = self
                    .instantiate_async(&mut *store)
                    .await
                    .map_err(Phase::Start)?;
                let output = guest
                    .call_run(&mut *store, &input)
                    .await
                    .map_err(Phase::Call)?;
                Ok(output.map($($convert)+::operation_output))
            }
        }

        impl HookExports for $hook {
            type Input = $types;

            fn input(input: &model::HookInput) -> Self::Input {
                $($convert)+::hook_input(input)
            }

            async fn configure(&self, store: &mut Store<CallState>) -> Outcome<Configured> {
                let guest = self
                    .instantiate_async(&mut *store)
                    .await
                    .map_err(Phase::Start)?;
                let config = guest
                    .call_configure(&mut *store)
                    .await
                    .map_err(Phase::Call)?;
                Ok(config.map(|config| {
                    let lifecycle = $($convert)+::lifecycle(&config);
                    ($($convert)+::hook_config(config), lifecycle)
                }))
            }

            async fn handle(
                &self,
                store: &mut Store<CallState>,
                input: &Self::Input,
            ) -> Outcome<model::HookOutput> {
                let guest = self
                    .instantiate_async(&mut *store)
                    .await
                    .map_err(Phase::Start)?;
                let output = guest
                    .call_handle(&mut *store, input)
                    .await
                    .map_err(Phase::Call)?;
                Ok(output.map($($convert)+::hook_output))
            }
        }
    };
}

impl_exports!(
    bindings::operation::OperationPre<CallState>,
    bindings::hook::HookPre<CallState>,
    bindings::types::HookInput,
    convert
);

impl_exports!(
    bindings::v0_2::operation::OperationPre<CallState>,
    bindings::v0_2::hook::HookPre<CallState>,
    bindings::v0_2::types::HookInput,
    convert::v0_2
);

impl_exports!(
    bindings::v0_1::operation::OperationPre<CallState>,
    bindings::v0_1::hook::HookPre<CallState>,
    bindings::v0_1::types::HookInput,
    convert::v0_1
);
