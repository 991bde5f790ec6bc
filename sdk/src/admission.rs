//! Admission webhooks: validating and mutating bindings, and the answers a hook gives.
//!
//! A hook declares a [`ValidatingBinding`] or a [`MutatingBinding`] in
//! [`Hook::configure`](crate::Hook::configure); the API server then sends each matching
//! request as an AdmissionReview, which reaches [`Hook::handle`](crate::Hook::handle) in
//! a binding context of type `validating` or `mutating` ([`BindingContext::parse_review`]).
//! The hook answers with a [`ValidatingResponse`] in [`HookOutput::admission`]; a
//! mutating hook may add a JSON Patch ([`ValidatingResponse::json_patch`]) that the API
//! server applies to the object before it is stored. These are shell-operator's
//! `kubernetesValidating` and `kubernetesMutating` bindings and its
//! `$VALIDATING_RESPONSE_PATH`.
//!
//! ```
//! use operon_sdk::{HookConfig, MutatingBinding, WebhookRule};
//!
//! let config = HookConfig::new().mutating(
//!     MutatingBinding::new(
//!         "defaults.example.com",
//!         WebhookRule::new(&["CREATE"], &[""], &["v1"], &["pods"]).scope("Namespaced"),
//!     )
//!     .failure_policy("Ignore"),
//! );
//! assert_eq!(config.kubernetes_mutating[0].rules[0].resources, ["pods"]);
//! ```

use serde_json::Value;

use crate::Error;
use crate::hook::parse;
use crate::types::{
    BindingContext, HookConfig, HookOutput, LabelSelector, MatchCondition, MutatingBinding,
    ValidatingBinding, ValidatingResponse, WebhookRule,
};

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|item| (*item).to_owned()).collect()
}

impl HookConfig {
    /// Adds a validating admission webhook binding.
    ///
    /// ```
    /// use operon_sdk::{HookConfig, ValidatingBinding, WebhookRule};
    ///
    /// let rule = WebhookRule::new(&["CREATE", "UPDATE"], &[""], &["v1"], &["pods"]);
    /// let config = HookConfig::new().validating(ValidatingBinding::new("images.example.com", rule));
    /// assert_eq!(config.kubernetes_validating[0].name, "images.example.com");
    /// ```
    pub fn validating(mut self, binding: ValidatingBinding) -> Self {
        self.kubernetes_validating.push(binding);
        self
    }

    /// Adds a mutating admission webhook binding.
    ///
    /// ```
    /// use operon_sdk::{HookConfig, MutatingBinding, WebhookRule};
    ///
    /// let rule = WebhookRule::new(&["CREATE"], &[""], &["v1"], &["pods"]);
    /// let config = HookConfig::new().mutating(MutatingBinding::new("defaults.example.com", rule));
    /// assert_eq!(config.kubernetes_mutating.len(), 1);
    /// ```
    pub fn mutating(mut self, binding: MutatingBinding) -> Self {
        self.kubernetes_mutating.push(binding);
        self
    }
}

impl WebhookRule {
    /// The requests of these `operations` (`CREATE`, `UPDATE`, `DELETE`, `CONNECT`, `*`)
    /// on these `resources` (plural, e.g. `pods` or `pods/status`) of these API groups
    /// (`""` for the core group) and versions, in any scope.
    ///
    /// ```
    /// let rule = operon_sdk::WebhookRule::new(&["CREATE"], &["apps"], &["v1"], &["deployments"]);
    /// assert_eq!(rule.api_groups, ["apps"]);
    /// assert_eq!(rule.scope, None);
    /// ```
    pub fn new(
        operations: &[&str],
        api_groups: &[&str],
        api_versions: &[&str],
        resources: &[&str],
    ) -> Self {
        Self {
            operations: strings(operations),
            api_groups: strings(api_groups),
            api_versions: strings(api_versions),
            resources: strings(resources),
            scope: None,
        }
    }

    /// Only objects of this scope: `Cluster`, `Namespaced` or `*`.
    ///
    /// ```
    /// let rule = operon_sdk::WebhookRule::new(&["*"], &[""], &["v1"], &["pods"]).scope("Namespaced");
    /// assert_eq!(rule.scope.as_deref(), Some("Namespaced"));
    /// ```
    pub fn scope(mut self, scope: impl Into<String>) -> Self {
        self.scope = Some(scope.into());
        self
    }
}

impl ValidatingBinding {
    /// A validating webhook named `name` (a lowercase domain name, e.g.
    /// `images.example.com`) receiving the requests `rule` matches.
    ///
    /// ```
    /// use operon_sdk::{ValidatingBinding, WebhookRule};
    ///
    /// let binding = ValidatingBinding::new(
    ///     "images.example.com",
    ///     WebhookRule::new(&["CREATE"], &[""], &["v1"], &["pods"]),
    /// );
    /// assert_eq!(binding.rules.len(), 1);
    /// assert_eq!(binding.failure_policy, None);
    /// ```
    pub fn new(name: impl Into<String>, rule: WebhookRule) -> Self {
        Self {
            name: name.into(),
            rules: vec![rule],
            failure_policy: None,
            side_effects: None,
            label_selector: None,
            namespace: None,
            timeout_seconds: None,
            match_conditions: Vec::new(),
            group: None,
            include_snapshots_from: Vec::new(),
        }
    }
}

