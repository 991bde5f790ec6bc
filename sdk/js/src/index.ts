/**
 * Write Operon operations and hooks in TypeScript, compiled to WASI 0.2 components.
 *
 * componentize-js (through `jco componentize`) turns a module and the StarlingMonkey
 * JavaScript engine into a component of the `hook` or `operation` world of `wit/`; the
 * types of the contract come from `jco guest-types`. This package wraps them with the
 * concepts of the Rust SDK:
 *
 * - an **operation** is a function `(input: Input) => Output` exported with
 *   `export const run = operation(fn)`;
 * - a **hook** is an object with `configure` and `handle`, exported with
 *   `export const { configure, handle } = hook({...})`; {@link objects} yields every
 *   object a run is about, whatever its binding type;
 * - changes to the cluster are {@link Patch}es, metrics {@link Metric}s, logs go through
 *   {@link log}, and {@link OperonError} fails a run with a message;
 * - the hooks of addon modules read and patch their module's values through
 *   {@link values}.
 *
 * Build a guest with `sdk/js/build.sh guest.ts -o guest.wasm`.
 */
export * as log from "./log.ts";
export { OperonError } from "./errors.ts";
export {
  type Hook,
  type HookExports,
  KubeObject,
  allow,
  config,
  deny,
  hook,
  kubernetes,
  objects,
  schedule,
} from "./hook.ts";
export { Patch } from "./kubernetes.ts";
export { Metric, expireGroup } from "./metrics.ts";
export * as values from "./values.ts";
export { Input, Output, type RunExport, operation } from "./operation.ts";
export type {
  BindingContext,
  BindingType,
  HookConfig,
  HookInput,
  HookOutput,
  HookSettings,
  OperationInput,
  OperationOutput,
  RunnerContext,
  WatchEvent,
} from "operon:engine/types@0.3.0";
