/**
 * Hooks: programs bound to cluster events and schedules, written as a {@link Hook}.
 *
 * A hook tells the host what to watch once, in `configure`, and is then run with the
 * binding contexts that fired, in `handle`. {@link config}, {@link kubernetes} and
 * {@link schedule} build shell-operator's `configVersion: v1` with its defaults:
 *
 * ```ts
 * export const { configure, handle } = hook({
 *   configure: () => config({ schedule: [schedule("nightly", "0 3 * * *")] }),
 *   handle(input) {
 *     for (const obj of objects(input)) { ... }
 *   },
 * });
 * ```
 */
import type {
  BindingContext,
  HookConfig,
  HookInput,
  HookOutput,
  KubernetesBinding,
  ObjectAndFilter,
  ScheduleBinding,
  WatchEvent,
} from "operon:engine/types@0.3.0";

import { OperonError } from "./errors.ts";
import { toJson } from "./format.ts";
import { Patch } from "./kubernetes.ts";
import { fail } from "./operation.ts";

/** A hook: its configuration and what it does when a binding fires. */
export interface Hook {
  /** Returns the bindings; called once when the hook is loaded. */
  configure(): HookConfig;
  /** Handles one run; nothing returned means no admission or conversion answer.
   * Throwing fails the run, which the host retries unless its binding allows failure. */
  handle(input: HookInput): HookOutput | void;
}

/** The component's `configure` and `handle` exports, made by {@link hook}. */
export interface HookExports {
  configure(): HookConfig;
  handle(input: HookInput): HookOutput;
}

/**
 * Adapts a {@link Hook} to the component's exports; export both from the module given
 * to the build: `export const { configure, handle } = hook({ ... })`.
 */
export function hook(implementation: Hook): HookExports {
  return {
    configure() {
      try {
        return implementation.configure();
      } catch (err) {
        throw fail(err);
      }
    },
    handle(input) {
      try {
        return implementation.handle(input) ?? {};
      } catch (err) {
        throw fail(err);
      }
    },
  };
}

/**
 * A configuration from the parts a hook sets; the binding lists it leaves out are empty.
 *
 * ```ts
 * config({ kubernetes: [kubernetes("pods", "Pod")], schedule: [schedule("resync", "@hourly")] })
 * ```
 */
export function config(parts: Partial<HookConfig>): HookConfig {
  return {
    schedule: [],
    kubernetes: [],
    kubernetesValidating: [],
    kubernetesMutating: [],
    kubernetesConversion: [],
    lifecycle: [],
    ...parts,
  };
}

/** Watch event names as shell-operator spells them, or as the contract does. */
export type EventName = WatchEvent | "Added" | "Modified" | "Deleted";

/** The optional fields of a watch binding; `executeHookOnEvent` takes shell-operator's names. */
export type KubernetesOptions = Partial<
  Omit<KubernetesBinding, "name" | "kind" | "executeHookOnEvent" | "namespace">
> & { executeHookOnEvent?: EventName[]; namespaces?: string[] };

/** A watch binding on objects of `kind` (e.g. `Pod`), in every namespace unless
 * `namespaces` names some; runs on every event unless `executeHookOnEvent` says. */
export function kubernetes(name: string, kind: string, options: KubernetesOptions = {}): KubernetesBinding {
  const { executeHookOnEvent, namespaces, ...rest } = options;
  const binding: KubernetesBinding = {
    name,
    kind,
    allowFailure: false,
    includeSnapshotsFrom: [],
    ...rest,
  };
  if (executeHookOnEvent !== undefined) {
    binding.executeHookOnEvent = executeHookOnEvent.map((e) => e.toLowerCase() as WatchEvent);
  }
  if (namespaces !== undefined) {
    binding.namespace = { nameSelector: namespaces };
  }
  return binding;
}

/** A crontab binding: 5 fields, or 6 with seconds first. */
export function schedule(
  name: string,
  crontab: string,
  options: Partial<Omit<ScheduleBinding, "name" | "crontab">> = {},
): ScheduleBinding {
  return { name, crontab, allowFailure: false, includeSnapshotsFrom: [], ...options };
}

