//! Hooks: programs bound to cluster events and schedules, written as an impl of [`Hook`].
//!
//! A hook tells the host what to watch once, in [`Hook::configure`], and is then run with
//! the binding contexts that fired, in [`Hook::handle`]. The configuration mirrors
//! shell-operator's `configVersion: v1`; the builders here cover the common settings and
//! every field stays public for the rest. Admission webhook bindings and their answers
//! have their own module, [`admission`](crate::admission).

use serde_json::Value;

use crate::Error;
use crate::types::{
    BindingContext, BindingType, HookConfig, HookInput, HookOutput, HookSettings,
    KubernetesBinding, LabelSelector, NamespaceSelector, ObjectAndFilter, ScheduleBinding,
    Snapshot, WatchEvent,
};

/// A hook: its configuration and what it does when a binding fires.
///
/// ```standalone_crate
/// use operon_sdk::{Error, Hook, HookConfig, HookInput, HookOutput, ScheduleBinding};
///
/// struct Nightly;
///
/// impl Hook for Nightly {
///     fn configure() -> Result<HookConfig, Error> {
///         Ok(HookConfig::new().schedule(ScheduleBinding::new("nightly", "0 3 * * *")))
///     }
///
///     fn handle(input: HookInput) -> Result<HookOutput, Error> {
///         // ... do the nightly work for each binding context ...
///         let _ = input.binding_contexts;
///         Ok(HookOutput::default())
///     }
/// }
///
/// operon_sdk::hook!(Nightly);
/// # fn main() {}
/// ```
pub trait Hook {
    /// Returns the bindings; called once when the hook is loaded.
    ///
    /// ```
    /// # use operon_sdk::{Error, Hook, HookConfig, HookInput, HookOutput};
    /// struct AtStartup;
    ///
    /// impl Hook for AtStartup {
    ///     fn configure() -> Result<HookConfig, Error> {
    ///         Ok(HookConfig::new().on_startup(10))
    ///     }
    /// #   fn handle(_: HookInput) -> Result<HookOutput, Error> { Ok(HookOutput::default()) }
    /// }
    /// # assert_eq!(AtStartup::configure().unwrap().on_startup, Some(10));
    /// ```
    fn configure() -> Result<HookConfig, Error>;

    /// Handles one run. An error fails the run, which the host retries unless its binding
    /// allows failure.
    ///
    /// ```
    /// # use operon_sdk::{Error, Hook, HookConfig, HookInput, HookOutput};
    /// struct Counting;
    ///
    /// impl Hook for Counting {
    /// #   fn configure() -> Result<HookConfig, Error> { Ok(HookConfig::new()) }
    ///     fn handle(input: HookInput) -> Result<HookOutput, Error> {
    ///         if input.binding_contexts.is_empty() {
    ///             operon_sdk::bail!("run without binding contexts");
    ///         }
    ///         Ok(HookOutput::default())
    ///     }
    /// }
    /// # assert!(Counting::handle(HookInput::default()).is_err());
    /// ```
    fn handle(input: HookInput) -> Result<HookOutput, Error>;
}

/// Exports a type implementing [`Hook`] as the component's `configure` and `handle`.
///
/// Use it once, at the top level of a `cdylib` crate built for `wasm32-wasip2`.
///
/// ```standalone_crate
/// use operon_sdk::{Error, Hook, HookConfig, HookInput, HookOutput, KubernetesBinding};
///
/// struct WatchPods;
///
/// impl Hook for WatchPods {
///     fn configure() -> Result<HookConfig, Error> {
///         Ok(HookConfig::new().kubernetes(KubernetesBinding::new("pods", "Pod")))
///     }
///
///     fn handle(_input: HookInput) -> Result<HookOutput, Error> {
///         Ok(HookOutput::default())
///     }
/// }
///
/// operon_sdk::hook!(WatchPods);
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! hook {
    ($hook:ty) => {
        // The export macro wants a type to implement the generated trait on; a private one,
        // in an anonymous const, keeps that type out of the guest's namespace.
        const _: () = {
            struct Export;

            impl $crate::__private::HookGuest for Export {
                fn configure() -> ::core::result::Result<$crate::HookConfig, ::std::string::String>
                {
                    <$hook as $crate::Hook>::configure().map_err(::std::string::String::from)
                }

                fn handle(
                    input: $crate::HookInput,
                ) -> ::core::result::Result<$crate::HookOutput, ::std::string::String> {
                    <$hook as $crate::Hook>::handle(input).map_err(::std::string::String::from)
                }
            }

    $crate::__private::hook::__export_hook!(Export with_types_in $crate::__private::hook);
        };
    };
}

