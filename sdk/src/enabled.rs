//! An addon module's `enabled` program as a component of the `module-enabled` world:
//! addon-operator's `enabled` script, which reads `$VALUES_PATH` and
//! `$CONFIG_VALUES_PATH` and writes `true` or `false` to `$MODULE_ENABLED_RESULT` (and
//! a reason to `$MODULE_ENABLED_REASON`).
//!
//! The host calls it during discovery, in module order, for a module its flags enable;
//! [`crate::values::get`] gives the values the script would read, with
//! `global.enabledModules` listing the modules enabled before it. It may not patch
//! values (the host fails the call). Build it as a `cdylib` for `wasm32-wasip2`, with
//! the module's `enabled` file being the component (executable, as any `enabled`
//! program):
//!
//! ```no_run
//! use operon_sdk::{EnabledResult, Error, ModuleEnabled, values};
//!
//! struct NeedsIngress;
//!
//! impl ModuleEnabled for NeedsIngress {
//!     fn enabled() -> Result<EnabledResult, Error> {
//!         let values = values::get()?;
//!         let enabled = values["global"]["enabledModules"]
//!             .as_array()
//!             .is_some_and(|m| m.iter().any(|m| m == "ingress"));
//!         Ok(if enabled {
//!             EnabledResult::yes()
//!         } else {
//!             EnabledResult::no("needs the ingress module")
//!         })
//!     }
//! }
//!
//! operon_sdk::module_enabled!(NeedsIngress);
//! ```

use crate::{EnabledResult, Error};

/// An `enabled` program: decides whether its module runs.
pub trait ModuleEnabled {
    /// Whether the module runs. An error fails the module's discovery, as a script
    /// exiting non-zero does.
    fn enabled() -> Result<EnabledResult, Error>;
}

impl EnabledResult {
    /// Keeps the module enabled.
    ///
    /// ```
    /// assert!(operon_sdk::EnabledResult::yes().enabled);
    /// ```
    pub fn yes() -> Self {
        Self {
            enabled: true,
            reason: None,
        }
    }

    /// Disables the module, saying why.
    ///
    /// ```
    /// let no = operon_sdk::EnabledResult::no("no ingress");
    /// assert!(!no.enabled && no.reason.as_deref() == Some("no ingress"));
    /// ```
    pub fn no(reason: impl Into<String>) -> Self {
        Self {
            enabled: false,
            reason: Some(reason.into()),
        }
    }
}

/// Exports a [`ModuleEnabled`] type as the component's `enabled` function.
#[macro_export]
macro_rules! module_enabled {
    ($program:ty) => {
        const _: () = {
            struct Export;

            impl $crate::__private::ModuleEnabledGuest for Export {
                fn enabled() -> ::core::result::Result<$crate::EnabledResult, ::std::string::String>
                {
                    <$program as $crate::ModuleEnabled>::enabled()
                        .map_err(::std::string::String::from)
                }
            }

            $crate::__private::module_enabled::__export_module_enabled!(
                Export with_types_in $crate::__private::module_enabled
            );
        };
    };
}
