/**
 * Metrics through the host's `metrics` import, built with {@link Metric}: counters are
 * added to, gauges set, histograms observe values, and a group of series can be expired.
 *
 * ```ts
 * Metric.counter("pods_labelled_total").label("namespace", "default").add(1);
 * Metric.gauge("disk_used_percent").label("mount", "/var").group("disk").set(91);
 * Metric.histogram("scan_seconds", [0.1, 1, 10]).observe(0.4);
 * ```
 */
import { type MetricOperation, submit as hostSubmit } from "operon:engine/metrics@0.3.0";

import { OperonError } from "./errors.ts";
import { hostError } from "./kubernetes.ts";

export type { MetricOperation };

/** One metric series: a name, labels, an optional group, and for histograms buckets. */
export class Metric {
  /** The labels that identify the series, in order. */
  readonly labels: Array<[string, string]> = [];
  /** Lets {@link expireGroup} drop series that a later run no longer reports. */
  groupName: string | undefined;

  private constructor(
    /** The metric name, e.g. `operon_pods_total`. */
    readonly name: string,
    /** Histogram bucket upper bounds, ascending; unused by the other kinds. */
    readonly buckets: number[] = [],
  ) {}

  /** The counter `name`: a value that only grows, changed with {@link Metric.add}. */
  static counter(name: string): Metric {
    return new Metric(name);
  }

  /** The gauge `name`: a value that is {@link Metric.set}. */
  static gauge(name: string): Metric {
    return new Metric(name);
  }

  /** The histogram `name`, whose values are observed into `buckets`. */
  static histogram(name: string, buckets: number[]): Metric {
    return new Metric(name, buckets);
  }

  /** Adds the label `key` = `value` to the series. */
  label(key: string, value: string): this {
    this.labels.push([key, value]);
    return this;
  }

  /** Puts the series in `group`, so that {@link expireGroup} can remove it. */
  group(group: string): this {
    this.groupName = group;
    return this;
  }

  /** Adds `value` to the counter. */
  add(value: number): void {
    submit({ tag: "add", val: this.sample(value) });
  }

  /** Sets the gauge to `value`. */
  set(value: number): void {
    submit({ tag: "set", val: this.sample(value) });
  }

  /** Observes `value` in the histogram. */
  observe(value: number): void {
    submit({
      tag: "observe",
      val: { ...this.sample(value), buckets: new Float64Array(this.buckets) },
    });
  }

  private sample(value: number) {
    const sample = { name: this.name, value, labels: [...this.labels] };
    return this.groupName === undefined ? sample : { ...sample, group: this.groupName };
  }
}

/** Removes every series of `group` that this run did not set again. */
export function expireGroup(group: string): void {
  submit({ tag: "expire-group", val: group });
}

/** Queues one operation in the contract's shape; {@link Metric} is usually simpler. */
export function submit(operation: MetricOperation): void {
  try {
    hostSubmit(operation);
  } catch (err) {
    throw new OperonError(`submitting a metric: ${hostError(err)}`);
  }
}
