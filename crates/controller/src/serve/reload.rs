//! The hooks directory reloaded while `operon serve` runs (`--reload-interval`), so
//! that a hooks ConfigMap update needs no rollout: its digest is checked on an interval
//! ([`operon_hooks::reload`]); once a change has settled, every hook is loaded
//! and configured again (a hook whose file did not change keeps its loaded hook) and a
//! new engine lists and watches its bindings beside the one in use. Only when all of
//! that worked does the new engine replace the old one; a tree that does not load (a
//! half-written file, an invalid configuration, a binding no server answers) is refused
//! with the file and the reason, and the old engine keeps serving.
//!
//! What a replacement means, the same on every replica: the webhook servers, the debug
//! socket and audits see the new engine at once; the old engine's watches stop. On the
//! leader, the loop of [`super::run`] then stops the old engine (runs in progress get
//! the grace period; runs still queued are dropped: the Synchronization runs that
//! follow carry the state they would have seen), writes the webhook configurations of
//! the new hooks, and starts the new engine: onStartup for the hooks that are new or
//! changed, a Synchronization run for every kubernetes binding (its watch is new),
//! schedules from now on. The series of hooks that went leave `/metrics`; the run
//! history of the hooks that stay goes over to the new engine.
//!
//! Shadows (`--shadow-hook`) are loaded with the rest but run beside their live hook: a
//! shadow whose file changed is attached again, and a change to shadows alone keeps
//! the engine.

use super::{ServeError, ServeOptions, Status};
use operon_cluster::Cluster;
use operon_hooks::engine::{Engine, LoadedHook};
use operon_hooks::load::{self, HookLoadError, HookLoader};
use operon_hooks::metrics::Metrics;
use operon_hooks::reload::{ReloadEntry, Settle, Step, diff, digest_off_runtime, tree_digest};
use operon_hooks::shadow::{Attachment, Shadow, Shadows};
use std::collections::BTreeMap;
use std::sync::Arc;

/// What [`super::ServeOptions::reload_interval`] defaults to on the command line.
pub const DEFAULT_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);

/// The source label of the hooks directory's reloads.
pub(super) const SOURCE: &str = "hooks_directory";

/// The hooks of the hooks directory, each with the digest of its file.
#[derive(Clone, Default)]
pub(super) struct DirectoryHooks {
    /// The hooks the engine runs.
    pub(super) hooks: Vec<LoadedHook>,
    /// By hook name.
    digests: BTreeMap<String, String>,
    /// The hooks `--shadow-hook` names, which run beside their live hook instead.
    shadows: Vec<LoadedHook>,
    /// By shadow name.
    shadow_digests: BTreeMap<String, String>,
}

impl DirectoryHooks {
    fn kept(&self, name: &str, digest: &str) -> Option<&LoadedHook> {
        let (digests, hooks) = match self.digests.get(name) {
            Some(d) => (d, &self.hooks),
            None => (self.shadow_digests.get(name)?, &self.shadows),
        };
        (digests == digest)
            .then(|| hooks.iter().find(|h| h.hook.name() == name))
            .flatten()
    }
}

