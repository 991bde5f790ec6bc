/**
 * Levelled, structured logging through the host's `log` import: a message and optional
 * fields, kept with the run and forwarded to the host's log under the run's name.
 *
 * ```ts
 * log.info(`labelled ${count} pods`, { namespace: "default" });
 * ```
 */
import { log as hostLog, type Level } from "operon:engine/log@0.3.0";

import { type Displayable, display } from "./format.ts";

export type { Level };

/** Structured fields of a record; values are formatted as text. */
export type Fields = Record<string, Displayable>;

/** Emits one record at `level`, for a level chosen at run time. */
export function emit(level: Level, message: string, fields: Fields = {}): void {
  hostLog(
    level,
    message,
    Object.entries(fields).map(([key, value]): [string, string] => [key, display(value)]),
  );
}

/** Logs very detailed tracing. */
export const trace = (message: string, fields?: Fields): void => emit("trace", message, fields);
/** Logs debugging detail. */
export const debug = (message: string, fields?: Fields): void => emit("debug", message, fields);
/** Logs normal progress. */
export const info = (message: string, fields?: Fields): void => emit("info", message, fields);
/** Logs something unexpected that the guest handled. */
export const warn = (message: string, fields?: Fields): void => emit("warn", message, fields);
/** Logs a failure. */
export const error = (message: string, fields?: Fields): void => emit("error", message, fields);
