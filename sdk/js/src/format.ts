/** Values that results, labels and log fields accept; formatted as the Rust SDK does. */
export type Displayable = string | number | bigint | boolean;

/** The text of a value: numbers as JavaScript prints them (`3`, `2.5`), booleans lowercase. */
export function display(value: Displayable): string {
  return String(value);
}

/** Compact JSON text of `value`, or `value` itself when it already is text. */
export function toJson(value: unknown): string {
  return typeof value === "string" ? value : JSON.stringify(value);
}
