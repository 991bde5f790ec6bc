/**
 * The error a guest throws: a message the host records as the run's failure.
 *
 * Throw it from `handle` or from an operation; any other thrown value fails the run
 * too, with its type name before the message.
 */
export class OperonError extends Error {
  /** Prefixes the message with `context: `, e.g. `checking /var: disk full`. */
  context(context: string): OperonError {
    return new OperonError(`${context}: ${this.message}`);
  }
}

/** The message the host records for a thrown value. */
export function messageOf(thrown: unknown): string {
  if (thrown instanceof OperonError) {
    return thrown.message;
  }
  if (thrown instanceof Error) {
    return `${thrown.name}: ${thrown.message}`;
  }
  return String(thrown);
}
