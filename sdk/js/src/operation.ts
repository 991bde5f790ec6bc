/**
 * Operations: one step of a diagnosis pipeline, a function `(input: Input) => Output`.
 *
 * ```ts
 * import { Input, Output, operation } from "@operon/sdk";
 *
 * export const run = operation((input: Input) => {
 *   const node = input.require("node");
 *   return new Output().result("node.checked", node).output(`${node} looks fine`);
 * });
 * ```
 */
import type {
  OperationInput,
  OperationOutput,
  RunnerContext,
} from "operon:engine/types@0.3.0";

import { OperonError, messageOf } from "./errors.ts";
import { type Displayable, display } from "./format.ts";

/**
 * What an operation receives: parameters, earlier results, arguments and the run's
 * context. Lookups follow the contract's rule that the last of repeated keys wins.
 */
export class Input {
  /** Everything the host sent, so nothing is lost to a guest that needs it. */
  constructor(readonly raw: OperationInput) {}

  /** The parameter `key`, if given. Parameters include earlier results. */
  param(key: string): string | undefined {
    return lookup(this.raw.parameters, key);
  }

  /** The parameter `key`; throws {@link OperonError} naming it when it is missing. */
  require(key: string): string {
    const value = this.param(key);
    if (value === undefined) {
      throw new OperonError(`missing required parameter \`${key}\``);
    }
    return value;
  }

  /** The result `key` of an earlier operation, ignoring plain parameters. */
  result(key: string): string | undefined {
    return lookup(this.raw.results, key);
  }

  /** Every parameter in the order the host sent them. */
  params(): Array<[string, string]> {
    return this.raw.parameters;
  }

  /** Every result of earlier operations in the order the host sent them. */
  results(): Array<[string, string]> {
    return this.raw.results;
  }

  /** The positional arguments resolved from the Operation's `argKeys`. */
  get args(): string[] {
    return this.raw.args;
  }

  /** Where and how the operation runs: name, dry-run flag, budget, node, namespace. */
  get context(): RunnerContext {
    return this.raw.context;
  }
}

/** What an operation returns: results for later operations and text for people. */
export class Output {
  private readonly values = new Map<string, string>();

  /** Free-form human-readable output, shown by the CLI and stored with the run. */
  text = "";

  /** Sets the result `key` to `value`, replacing an earlier value. */
  result(key: string, value: Displayable): this {
    this.values.set(key, display(value));
    return this;
  }

  /** Sets the human-readable text, replacing earlier text. */
  output(text: string): this {
    this.text = text;
    return this;
  }

  /** The result `key`, if set. */
  get(key: string): string | undefined {
    return this.values.get(key);
  }

  /** Every result, in the order they were first set. */
  get results(): Array<[string, string]> {
    return [...this.values];
  }

  /** The output in the contract's shape. */
  toWit(): OperationOutput {
    return { results: this.results, output: this.text };
  }
}

/** The component's `run` export, made by {@link operation}. */
export type RunExport = (input: OperationInput) => OperationOutput;

/**
 * Adapts `run` to the component's `run` export; export the result as `run` from the
 * module given to the build. Throwing fails the operation with the error's message.
 */
export function operation(run: (input: Input) => Output): RunExport {
  return (input) => {
    try {
      return run(new Input(input)).toWit();
    } catch (err) {
      throw fail(err);
    }
  };
}

/** What an export throws for a thrown value: its message as the `result`'s error (an
 * unexpected error also leaves its stack on stderr, captured with the run). */
export function fail(err: unknown): string {
  if (!(err instanceof OperonError) && err instanceof Error && err.stack) {
    console.error(err.stack);
  }
  return messageOf(err);
}

function lookup(pairs: Array<[string, string]>, key: string): string | undefined {
  for (let i = pairs.length - 1; i >= 0; i--) {
    const [candidate, value] = pairs[i]!;
    if (candidate === key) {
      return value;
    }
  }
  return undefined;
}