/// Loads and configures every hook of the hooks directory, the shadows
/// (`--shadow-hook`) apart; a hook whose file has the digest it had in `previous` is
/// the same loaded hook. An empty directory has no hooks (shell-operator starts so
/// too), with a warning.
pub(super) async fn load_hooks(
    options: &ServeOptions,
    loader: &HookLoader,
    cluster: &dyn Cluster,
    previous: Option<&DirectoryHooks>,
) -> Result<DirectoryHooks, HookLoadError> {
    let dir = &options.hooks_dir;
    let files = match load::hook_files(dir) {
        Err(HookLoadError::NoHooks { dir }) => {
            tracing::warn!(dir = %dir.display(), "no hooks in the hooks directory; serving with none");
            Vec::new()
        }
        other => other?,
    };
    // Each file's configuration is asked for beside the others' (a script hook's
    // `--config` is a sandboxed process), and taken in file order: the hooks, their
    // warnings and the first error are those one run after the other would give.
    let jobs = files.into_iter().map(|file| {
        let name = file
            .strip_prefix(dir)
            .unwrap_or(&file)
            .display()
            .to_string();
        let digest = tree_digest(std::slice::from_ref(&file));
        let kept = previous.and_then(|p| p.kept(&name, &digest)).cloned();
        async move {
            let hook = match kept {
                Some(hook) => (hook, false),
                None => (
                    load::configure(loader.hook(&file, dir)?, cluster).await?.0,
                    true,
                ),
            };
            Ok::<_, HookLoadError>((name, digest, hook))
        }
    });
    let mut loaded = DirectoryHooks::default();
    load::in_order(jobs, loader.discovery(), |(name, digest, (hook, fresh))| {
        if fresh {
            for warning in &hook.config.warnings {
                tracing::warn!(hook = %name, "{warning}");
            }
        }
        if options
            .shadow_hooks
            .iter()
            .any(|(shadow, _)| *shadow == name)
        {
            loaded.shadow_digests.insert(name, digest);
            loaded.shadows.push(hook);
        } else {
            loaded.digests.insert(name, digest);
            loaded.hooks.push(hook);
        }
    })
    .await?;
    Ok(loaded)
}

/// Why the shadows `options` asks for cannot run from `directory`: a shadow the
/// directory does not have.
pub(super) fn missing_shadow(
    options: &ServeOptions,
    directory: &DirectoryHooks,
) -> Option<ServeError> {
    let (shadow, live) = (options.shadow_hooks.iter())
        .find(|(shadow, _)| !directory.shadow_digests.contains_key(shadow))?;
    let known = (directory.hooks.iter().chain(&directory.shadows))
        .map(|h| h.hook.name())
        .collect::<Vec<_>>()
        .join(", ");
    Some(ServeError::ShadowNotFound {
        shadow: shadow.clone(),
        live: live.clone(),
        known,
    })
}

/// The shadows attached, by (shadow, live), each with the digest of its file then.
#[derive(Default)]
pub(super) struct ShadowAttachments(BTreeMap<(String, String), (String, Attachment)>);

impl ShadowAttachments {
    /// Attaches each shadow of `directory` to its live hook, keeping an attachment
    /// whose file did not change (its runs in progress go on) and replacing the others;
    /// returns the shadows attached anew. [`missing_shadow`] found none missing.
    pub(super) fn update(
        &mut self,
        options: &ServeOptions,
        directory: &DirectoryHooks,
        metrics: &Arc<Metrics>,
        shadows: &Shadows,
    ) -> Vec<String> {
        let mut attached = Vec::new();
        for (shadow, live) in &options.shadow_hooks {
            let (Some(digest), Some(loaded)) = (
                directory.shadow_digests.get(shadow),
                (directory.shadows.iter()).find(|h| h.hook.name() == shadow),
            ) else {
                continue;
            };
            let key = (shadow.clone(), live.clone());
            if self.0.get(&key).is_some_and(|(was, _)| was == digest) {
                continue;
            }
            // The old version detaches first, so that no input goes to both.
            self.0.remove(&key);
            if !directory.hooks.iter().any(|h| h.hook.name() == live) {
                tracing::warn!(shadow = %shadow, live = %live,
                    "the live hook of a shadow is not in the hooks directory: the shadow runs once a Hook object of that name does");
            }
            tracing::info!(shadow = %shadow, live = %live, "a hook runs as the shadow of another");
            let attachment = shadows.attach(
                live,
                Shadow::new(
                    loaded.hook.clone(),
                    loaded.config.settings.timeout,
                    metrics.clone(),
                    |_| {},
                ),
            );
            self.0.insert(key, (digest.clone(), attachment));
            attached.push(shadow.clone());
        }
        attached
    }
}

