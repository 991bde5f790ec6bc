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

    /// Receives the requests `rule` matches as well.
    ///
    /// ```
    /// use operon_sdk::{ValidatingBinding, WebhookRule};
    ///
    /// let binding = ValidatingBinding::new("images.example.com", WebhookRule::new(&["CREATE"], &[""], &["v1"], &["pods"]))
    ///     .rule(WebhookRule::new(&["CREATE"], &["apps"], &["v1"], &["deployments"]));
    /// assert_eq!(binding.rules.len(), 2);
    /// ```
    pub fn rule(mut self, rule: WebhookRule) -> Self {
        self.rules.push(rule);
        self
    }

    /// `Fail` (the default) or `Ignore`: what the API server does when the hook errs.
    ///
    /// ```
    /// # use operon_sdk::{ValidatingBinding, WebhookRule};
    /// let binding = ValidatingBinding::new("images.example.com", WebhookRule::new(&["*"], &[""], &["v1"], &["pods"]))
    ///     .failure_policy("Ignore");
    /// assert_eq!(binding.failure_policy.as_deref(), Some("Ignore"));
    /// ```
    pub fn failure_policy(mut self, policy: impl Into<String>) -> Self {
        self.failure_policy = Some(policy.into());
        self
    }

    /// `None` (the default) or `NoneOnDryRun`.
    ///
    /// ```
    /// # use operon_sdk::{ValidatingBinding, WebhookRule};
    /// let binding = ValidatingBinding::new("images.example.com", WebhookRule::new(&["*"], &[""], &["v1"], &["pods"]))
    ///     .side_effects("NoneOnDryRun");
    /// assert_eq!(binding.side_effects.as_deref(), Some("NoneOnDryRun"));
    /// ```
    pub fn side_effects(mut self, side_effects: impl Into<String>) -> Self {
        self.side_effects = Some(side_effects.into());
        self
    }

    /// How long the API server waits for an answer, 1 to 30 seconds (default 10).
    ///
    /// ```
    /// # use operon_sdk::{ValidatingBinding, WebhookRule};
    /// let binding = ValidatingBinding::new("images.example.com", WebhookRule::new(&["*"], &[""], &["v1"], &["pods"]))
    ///     .timeout_seconds(5);
    /// assert_eq!(binding.timeout_seconds, Some(5));
    /// ```
    pub fn timeout_seconds(mut self, seconds: u32) -> Self {
        self.timeout_seconds = Some(seconds);
        self
    }

    /// Sends a request only when the CEL `expression` holds (Kubernetes 1.28 and later).
    ///
    /// ```
    /// # use operon_sdk::{ValidatingBinding, WebhookRule};
    /// let binding = ValidatingBinding::new("images.example.com", WebhookRule::new(&["*"], &[""], &["v1"], &["pods"]))
    ///     .match_condition("not-kube-system", "request.namespace != 'kube-system'");
    /// assert_eq!(binding.match_conditions[0].name, "not-kube-system");
    /// ```
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
    /// ```
    /// use operon_sdk::{LabelSelector, ValidatingBinding, WebhookRule};
    ///
    /// let binding = ValidatingBinding::new("images.example.com", WebhookRule::new(&["*"], &[""], &["v1"], &["pods"]))
    ///     .label_selector(LabelSelector::new().match_label("policy", "strict"));
    /// assert!(binding.label_selector.is_some());
    /// ```
    pub fn label_selector(mut self, selector: LabelSelector) -> Self {
        self.label_selector = Some(selector);
        self
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

    /// Receives the requests `rule` matches as well.
    ///
    /// ```
    /// use operon_sdk::{MutatingBinding, WebhookRule};
    ///
    /// let binding = MutatingBinding::new("defaults.example.com", WebhookRule::new(&["CREATE"], &[""], &["v1"], &["pods"]))
    ///     .rule(WebhookRule::new(&["CREATE"], &["apps"], &["v1"], &["deployments"]));
    /// assert_eq!(binding.rules.len(), 2);
    /// ```
    pub fn rule(mut self, rule: WebhookRule) -> Self {
        self.rules.push(rule);
        self
    }

    /// `Fail` (the default) or `Ignore`: what the API server does when the hook errs.
    ///
    /// ```
    /// # use operon_sdk::{MutatingBinding, WebhookRule};
    /// let binding = MutatingBinding::new("defaults.example.com", WebhookRule::new(&["*"], &[""], &["v1"], &["pods"]))
    ///     .failure_policy("Ignore");
    /// assert_eq!(binding.failure_policy.as_deref(), Some("Ignore"));
    /// ```
    pub fn failure_policy(mut self, policy: impl Into<String>) -> Self {
        self.failure_policy = Some(policy.into());
        self
    }

    /// `None` (the default) or `NoneOnDryRun`.
    ///
    /// ```
    /// # use operon_sdk::{MutatingBinding, WebhookRule};
    /// let binding = MutatingBinding::new("defaults.example.com", WebhookRule::new(&["*"], &[""], &["v1"], &["pods"]))
    ///     .side_effects("NoneOnDryRun");
    /// assert_eq!(binding.side_effects.as_deref(), Some("NoneOnDryRun"));
    /// ```
    pub fn side_effects(mut self, side_effects: impl Into<String>) -> Self {
        self.side_effects = Some(side_effects.into());
        self
    }

    /// How long the API server waits for an answer, 1 to 30 seconds (default 10).
    ///
    /// ```
    /// # use operon_sdk::{MutatingBinding, WebhookRule};
    /// let binding = MutatingBinding::new("defaults.example.com", WebhookRule::new(&["*"], &[""], &["v1"], &["pods"]))
    ///     .timeout_seconds(3);
    /// assert_eq!(binding.timeout_seconds, Some(3));
    /// ```
    pub fn timeout_seconds(mut self, seconds: u32) -> Self {
        self.timeout_seconds = Some(seconds);
        self
    }

    /// Sends a request only when the CEL `expression` holds (Kubernetes 1.28 and later).
    ///
    /// ```
    /// # use operon_sdk::{MutatingBinding, WebhookRule};
    /// let binding = MutatingBinding::new("defaults.example.com", WebhookRule::new(&["*"], &[""], &["v1"], &["pods"]))
    ///     .match_condition("has-containers", "size(object.spec.containers) > 0");
    /// assert_eq!(binding.match_conditions.len(), 1);
    /// ```
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

    /// Only objects whose labels match.
    ///
    /// ```
    /// use operon_sdk::{LabelSelector, MutatingBinding, WebhookRule};
    ///
    /// let binding = MutatingBinding::new("defaults.example.com", WebhookRule::new(&["*"], &[""], &["v1"], &["pods"]))
    ///     .label_selector(LabelSelector::new().match_label("defaults", "on"));
    /// assert!(binding.label_selector.is_some());
    /// ```
    pub fn label_selector(mut self, selector: LabelSelector) -> Self {
        self.label_selector = Some(selector);
        self
    }
}

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
