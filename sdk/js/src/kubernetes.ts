/**
 * Changes to Kubernetes objects, built with {@link Patch} and submitted to the host.
 *
 * The host buffers submitted operations and applies them in order only after the run
 * returns successfully; a failed run or a dry run applies nothing. These are the patch
 * operations of shell-operator's `$KUBERNETES_PATCH_PATH`.
 */
import {
  type ObjectRef,
  type PatchOperation,
  submit as hostSubmit,
} from "operon:engine/kubernetes@0.3.0";

import { OperonError, messageOf } from "./errors.ts";
import { toJson } from "./format.ts";

export type { PatchOperation };

/**
 * One change to a Kubernetes object, ready to {@link Patch.submit}. Documents are given
 * as JSON-ready values or JSON text; `namespace` is `undefined` for cluster-scoped objects.
 *
 * ```ts
 * Patch.merge("Pod", "default", "web-0", { metadata: { labels: { checked: "yes" } } })
 *   .ignoreMissingObject()
 *   .submit();
 * ```
 */
export class Patch {
  /** The operation in the contract's own shape; refinements edit it. */
  constructor(readonly operation: PatchOperation) {}

  /** A JSON merge patch (RFC 7386) of the object `kind` `namespace`/`name`. */
  static merge(kind: string, namespace: string | undefined, name: string, patch: unknown): Patch {
    return new Patch({ tag: "merge-patch", val: patchSpec(kind, namespace, name, patch) });
  }

  /** A JSON Patch (RFC 6902), a list of operations, of `kind` `namespace`/`name`. */
  static jsonPatch(
    kind: string,
    namespace: string | undefined,
    name: string,
    operations: unknown,
  ): Patch {
    return new Patch({ tag: "json-patch", val: patchSpec(kind, namespace, name, operations) });
  }

  /** Replaces the object with the output of a jq filter, e.g. `.spec.replicas = 2`. */
  static jq(kind: string, namespace: string | undefined, name: string, jqFilter: string): Patch {
    const target = ref(kind, namespace, name);
    return new Patch({ tag: "jq-patch", val: { target, jqFilter, ignoreMissingObject: false } });
  }

  /** `Create`: creates the object, failing if it exists. */
  static create(object: unknown): Patch {
    return new Patch({ tag: "create", val: { object: toJson(object) } });
  }

  /** `CreateOrUpdate`: creates the object or replaces an existing one. */
  static createOrUpdate(object: unknown): Patch {
    return new Patch({ tag: "create-or-update", val: { object: toJson(object) } });
  }

  /** `CreateIfNotExists`: creates the object unless it exists. */
  static createIfNotExists(object: unknown): Patch {
    return new Patch({ tag: "create-if-not-exists", val: { object: toJson(object) } });
  }

  /** `Delete`: foreground deletion, waiting for dependents. */
  static delete(kind: string, namespace: string | undefined, name: string): Patch {
    return new Patch({ tag: "delete", val: ref(kind, namespace, name) });
  }

  /** `DeleteInBackground`: the garbage collector removes dependents later. */
  static deleteInBackground(kind: string, namespace: string | undefined, name: string): Patch {
    return new Patch({ tag: "delete-in-background", val: ref(kind, namespace, name) });
  }

  /** `DeleteNonCascading`: deletes the object and orphans its dependents. */
  static deleteNonCascading(kind: string, namespace: string | undefined, name: string): Patch {
    return new Patch({ tag: "delete-non-cascading", val: ref(kind, namespace, name) });
  }

  /** Goes through a subresource, e.g. `status`; deletions have none. */
  subresource(subresource: string): this {
    const op = this.operation;
    if (!op.tag.startsWith("delete")) {
      (op.val as { subresource?: string }).subresource = subresource;
    }
    return this;
  }

  /** Makes a missing object no error (patches only): it may be gone before the host
   * applies the patch. */
  ignoreMissingObject(): this {
    const op = this.operation;
    if (op.tag === "merge-patch" || op.tag === "json-patch" || op.tag === "jq-patch") {
      op.val.ignoreMissingObject = true;
    }
    return this;
  }

  /** Names the object's `apiVersion`; without it the host picks the preferred one. */
  apiVersion(apiVersion: string): this {
    const op = this.operation;
    if (op.tag === "merge-patch" || op.tag === "json-patch" || op.tag === "jq-patch") {
      op.val.target.apiVersion = apiVersion;
    } else if (op.tag.startsWith("delete")) {
      (op.val as ObjectRef).apiVersion = apiVersion;
    }
    return this;
  }

  /** Queues the operation; throws {@link OperonError} when the host refuses it. */
  submit(): void {
    submit(this.operation);
  }
}

/** Queues one operation in the contract's shape; {@link Patch} is usually simpler. */
export function submit(operation: PatchOperation): void {
  try {
    hostSubmit(operation);
  } catch (err) {
    throw new OperonError(`submitting a patch: ${hostError(err)}`);
  }
}

/** The text of an error a host import threw (jco wraps it with a `payload`). */
export function hostError(err: unknown): string {
  if (typeof err === "object" && err !== null && "payload" in err) {
    return String((err as { payload: unknown }).payload);
  }
  return messageOf(err);
}

function ref(kind: string, namespace: string | undefined, name: string): ObjectRef {
  return namespace === undefined ? { kind, name } : { kind, namespace, name };
}

function patchSpec(kind: string, namespace: string | undefined, name: string, patch: unknown) {
  return { target: ref(kind, namespace, name), patch: toJson(patch), ignoreMissingObject: false };
}