/// Why `hooks` cannot be served with `options`: a webhook binding whose server is not
/// configured.
pub(super) fn unserved(options: &ServeOptions, hooks: &[LoadedHook]) -> Option<ServeError> {
    for loaded in hooks {
        let hook = loaded.hook.name();
        let admission = (loaded.config.validating.iter())
            .chain(&loaded.config.mutating)
            .next();
        if let (Some(binding), None) = (admission, &options.admission_webhook) {
            return Some(ServeError::WebhookNotServed {
                hook: hook.to_owned(),
                binding: binding.name.clone(),
                kind: if binding.is_mutating() {
                    "mutating"
                } else {
                    "validating"
                },
                flags: "--validating-webhook-server-cert and --validating-webhook-server-key \
                        (the admission server answers mutating bindings too)",
            });
        }
        if let (Some(binding), None) = (
            loaded.config.conversions.first(),
            &options.conversion_webhook,
        ) {
            return Some(ServeError::WebhookNotServed {
                hook: hook.to_owned(),
                binding: binding.name.clone(),
                kind: "conversion",
                flags: "--conversion-webhook-server-cert and --conversion-webhook-server-key",
            });
        }
    }
    None
}

/// The engine of the hooks directory's `hooks`.
pub(super) fn engine(
    options: &ServeOptions,
    hooks: Vec<LoadedHook>,
    cluster: Arc<dyn Cluster>,
    metrics: Arc<Metrics>,
    shadows: &operon_hooks::shadow::Shadows,
) -> Arc<Engine> {
    Arc::new(
        Engine::new(hooks, cluster, metrics)
            .with_capture(options.capture.clone())
            .with_shadows(shadows.clone()),
    )
}

/// An error as an operator reads it: an invalid configuration with each problem.
pub(super) fn describe(error: &ServeError) -> String {
    match error {
        ServeError::Hook(HookLoadError::Invalid { problems, .. }) => {
            let problems: Vec<String> = problems.iter().map(ToString::to_string).collect();
            format!("{error}: {}", problems.join("; "))
        }
        other => other.to_string(),
    }
}

/// What the reload loop works with.
pub(super) struct Reloader<'a> {
    pub(super) options: &'a ServeOptions,
    pub(super) loader: &'a HookLoader,
    pub(super) cluster: Arc<dyn Cluster>,
    pub(super) metrics: Arc<Metrics>,
    pub(super) status: Arc<Status>,
    pub(super) shadows: operon_hooks::shadow::Shadows,
}

/// What a reload loaded: the hooks, and a new engine (listing and watching) when a
/// hook the engine runs changed.
struct Reloaded {
    next: DirectoryHooks,
    engine: Option<(Arc<Engine>, tokio::task::JoinSet<()>)>,
    entry: ReloadEntry,
}