impl HookConfig {
    /// A configuration with no bindings.
    ///
    /// ```
    /// let config = operon_sdk::HookConfig::new();
    /// assert!(config.kubernetes.is_empty() && config.schedule.is_empty());
    /// assert!(config.kubernetes_validating.is_empty() && config.kubernetes_mutating.is_empty());
    /// assert_eq!(config.on_startup, None);
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs the hook once at start; hooks run in ascending `order`, then by name.
    ///
    /// ```
    /// let config = operon_sdk::HookConfig::new().on_startup(5);
    /// assert_eq!(config.on_startup, Some(5));
    /// ```
    pub fn on_startup(mut self, order: i32) -> Self {
        self.on_startup = Some(order);
        self
    }

    /// Adds an addon-operator lifecycle binding (`beforeHelm`, `afterAll`, ...) with its
    /// order, for the hooks of addon modules and global hooks.
    ///
    /// ```
    /// use operon_sdk::{HookConfig, LifecycleBinding};
    ///
    /// let config = HookConfig::new().lifecycle(LifecycleBinding::BeforeHelm, 10.0);
    /// assert_eq!(config.lifecycle[0].order, 10.0);
    /// ```
    pub fn lifecycle(mut self, binding: crate::LifecycleBinding, order: f64) -> Self {
        self.lifecycle
            .push(crate::types::LifecycleOrder { binding, order });
        self
    }

    /// Adds a crontab binding.
    ///
    /// ```
    /// use operon_sdk::{HookConfig, ScheduleBinding};
    ///
    /// let config = HookConfig::new().schedule(ScheduleBinding::new("hourly", "0 * * * *"));
    /// assert_eq!(config.schedule.len(), 1);
    /// ```
    pub fn schedule(mut self, binding: ScheduleBinding) -> Self {
        self.schedule.push(binding);
        self
    }

    /// Adds a watch binding.
    ///
    /// ```
    /// use operon_sdk::{HookConfig, KubernetesBinding};
    ///
    /// let config = HookConfig::new().kubernetes(KubernetesBinding::new("nodes", "Node"));
    /// assert_eq!(config.kubernetes[0].kind, "Node");
    /// ```
    pub fn kubernetes(mut self, binding: KubernetesBinding) -> Self {
        self.kubernetes.push(binding);
        self
    }

    /// Sets the hook-wide settings: rate limit and per-run budget.
    ///
    /// ```
    /// use operon_sdk::{HookConfig, HookSettings};
    ///
    /// let config = HookConfig::new().settings(HookSettings {
    ///     timeout_ms: Some(5_000),
    ///     ..HookSettings::default()
    /// });
    /// assert_eq!(config.settings.unwrap().timeout_ms, Some(5_000));
    /// ```
    pub fn settings(mut self, settings: HookSettings) -> Self {
        self.settings = Some(settings);
        self
    }
}