impl MutatingBinding {
    /// A mutating webhook named `name` (a lowercase domain name, e.g.
    /// `defaults.example.com`) receiving the requests `rule` matches.
    ///
    /// ```
    /// use operon_sdk::{MutatingBinding, WebhookRule};
    ///
    /// let binding = MutatingBinding::new(
    ///     "defaults.example.com",
    ///     WebhookRule::new(&["CREATE"], &[""], &["v1"], &["pods"]),
    /// );
    /// assert_eq!(binding.reinvocation_policy, None);
    /// ```
    pub fn new(name: impl Into<String>, rule: WebhookRule) -> Self {
        Self {
            name: name.into(),
            rules: vec![rule],
            failure_policy: None,
            side_effects: None,
            label_selector: None,
            namespace: None,
            timeout_seconds: None,
            match_conditions: Vec::new(),
            reinvocation_policy: None,
            group: None,
            include_snapshots_from: Vec::new(),
        }
    }

    /// `Never` (the default) or `IfNeeded`: whether the API server calls the hook again
    /// when a later webhook changed the object.
    ///
    /// ```
    /// # use operon_sdk::{MutatingBinding, WebhookRule};
    /// let binding = MutatingBinding::new("defaults.example.com", WebhookRule::new(&["*"], &[""], &["v1"], &["pods"]))
    ///     .reinvocation_policy("IfNeeded");
    /// assert_eq!(binding.reinvocation_policy.as_deref(), Some("IfNeeded"));
    /// ```
    pub fn reinvocation_policy(mut self, policy: impl Into<String>) -> Self {
        self.reinvocation_policy = Some(policy.into());
        self
    }
}

/// The setters validating and mutating bindings share (the two are distinct WIT records
/// with the same admission fields).
macro_rules! admission_setters {
    ($binding:ident, $name:literal) => {
        impl $binding {
            /// Receives the requests `rule` matches as well.
            ///
            #[doc = concat!("```\n# use operon_sdk::{", stringify!($binding), ", WebhookRule};\n",
                "let binding = ", stringify!($binding), "::new(\"", $name,
                "\", WebhookRule::new(&[\"CREATE\"], &[\"\"], &[\"v1\"], &[\"pods\"]))\n",
                "    .rule(WebhookRule::new(&[\"CREATE\"], &[\"apps\"], &[\"v1\"], &[\"deployments\"]));\n",
                "assert_eq!(binding.rules.len(), 2);\n```")]
            pub fn rule(mut self, rule: WebhookRule) -> Self {
                self.rules.push(rule);
                self
            }

            /// `Fail` (the default) or `Ignore`: what the API server does when the hook
            /// errs.
            ///
            #[doc = concat!("```\n# use operon_sdk::{", stringify!($binding), ", WebhookRule};\n",
                "let binding = ", stringify!($binding), "::new(\"", $name,
                "\", WebhookRule::new(&[\"*\"], &[\"\"], &[\"v1\"], &[\"pods\"]))\n",
                "    .failure_policy(\"Ignore\");\n",
                "assert_eq!(binding.failure_policy.as_deref(), Some(\"Ignore\"));\n```")]
            pub fn failure_policy(mut self, policy: impl Into<String>) -> Self {
                self.failure_policy = Some(policy.into());
                self
            }

            /// `None` (the default) or `NoneOnDryRun`.
            ///
            #[doc = concat!("```\n# use operon_sdk::{", stringify!($binding), ", WebhookRule};\n",
                "let binding = ", stringify!($binding), "::new(\"", $name,
                "\", WebhookRule::new(&[\"*\"], &[\"\"], &[\"v1\"], &[\"pods\"]))\n",
                "    .side_effects(\"NoneOnDryRun\");\n",
                "assert_eq!(binding.side_effects.as_deref(), Some(\"NoneOnDryRun\"));\n```")]
            pub fn side_effects(mut self, side_effects: impl Into<String>) -> Self {
                self.side_effects = Some(side_effects.into());
                self
            }

            /// How long the API server waits for an answer, 1 to 30 seconds (default 10).
            ///
            #[doc = concat!("```\n# use operon_sdk::{", stringify!($binding), ", WebhookRule};\n",
                "let binding = ", stringify!($binding), "::new(\"", $name,
                "\", WebhookRule::new(&[\"*\"], &[\"\"], &[\"v1\"], &[\"pods\"]))\n",
                "    .timeout_seconds(5);\n",
                "assert_eq!(binding.timeout_seconds, Some(5));\n```")]
            pub fn timeout_seconds(mut self, seconds: u32) -> Self {
                self.timeout_seconds = Some(seconds);
                self
            }

            /// Sends a request only when the CEL `expression` holds (Kubernetes 1.28 and
            /// later; Operon refuses to register it with an older API server).
            ///
            #[doc = concat!("```\n# use operon_sdk::{", stringify!($binding), ", WebhookRule};\n",
                "let binding = ", stringify!($binding), "::new(\"", $name,
                "\", WebhookRule::new(&[\"*\"], &[\"\"], &[\"v1\"], &[\"pods\"]))\n",
                "    .match_condition(\"not-kube-system\", \"request.namespace != 'kube-system'\");\n",
                "assert_eq!(binding.match_conditions[0].name, \"not-kube-system\");\n```")]
            pub fn match_condition(
                mut self,
                name: impl Into<String>,
                expression: impl Into<String>,
            ) -> Self {
                self.match_conditions.push(MatchCondition {
                    name: name.into(),
                    expression: expression.into(),
                });
                self
            }

            /// Only objects whose labels match.
            ///
            #[doc = concat!("```\n# use operon_sdk::{LabelSelector, ", stringify!($binding), ", WebhookRule};\n",
                "let binding = ", stringify!($binding), "::new(\"", $name,
                "\", WebhookRule::new(&[\"*\"], &[\"\"], &[\"v1\"], &[\"pods\"]))\n",
                "    .label_selector(LabelSelector::new().match_label(\"policy\", \"strict\"));\n",
                "assert!(binding.label_selector.is_some());\n```")]
            pub fn label_selector(mut self, selector: LabelSelector) -> Self {
                self.label_selector = Some(selector);
                self
            }
        }
    };
}