impl Reloader<'_> {
    /// Checks the hooks directory every `interval` and replaces the engine when it
    /// changed and loads (see the module documentation); never returns. `current` is
    /// what the engine in use was made from, `pumps` its watches' tasks, `attached` its
    /// shadows.
    pub(super) async fn follow(
        self,
        interval: std::time::Duration,
        mut current: DirectoryHooks,
        mut pumps: tokio::task::JoinSet<()>,
        mut attached: ShadowAttachments,
    ) {
        let roots = vec![self.options.hooks_dir.clone()];
        let digest = move || digest_off_runtime(roots.clone());
        let mut settle = Settle::new(digest().await);
        let mut ticks = tokio::time::interval(interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await;
        loop {
            ticks.tick().await;
            let Step::Load(tree) = settle.check(digest().await) else {
                continue;
            };
            match self.reload(&current).await {
                Ok(None) => {
                    tracing::info!(dir = %self.options.hooks_dir.display(),
                        "the hooks directory changed, but no hook did: the engine in use stays");
                    settle.applied(tree);
                }
                Ok(Some(Reloaded {
                    next,
                    engine,
                    mut entry,
                })) => {
                    if let Some((engine, next_pumps)) = engine {
                        // Before it runs anything, so that the runs keep their order.
                        if let Some(previous) = self.status.engine.borrow().clone() {
                            engine.inherit_history(&previous);
                        }
                        self.status.engine.send_replace(Some(engine));
                        // The old engine's watches stop; on the leader its runs in
                        // progress finish while the run loop moves to the new engine.
                        pumps.abort_all();
                        pumps = next_pumps;
                        forget_series(&self.metrics, &current.hooks, &next.hooks);
                    }
                    let reattached =
                        attached.update(self.options, &next, &self.metrics, &self.shadows);
                    for shadow in reattached {
                        if !entry.changed.contains(&shadow) {
                            entry.changed.push(shadow);
                        }
                    }
                    self.count("applied");
                    tracing::info!(dir = %self.options.hooks_dir.display(),
                        added = ?entry.added, changed = ?entry.changed, removed = ?entry.removed,
                        "the hooks directory is reloaded");
                    entry.outcome = "applied".to_owned();
                    self.status.reloads.push(entry);
                    settle.applied(tree);
                    current = next;
                }
                Err(error) => {
                    let reason = describe(&error);
                    tracing::error!(dir = %self.options.hooks_dir.display(), error = %reason,
                        "the changed hooks directory does not load: the hooks in use keep running");
                    self.count("refused");
                    let mut entry = ReloadEntry::now(SOURCE, "refused");
                    entry.error = Some(reason);
                    self.status.reloads.push(entry);
                    settle.refused(tree);
                }
            }
        }
    }

    fn count(&self, outcome: &str) {
        (self.metrics.reloads_total)
            .with_label_values(&[SOURCE, outcome])
            .inc();
        if outcome == "applied" {
            applied_now(&self.metrics, SOURCE);
        }
    }

    /// The hooks the directory holds now, with what changed and, when a hook the
    /// engine runs changed, a new engine listing and watching; `None` when no hook
    /// (shadows included) changed.
    async fn reload(&self, current: &DirectoryHooks) -> Result<Option<Reloaded>, ServeError> {
        let next = load_hooks(
            self.options,
            self.loader,
            self.cluster.as_ref(),
            Some(current),
        )
        .await?;
        if let Some(error) = missing_shadow(self.options, &next) {
            return Err(error);
        }
        let (added, changed, removed) = diff(
            (current.digests.iter()).map(|(n, d)| (n.as_str(), d.as_str())),
            (next.digests.iter()).map(|(n, d)| (n.as_str(), d.as_str())),
        );
        let engine_stays = added.is_empty() && changed.is_empty() && removed.is_empty();
        if engine_stays && current.shadow_digests == next.shadow_digests {
            return Ok(None);
        }
        let mut entry = ReloadEntry::now(SOURCE, "applied");
        (entry.added, entry.changed, entry.removed) = (added, changed, removed);
        if engine_stays {
            return Ok(Some(Reloaded {
                next,
                engine: None,
                entry,
            }));
        }
        if let Some(error) = unserved(self.options, &next.hooks) {
            return Err(error);
        }
        let engine = engine(
            self.options,
            next.hooks.clone(),
            self.cluster.clone(),
            self.metrics.clone(),
            &self.shadows,
        );
        engine.observe().await?;
        let pumps = engine.spawn_pumps();
        Ok(Some(Reloaded {
            next,
            engine: Some((engine, pumps)),
            entry,
        }))
    }
}

/// Sets `operon_reload_last_applied_timestamp_seconds` of `source` to now.
pub(super) fn applied_now(metrics: &Metrics, source: &str) {
    let now = jiff::Timestamp::now().as_millisecond() as f64 / 1000.0;
    (metrics.reload_last_applied_timestamp_seconds)
        .with_label_values(&[source])
        .set(now);
}

/// Removes the series of the bindings of hooks in `old` and not in `new`, and the
/// metrics those hooks wrote.
fn forget_series(metrics: &Metrics, old: &[LoadedHook], new: &[LoadedHook]) {
    use operon_hooks::config::MAIN_QUEUE;
    for gone in old
        .iter()
        .filter(|o| !new.iter().any(|n| n.hook.name() == o.hook.name()))
    {
        let hook = gone.hook.name();
        let config = &gone.config;
        let bindings = (config.kubernetes.iter())
            .map(|b| (b.name.as_str(), b.queue.as_str()))
            .chain((config.schedules.iter()).map(|b| (b.name.as_str(), b.queue.as_str())))
            .chain(config.on_startup.map(|_| ("onStartup", MAIN_QUEUE)));
        for (binding, queue) in bindings {
            metrics.forget_binding(hook, binding, queue);
        }
        metrics.hooks.forget_hook(hook);
    }
}

#[cfg(test)]
mod tests;