impl KubernetesBinding {
    /// Watches objects of `kind` (e.g. `Pod`) in every namespace, running on all events
    /// and on synchronization.
    ///
    /// ```
    /// let binding = operon_sdk::KubernetesBinding::new("pods", "Pod");
    /// assert_eq!((binding.name.as_str(), binding.kind.as_str()), ("pods", "Pod"));
    /// assert_eq!(binding.execute_hook_on_event, None);
    /// ```
    pub fn new(name: impl Into<String>, kind: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            api_version: None,
            kind: kind.into(),
            execute_hook_on_event: None,
            execute_hook_on_synchronization: None,
            wait_for_synchronization: None,
            keep_full_objects_in_memory: None,
            name_selector: None,
            label_selector: None,
            field_selector: None,
            namespace: None,
            jq_filter: None,
            allow_failure: false,
            queue: None,
            group: None,
            include_snapshots_from: Vec::new(),
        }
    }

    /// Names the `apiVersion` of the objects, e.g. `apps/v1`.
    ///
    /// ```
    /// let binding = operon_sdk::KubernetesBinding::new("deploys", "Deployment").api_version("apps/v1");
    /// assert_eq!(binding.api_version.as_deref(), Some("apps/v1"));
    /// ```
    pub fn api_version(mut self, api_version: impl Into<String>) -> Self {
        self.api_version = Some(api_version.into());
        self
    }

    /// Filters each object with jq; events whose filter result did not change are skipped.
    ///
    /// ```
    /// let binding = operon_sdk::KubernetesBinding::new("pods", "Pod").jq_filter(".metadata.labels");
    /// assert_eq!(binding.jq_filter.as_deref(), Some(".metadata.labels"));
    /// ```
    pub fn jq_filter(mut self, filter: impl Into<String>) -> Self {
        self.jq_filter = Some(filter.into());
        self
    }

    /// Runs the hook only on these watch events; an empty list only keeps a snapshot.
    ///
    /// ```
    /// use operon_sdk::{KubernetesBinding, WatchEvent};
    ///
    /// let binding = KubernetesBinding::new("pods", "Pod")
    ///     .execute_hook_on_event(&[WatchEvent::Added, WatchEvent::Modified]);
    /// assert_eq!(binding.execute_hook_on_event.unwrap().len(), 2);
    /// ```
    pub fn execute_hook_on_event(mut self, events: &[WatchEvent]) -> Self {
        self.execute_hook_on_event = Some(events.to_vec());
        self
    }

    /// Whether the hook runs once with all existing objects at start (default true).
    ///
    /// ```
    /// let binding = operon_sdk::KubernetesBinding::new("pods", "Pod")
    ///     .execute_hook_on_synchronization(false);
    /// assert_eq!(binding.execute_hook_on_synchronization, Some(false));
    /// ```
    pub fn execute_hook_on_synchronization(mut self, execute: bool) -> Self {
        self.execute_hook_on_synchronization = Some(execute);
        self
    }

    /// Whether full objects are kept, or only their filter results (default true).
    ///
    /// ```
    /// let binding = operon_sdk::KubernetesBinding::new("pods", "Pod")
    ///     .jq_filter(".status.phase")
    ///     .keep_full_objects_in_memory(false);
    /// assert_eq!(binding.keep_full_objects_in_memory, Some(false));
    /// ```
    pub fn keep_full_objects_in_memory(mut self, keep: bool) -> Self {
        self.keep_full_objects_in_memory = Some(keep);
        self
    }

    /// Watches only these namespaces.
    ///
    /// ```
    /// let binding = operon_sdk::KubernetesBinding::new("pods", "Pod").namespaces(&["shop", "ops"]);
    /// let names = binding.namespace.unwrap().name_selector.unwrap();
    /// assert_eq!(names, ["shop", "ops"]);
    /// ```
    pub fn namespaces(mut self, names: &[&str]) -> Self {
        let selector = self
            .namespace
            .get_or_insert_with(NamespaceSelector::default);
        selector.name_selector = Some(names.iter().map(|name| (*name).to_owned()).collect());
        self
    }

    /// Watches only objects whose labels match.
    ///
    /// ```
    /// use operon_sdk::{KubernetesBinding, LabelSelector};
    ///
    /// let binding = KubernetesBinding::new("web", "Pod")
    ///     .label_selector(LabelSelector::new().match_label("app", "web"));
    /// assert_eq!(binding.label_selector.unwrap().match_labels.len(), 1);
    /// ```
    pub fn label_selector(mut self, selector: LabelSelector) -> Self {
        self.label_selector = Some(selector);
        self
    }

    /// Logs and counts failed runs instead of retrying them.
    ///
    /// ```
    /// let binding = operon_sdk::KubernetesBinding::new("pods", "Pod").allow_failure();
    /// assert!(binding.allow_failure);
    /// ```
    pub fn allow_failure(mut self) -> Self {
        self.allow_failure = true;
        self
    }

    /// Sends the runs to the named queue instead of `main`.
    ///
    /// ```
    /// let binding = operon_sdk::KubernetesBinding::new("pods", "Pod").queue("slow");
    /// assert_eq!(binding.queue.as_deref(), Some("slow"));
    /// ```
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = Some(queue.into());
        self
    }

    /// Puts the binding in a group; grouped bindings receive `group` contexts.
    ///
    /// ```
    /// let binding = operon_sdk::KubernetesBinding::new("pods", "Pod").group("inventory");
    /// assert_eq!(binding.group.as_deref(), Some("inventory"));
    /// ```
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = Some(group.into());
        self
    }

    /// Adds the snapshots of these kubernetes bindings to this binding's contexts.
    ///
    /// ```
    /// let binding = operon_sdk::KubernetesBinding::new("pods", "Pod").include_snapshots_from(&["nodes"]);
    /// assert_eq!(binding.include_snapshots_from, ["nodes"]);
    /// ```
    pub fn include_snapshots_from(mut self, bindings: &[&str]) -> Self {
        self.include_snapshots_from = bindings.iter().map(|name| (*name).to_owned()).collect();
        self
    }
}

