//! Hook runs for webhooks: an admission or conversion review answered by one binding,
//! outside the queues, because the API server is waiting for the answer; and the same
//! runs for audits, which send validating bindings reviews of the objects that exist.

use super::{BindingContext, Engine, RunRecord, context, spans};
use tracing::Instrument;

/// Who asked for a review run.
#[derive(Clone, Copy)]
enum Caller {
    /// The API server, through a webhook.
    Webhook,
    /// An audit of the objects that exist.
    Audit,
}

impl Caller {
    /// The queue the run shows on in the log and the hook's history.
    fn queue(self) -> &'static str {
        match self {
            Self::Webhook => "webhook",
            Self::Audit => "audit",
        }
    }
}

impl Engine {
    /// Runs hook `h` for an admission or conversion review on its validating, mutating
    /// or conversion binding `binding`, outside the queues (as shell-operator does: the API
    /// server waits for the answer). The context carries the binding's snapshots. A run
    /// whose hook fails answers "denied" to the caller; nothing is applied. `review` is
    /// the review's JSON text, handed to the hook as it is.
    pub async fn review(&self, h: usize, binding: &str, review: String) -> Option<RunRecord> {
        self.review_on(h, binding, review, Caller::Webhook).await
    }

    /// [`Engine::review`] for an audit: the same run, outside the queues, shown in the
    /// log and the hook's history on the `audit` queue, so that an audit's many runs are
    /// told apart from the API server's requests. Shadows of the hook do not run: they
    /// are compared on the requests the hook gets, and an audit is none.
    pub async fn audit_review(&self, h: usize, binding: &str, review: String) -> Option<RunRecord> {
        self.review_on(h, binding, review, Caller::Audit).await
    }

    async fn review_on(
        &self,
        h: usize,
        binding: &str,
        review: String,
        caller: Caller,
    ) -> Option<RunRecord> {
        let queue = caller.queue();
        let loaded = &self.hooks[h];
        let config = &loaded.config;
        let context = if config.validating.iter().any(|v| v.name == binding) {
            context::validating(binding, review, Vec::new())
        } else if config.mutating.iter().any(|m| m.name == binding) {
            context::mutating(binding, review, Vec::new())
        } else if config.conversions.iter().any(|c| c.name == binding) {
            context::conversion(binding, review, Vec::new())
        } else {
            return None;
        };
        let snapshots = self.snapshots_for(&self.lock(), h, &context);
        let contexts = vec![BindingContext {
            snapshots,
            ..context
        }];
        let root = spans::review(loaded.hook.name(), binding, queue);
        let span = spans::run(&root, loaded.hook.name(), queue, binding, 1);
        let input = self.input(h, contexts);
        let (run, input) = loaded
            .hook
            .handle(input, config.settings.timeout)
            .instrument(span.clone())
            .await;
        spans::ended(&span, &run.outcome, None);
        if let Caller::Webhook = caller {
            self.shadows.shadow(loaded.hook.name(), &input, &run);
        }
        let source = operon_runner::output_log::Source::Hook {
            hook: loaded.hook.name(),
            binding: input
                .binding_contexts
                .first()
                .map_or("", |c| c.binding.as_str()),
            queue,
        };
        span.in_scope(|| run.log_output_at(source, self.log_level(h)));
        let failed = run.outcome.is_err();
        let record = RunRecord {
            hook: loaded.hook.name().to_owned(),
            hook_index: h,
            synchronizes: Vec::new(),
            queue: queue.to_owned(),
            contexts: input.binding_contexts,
            config_version: config.version,
            run,
            apply_error: None,
            failed,
            allowed_failure: false,
            retry_in: None,
        };
        self.keep(h, &record);
        Some(record)
    }
}
