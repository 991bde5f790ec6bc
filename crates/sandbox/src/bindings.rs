//! Host bindings generated from `wit/`: the `operation` and `hook` worlds of every
//! published version of `operon:engine`.
//!
//! - `operon:engine@0.3.0` (`wit/`), the current contract: [`operation`], [`hook`],
//!   [`module_enabled`] and the interface re-exports at this module's root ([`types`],
//!   [`log`], [`values`], ...).
//! - `operon:engine@0.2.0` (`wit/legacy/v0.2.0/`), the contract before the runner
//!   context's cluster, the `values` interface and lifecycle bindings: [`v0_2`].
//! - `operon:engine@0.1.0` (`wit/legacy/v0.1.0/`), the contract before mutating
//!   bindings: [`v0_1`], so guests built against it keep loading and running.
//!
//! The host links the `log`, `kubernetes` and `metrics` interfaces of every version into
//! one linker; which typed exports a component gets is decided per component when it is
//! loaded (`super::module`). wit-parser reads only the `*.wit` files directly inside a
//! package directory (and `deps/`), so `wit/legacy/` does not leak into the current
//! package.
//!
//! Nothing here restates the contract by hand; every type a guest sees is generated
//! from the WIT files, and in each version the hook world reuses the operation world's
//! interfaces so both share one set of Rust types.

/// Bindings of the `operon:engine/operation@0.3.0` world and of the shared interfaces.
// The generated items carry the WIT documentation where it exists; the glue the
// macro adds around them has none to carry.
#[allow(missing_docs)]
pub mod operation {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "operon:engine/operation",
        imports: { default: trappable },
        exports: { default: async },
        additional_derives: [serde::Serialize, PartialEq],
    });
}

/// Bindings of the `operon:engine/hook@0.3.0` world (which alone imports `values`).
#[allow(missing_docs)]
pub mod hook {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "operon:engine/hook",
        imports: { default: trappable },
        exports: { default: async },
        with: {
            "operon:engine/types": super::operation::operon::engine::types,
            "operon:engine/log": super::operation::operon::engine::log,
            "operon:engine/kubernetes": super::operation::operon::engine::kubernetes,
            "operon:engine/metrics": super::operation::operon::engine::metrics,
        },
        additional_derives: [serde::Serialize, PartialEq],
    });
}

/// Bindings of the `operon:engine/module-enabled@0.3.0` world: an addon module's
/// `enabled` program.
#[allow(missing_docs)]
pub mod module_enabled {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "operon:engine/module-enabled",
        imports: { default: trappable },
        exports: { default: async },
        with: {
            "operon:engine/types": super::operation::operon::engine::types,
            "operon:engine/log": super::operation::operon::engine::log,
            "operon:engine/values": super::hook::operon::engine::values,
        },
    });
}

pub use hook::operon::engine::values;
pub use operation::operon::engine::{kubernetes, log, metrics, types};

/// Bindings of `operon:engine@0.2.0`, kept so that components built against it still
/// link: the same layout as the current version, one level down.
pub mod v0_2 {
    /// Bindings of the `operon:engine/operation@0.2.0` world and of its interfaces.
    #[allow(missing_docs)]
    pub mod operation {
        wasmtime::component::bindgen!({
            path: "../../wit/legacy/v0.2.0",
            world: "operon:engine/operation",
            imports: { default: trappable },
            exports: { default: async },
            // Only for tests comparing values; nothing serializes the legacy types.
            additional_derives: [PartialEq],
        });
    }

    /// Bindings of the `operon:engine/hook@0.2.0` world.
    #[allow(missing_docs)]
    pub mod hook {
        wasmtime::component::bindgen!({
            path: "../../wit/legacy/v0.2.0",
            world: "operon:engine/hook",
            imports: { default: trappable },
            exports: { default: async },
            with: {
                "operon:engine/types": super::operation::operon::engine::types,
                "operon:engine/log": super::operation::operon::engine::log,
                "operon:engine/kubernetes": super::operation::operon::engine::kubernetes,
                "operon:engine/metrics": super::operation::operon::engine::metrics,
            },
            additional_derives: [PartialEq],
        });
    }

    pub use operation::operon::engine::{kubernetes, log, metrics, types};
}

/// Bindings of `operon:engine@0.1.0`, kept so that components built against it still
/// link: the same layout as the current version, one level down.
pub mod v0_1 {
    /// Bindings of the `operon:engine/operation@0.1.0` world and of its interfaces.
    #[allow(missing_docs)]
    pub mod operation {
        wasmtime::component::bindgen!({
            path: "../../wit/legacy/v0.1.0",
            world: "operon:engine/operation",
            imports: { default: trappable },
            exports: { default: async },
            // Only for tests comparing values; nothing serializes the legacy types.
            additional_derives: [PartialEq],
        });
    }

    /// Bindings of the `operon:engine/hook@0.1.0` world.
    #[allow(missing_docs)]
    pub mod hook {
        wasmtime::component::bindgen!({
            path: "../../wit/legacy/v0.1.0",
            world: "operon:engine/hook",
            imports: { default: trappable },
            exports: { default: async },
            with: {
                "operon:engine/types": super::operation::operon::engine::types,
                "operon:engine/log": super::operation::operon::engine::log,
                "operon:engine/kubernetes": super::operation::operon::engine::kubernetes,
                "operon:engine/metrics": super::operation::operon::engine::metrics,
            },
            additional_derives: [PartialEq],
        });
    }

    pub use operation::operon::engine::{kubernetes, log, metrics, types};
}