admission_setters!(ValidatingBinding, "images.example.com");
admission_setters!(MutatingBinding, "defaults.example.com");

impl ValidatingResponse {
    /// Admits the request.
    ///
    /// ```
    /// let answer = operon_sdk::ValidatingResponse::allow();
    /// assert!(answer.allowed && answer.patch.is_none());
    /// ```
    pub fn allow() -> Self {
        Self {
            allowed: true,
            message: None,
            warnings: Vec::new(),
            patch: None,
        }
    }

    /// Denies the request; kubectl shows `message` to the user.
    ///
    /// ```
    /// let answer = operon_sdk::ValidatingResponse::deny("images must come from registry.example.com");
    /// assert!(!answer.allowed);
    /// assert!(answer.message.unwrap().contains("registry.example.com"));
    /// ```
    pub fn deny(message: impl Into<String>) -> Self {
        Self {
            allowed: false,
            message: Some(message.into()),
            warnings: Vec::new(),
            patch: None,
        }
    }

    /// Adds a warning, shown to the user even when the request is admitted.
    ///
    /// ```
    /// let answer = operon_sdk::ValidatingResponse::allow().warning("the latest tag is not reproducible");
    /// assert_eq!(answer.warnings.len(), 1);
    /// ```
    pub fn warning(mut self, warning: impl Into<String>) -> Self {
        self.warnings.push(warning.into());
        self
    }

    /// For a mutating binding: the JSON Patch (RFC 6902) the API server applies to the
    /// object, one JSON value per operation. No operations means no patch at all, so a
    /// hook can pass whatever it computed without checking for the empty case.
    ///
    /// ```
    /// use operon_sdk::ValidatingResponse;
    /// use serde_json::json;
    ///
    /// let ops = [json!({"op": "add", "path": "/metadata/labels/tier", "value": "web"})];
    /// let answer = ValidatingResponse::allow().json_patch(&ops);
    /// assert_eq!(
    ///     answer.patch.as_deref(),
    ///     Some(r#"[{"op":"add","path":"/metadata/labels/tier","value":"web"}]"#)
    /// );
    /// assert_eq!(ValidatingResponse::allow().json_patch(&[]).patch, None);
    /// ```
    pub fn json_patch(mut self, operations: &[Value]) -> Self {
        self.patch = if operations.is_empty() {
            None
        } else {
            // Serializing a slice of JSON values cannot fail: every map key is a string.
            serde_json::to_string(operations).ok()
        };
        self
    }
}

impl HookOutput {
    /// The answer to a `validating` or `mutating` binding context.
    ///
    /// ```
    /// use operon_sdk::{HookOutput, ValidatingResponse};
    ///
    /// let output = HookOutput::admission(ValidatingResponse::allow());
    /// assert!(output.validating.unwrap().allowed);
    /// ```
    pub fn admission(response: ValidatingResponse) -> Self {
        Self {
            validating: Some(response),
            conversion: None,
        }
    }
}

impl BindingContext {
    /// The AdmissionReview (or ConversionReview) of a `validating`, `mutating` or
    /// `conversion` context, parsed; `None` for other types.
    ///
    /// ```
    /// use operon_sdk::{BindingContext, BindingType};
    ///
    /// let context = BindingContext {
    ///     binding: "defaults.example.com".into(),
    ///     type_: BindingType::Mutating,
    ///     group: None,
    ///     watch_event: None,
    ///     object: None,
    ///     objects: vec![],
    ///     snapshots: vec![],
    ///     review: Some(r#"{"request": {"uid": "1"}}"#.into()),
    /// };
    /// assert_eq!(context.parse_review().unwrap().unwrap()["request"]["uid"], "1");
    /// ```
    pub fn parse_review(&self) -> Result<Option<Value>, Error> {
        parse(self.review.as_deref(), "review")
    }
}
