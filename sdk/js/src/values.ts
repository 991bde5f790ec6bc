/**
 * The values of addon-operator modules, for module hooks and global hooks: what shell
 * hooks read from `$VALUES_PATH` and `$CONFIG_VALUES_PATH` and write to
 * `$VALUES_JSON_PATCH_PATH` and `$CONFIG_VALUES_JSON_PATCH_PATH` (the Rust SDK's
 * `operon_sdk::values`).
 *
 * Values are one JSON object: `global` and, for a module hook, the module's section
 * under its values key (the camelCase module name). Patches are RFC 6902 JSON Patches;
 * the host applies them, in order, only when the run succeeds. A hook that is not part
 * of an addon module gets an {@link OperonError} from every function here.
 *
 * ```ts
 * const replicas = values.get().myModule?.replicas ?? 1;
 * values.patch([values.replace("/myModule/internal/replicas", replicas * 2)]);
 * ```
 */
import {
  get as hostGet,
  getConfig as hostGetConfig,
  patch as hostPatch,
  patchConfig as hostPatchConfig,
} from "operon:engine/values@0.3.0";

import { OperonError } from "./errors.ts";
import { hostError } from "./kubernetes.ts";

/** A JSON value as the values documents hold them. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** One RFC 6902 operation, as {@link add}, {@link replace} and {@link remove} build them. */
export type Operation =
  | { op: "add" | "replace"; path: string; value: Json }
  | { op: "remove"; path: string };

/** Calls the host, failing with its message as it is (as the Rust SDK does). */
function call<T>(f: () => T): T {
  try {
    return f();
  } catch (err) {
    throw new OperonError(hostError(err));
  }
}

function parse(text: string, what: string): { [key: string]: Json } {
  try {
    return JSON.parse(text) as { [key: string]: Json };
  } catch (err) {
    throw new OperonError(`the host's ${what}: ${String(err)}`);
  }
}

/** The values the hook sees (every layer and earlier patches merged). */
export function get(): { [key: string]: Json } {
  return parse(call(hostGet), "values");
}

/** The config values the hook sees (the configuration's layers). */
export function getConfig(): { [key: string]: Json } {
  return parse(call(hostGetConfig), "config values");
}

/** Submits a JSON Patch of the values (memory values). */
export function patch(operations: Operation[]): void {
  call(() => hostPatch(JSON.stringify(operations)));
}

/** Submits a JSON Patch of the config values, which the engine writes back to the configuration. */
export function patchConfig(operations: Operation[]): void {
  call(() => hostPatchConfig(JSON.stringify(operations)));
}

/** An `add` operation. */
export function add(path: string, value: Json): Operation {
  return { op: "add", path, value };
}

/** A `replace` operation. */
export function replace(path: string, value: Json): Operation {
  return { op: "replace", path, value };
}

/** A `remove` operation. */
export function remove(path: string): Operation {
  return { op: "remove", path };
}
