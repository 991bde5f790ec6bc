//! The bindings wit-bindgen generates from `wit/` (`operon:engine@0.3.0`), one module
//! per world.
//!
//! Only the current version is generated: a guest is built against one version, and the
//! host keeps linking the older ones (`wit/legacy/`), so an SDK upgrade is the guest's
//! choice, never forced by the host.
//!
//! Both worlds import the same interfaces, so `hook` reuses the import interfaces and types
//! generated for `operation` through `with`: a guest sees one `RunnerContext`, one
//! `PatchOperation`, whichever world it exports. The export macros are public (and hidden)
//! because `operation!` and `hook!` expand to them inside the guest crate, and they name
//! these modules through `::operon_sdk`, which is why `lib.rs` declares
//! `extern crate self as operon_sdk`.

// The generated glue lowers and lifts values through raw pointers into linear memory:
// unsafe is inherent to it, and it is confined to these generated modules.
#![allow(unsafe_code)]
// The generated `Guest` traits, export helpers and runtime shims carry no docs of their own;
// every type and function that comes from the WIT files is documented there.
#![allow(missing_docs)]

/// The `operation` world: imports plus `export run`.
pub mod operation {
    wit_bindgen::generate!({
        path: "../wit",
        world: "operation",
        generate_all,
        // PartialEq lets guest unit tests compare the operations a builder produces.
        additional_derives: [PartialEq],
        additional_type_attributes: {
            "operon:engine/types@0.3.0/runner-context": [#[derive(Default)]],
            "operon:engine/types@0.3.0/operation-input": [#[derive(Default)]],
            "operon:engine/types@0.3.0/operation-output": [#[derive(Default)]],
            "operon:engine/types@0.3.0/hook-config": [#[derive(Default)]],
            "operon:engine/types@0.3.0/hook-settings": [#[derive(Default)]],
            "operon:engine/types@0.3.0/hook-input": [#[derive(Default)]],
            "operon:engine/types@0.3.0/hook-output": [#[derive(Default)]],
            "operon:engine/types@0.3.0/label-selector": [#[derive(Default)]],
            "operon:engine/types@0.3.0/namespace-selector": [#[derive(Default)]],
        },
        pub_export_macro: true,
        export_macro_name: "__export_operation",
        default_bindings_module: "::operon_sdk::__private::operation",
        // Guests depend on the SDK, not on wit-bindgen: the runtime is reached through it.
        runtime_path: "::operon_sdk::__private::wit_bindgen::rt",
    });
}

/// The `hook` world: the same imports plus `export configure` and `export handle`.
pub mod hook {
    wit_bindgen::generate!({
        path: "../wit",
        world: "hook",
        with: {
            "operon:engine/types@0.3.0": crate::bindings::operation::operon::engine::types,
            "operon:engine/log@0.3.0": crate::bindings::operation::operon::engine::log,
            "operon:engine/kubernetes@0.3.0": crate::bindings::operation::operon::engine::kubernetes,
            "operon:engine/metrics@0.3.0": crate::bindings::operation::operon::engine::metrics,
        },
        pub_export_macro: true,
        export_macro_name: "__export_hook",
        default_bindings_module: "::operon_sdk::__private::hook",
        runtime_path: "::operon_sdk::__private::wit_bindgen::rt",
    });
}

/// The `module-enabled` world: `log` and `values` plus `export enabled`.
pub mod module_enabled {
    wit_bindgen::generate!({
        path: "../wit",
        world: "module-enabled",
        with: {
            "operon:engine/types@0.3.0": crate::bindings::operation::operon::engine::types,
            "operon:engine/log@0.3.0": crate::bindings::operation::operon::engine::log,
            "operon:engine/values@0.3.0": crate::bindings::hook::operon::engine::values,
        },
        pub_export_macro: true,
        export_macro_name: "__export_module_enabled",
        default_bindings_module: "::operon_sdk::__private::module_enabled",
        runtime_path: "::operon_sdk::__private::wit_bindgen::rt",
    });
}
