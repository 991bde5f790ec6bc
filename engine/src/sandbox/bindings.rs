//! Host bindings generated from `wit/`: the `operation` and `hook` worlds.
//!
//! Nothing here restates the contract by hand; every type a guest sees is generated
//! from the WIT files, and the hook world reuses the operation world's interfaces so
//! both share one set of Rust types.

/// Bindings of the `operon:engine/operation` world and of the shared interfaces.
// The generated items carry the WIT documentation where it exists; the glue the
// macro adds around them has none to carry.
#[allow(missing_docs)]
pub mod operation {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "operon:engine/operation",
        imports: { default: trappable },
        exports: { default: async },
        additional_derives: [serde::Serialize, PartialEq],
    });
}

/// Bindings of the `operon:engine/hook` world.
#[allow(missing_docs)]
pub mod hook {
    wasmtime::component::bindgen!({
        path: "../wit",
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

pub use operation::operon::engine::{kubernetes, log, metrics, types};