/** Admits an admission review, with warnings and, for mutating bindings, a JSON Patch. */
export function allow(warnings: string[] = [], jsonPatch?: unknown): HookOutput {
  const validating = { allowed: true, warnings };
  return {
    validating: jsonPatch === undefined ? validating : { ...validating, patch: toJson(jsonPatch) },
  };
}

/** Refuses an admission review; kubectl shows `message`. */
export function deny(message: string, warnings: string[] = []): HookOutput {
  return { validating: { allowed: false, message, warnings } };
}

/** A Kubernetes object as JSON: what {@link KubeObject.object} holds. */
export type JsonObject = { [key: string]: unknown };

/** One object a binding context is about: the object and its jq filter result, parsed
 * on first use, with its metadata at hand. */
export class KubeObject {
  #object: JsonObject | undefined | null = null;
  #filterResult: unknown = null;
  #filterParsed = false;

  /** What the host sent, as JSON text. */
  constructor(readonly raw: ObjectAndFilter) {}

  /** The full object; `undefined` when the binding keeps only filter results. */
  get object(): JsonObject | undefined {
    if (this.#object === null) {
      this.#object = parse(this.raw.object, "object") as JsonObject | undefined;
    }
    return this.#object;
  }

  /** The jq filter result; `undefined` without a filter, `null` when it yielded null. */
  get filterResult(): unknown {
    if (!this.#filterParsed) {
      this.#filterResult = parse(this.raw.filterResult, "filter result");
      this.#filterParsed = true;
    }
    return this.#filterResult;
  }

  /** `metadata`; empty without a full object. */
  get metadata(): JsonObject {
    const metadata = this.object?.["metadata"];
    return typeof metadata === "object" && metadata !== null ? (metadata as JsonObject) : {};
  }

  /** `metadata.name`. */
  get name(): string | undefined {
    return text(this.metadata["name"]);
  }

  /** `metadata.namespace`; `undefined` for cluster-scoped objects. */
  get namespace(): string | undefined {
    return text(this.metadata["namespace"]);
  }

  /** `metadata.labels`; empty when it has none. */
  get labels(): Record<string, string> {
    const labels = this.metadata["labels"];
    return typeof labels === "object" && labels !== null ? (labels as Record<string, string>) : {};
  }

  /** `kind`. */
  get kind(): string | undefined {
    return text(this.object?.["kind"]);
  }

  /** A JSON merge patch of this object (by kind, namespace and name; the host picks
   * the preferred `apiVersion`). Throws without a full object. */
  mergePatch(patch: unknown): Patch {
    const { kind, name } = this;
    if (kind === undefined || name === undefined) {
      throw new OperonError("a merge patch needs the full object, with its kind and name");
    }
    return Patch.merge(kind, this.namespace, name, patch);
  }
}

/**
 * Every object a run (or one of its contexts) is about, whatever the context's type:
 * the object of an `event`, every object of a `synchronization`, and for the other
 * types (`schedule`, `group`, admission...) the objects of its snapshots.
 */
export function* objects(input: HookInput | BindingContext): Generator<KubeObject> {
  const contexts = "bindingContexts" in input ? input.bindingContexts : [input];
  for (const context of contexts) {
    let found: ObjectAndFilter[];
    if (context.type === "event") {
      found = context.object ? [context.object] : [];
    } else if (context.type === "synchronization") {
      found = context.objects;
    } else {
      found = context.snapshots.flatMap((snapshot) => snapshot.objects);
    }
    for (const raw of found) {
      yield new KubeObject(raw);
    }
  }
}

function parse(json: string | undefined, what: string): unknown {
  if (json === undefined) {
    return undefined;
  }
  try {
    return JSON.parse(json);
  } catch (err) {
    throw new OperonError(`the host sent an invalid ${what}: ${String(err)}`);
  }
}

function text(value: unknown): string | undefined {
  return typeof value === "string" ? value : undefined;
}