impl ScheduleBinding {
    /// Runs the hook on `crontab`: 5 fields, or 6 with seconds first.
    ///
    /// ```
    /// let binding = operon_sdk::ScheduleBinding::new("every-minute", "* * * * *");
    /// assert_eq!(binding.crontab, "* * * * *");
    /// ```
    pub fn new(name: impl Into<String>, crontab: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            crontab: crontab.into(),
            allow_failure: false,
            queue: None,
            group: None,
            include_snapshots_from: Vec::new(),
        }
    }

    /// Logs and counts failed runs instead of retrying them.
    ///
    /// ```
    /// let binding = operon_sdk::ScheduleBinding::new("hourly", "0 * * * *").allow_failure();
    /// assert!(binding.allow_failure);
    /// ```
    pub fn allow_failure(mut self) -> Self {
        self.allow_failure = true;
        self
    }

    /// Sends the runs to the named queue instead of `main`.
    ///
    /// ```
    /// let binding = operon_sdk::ScheduleBinding::new("hourly", "0 * * * *").queue("reports");
    /// assert_eq!(binding.queue.as_deref(), Some("reports"));
    /// ```
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = Some(queue.into());
        self
    }

    /// Puts the binding in a group; grouped bindings receive `group` contexts.
    ///
    /// ```
    /// let binding = operon_sdk::ScheduleBinding::new("hourly", "0 * * * *").group("inventory");
    /// assert_eq!(binding.group.as_deref(), Some("inventory"));
    /// ```
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = Some(group.into());
        self
    }

    /// Adds the snapshots of these kubernetes bindings to this binding's contexts.
    ///
    /// ```
    /// let binding = operon_sdk::ScheduleBinding::new("resync", "*/10 * * * *")
    ///     .include_snapshots_from(&["pods"]);
    /// assert_eq!(binding.include_snapshots_from, ["pods"]);
    /// ```
    pub fn include_snapshots_from(mut self, bindings: &[&str]) -> Self {
        self.include_snapshots_from = bindings.iter().map(|name| (*name).to_owned()).collect();
        self
    }
}

impl LabelSelector {
    /// A selector that matches every object.
    ///
    /// ```
    /// assert!(operon_sdk::LabelSelector::new().match_labels.is_empty());
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Requires the label `key` with exactly `value`.
    ///
    /// ```
    /// let selector = operon_sdk::LabelSelector::new().match_label("tier", "web");
    /// assert_eq!(selector.match_labels, [("tier".to_string(), "web".to_string())]);
    /// ```
    pub fn match_label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.match_labels.push((key.into(), value.into()));
        self
    }
}

impl BindingContext {
    /// The objects this context reports: the object of an `event`, every object of a
    /// `synchronization`, none for other types (read their [`snapshot`](Self::snapshot)s).
    ///
    /// ```
    /// use operon_sdk::HookInput;
    ///
    /// fn count_objects(input: &HookInput) -> usize {
    ///     input.binding_contexts.iter().map(|context| context.objects_reported().count()).sum()
    /// }
    /// assert_eq!(count_objects(&HookInput::default()), 0);
    /// ```
    pub fn objects_reported(&self) -> impl Iterator<Item = &ObjectAndFilter> {
        let objects: &[ObjectAndFilter] = match self.type_ {
            BindingType::Event => self.object.as_slice(),
            BindingType::Synchronization => &self.objects,
            _ => &[],
        };
        objects.iter()
    }

    /// The snapshot of the kubernetes binding named `binding`, when this context has one.
    ///
    /// ```
    /// use operon_sdk::BindingContext;
    ///
    /// fn pods_seen(context: &BindingContext) -> usize {
    ///     context.snapshot("pods").map_or(0, |snapshot| snapshot.objects.len())
    /// }
    /// # let _ = pods_seen;
    /// ```
    pub fn snapshot(&self, binding: &str) -> Option<&Snapshot> {
        self.snapshots
            .iter()
            .find(|snapshot| snapshot.binding == binding)
    }
}

impl ObjectAndFilter {
    /// The full object parsed as JSON; `None` when the binding drops full objects.
    ///
    /// ```
    /// use operon_sdk::ObjectAndFilter;
    ///
    /// let pod = ObjectAndFilter {
    ///     object: Some(r#"{"metadata": {"name": "web-0"}}"#.into()),
    ///     filter_result: None,
    /// };
    /// let object = pod.parse_object().unwrap().unwrap();
    /// assert_eq!(object["metadata"]["name"], "web-0");
    /// ```
    pub fn parse_object(&self) -> Result<Option<Value>, Error> {
        parse(self.object.as_deref(), "object")
    }

    /// The jq filter result parsed as JSON; `None` when the binding has no filter.
    ///
    /// ```
    /// use operon_sdk::ObjectAndFilter;
    ///
    /// let pod = ObjectAndFilter { object: None, filter_result: Some(r#"{"app": "web"}"#.into()) };
    /// assert_eq!(pod.parse_filter_result().unwrap().unwrap()["app"], "web");
    /// ```
    pub fn parse_filter_result(&self) -> Result<Option<Value>, Error> {
        parse(self.filter_result.as_deref(), "filter result")
    }
}

pub(crate) fn parse(json: Option<&str>, what: &str) -> Result<Option<Value>, Error> {
    json.map(|json| {
        serde_json::from_str(json)
            .map_err(|err| Error::new(format_args!("the host sent an invalid {what}: {err}")))
    })
    .transpose()
}
