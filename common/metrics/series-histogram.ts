import type { Registry } from "./prom.ts";

/** One label set of a SeriesHistogram: observing costs a bucket search and three additions. */
export interface HistogramSeries {
  observe(value: number): void;
}

/**
 * A histogram for the request path. prom-client's own `observe` validates and hashes the labels on
 * every call, which cost `GET /health` a quarter of a bare server's rate; here `series(labels)` is
 * made once per label set and counts in plain numbers. It registers on prom-client registries like
 * their own metrics (the `get()` and `reset()` they call) and reads out in the same exposition format.
 */
export class SeriesHistogram<T extends string> {
  readonly type = "histogram";
  readonly aggregator = "sum";
  readonly name: string;
  readonly help: string;
  /** As on prom-client's metrics: what the series may be labelled with (read by common/metrics/kv-aggregation.ts). */
  readonly labelNames: readonly T[];
  private readonly bounds: readonly number[];
  private readonly entries: { labels: Record<T, string>; buckets: Float64Array; sum: number; count: number }[] = [];

  /** `labelNames` as prom-client takes them: they type the series' labels. */
  constructor(config: { name: string; help: string; labelNames: readonly T[]; buckets: readonly number[]; registers: readonly Registry[] }) {
    this.name = config.name;
    this.help = config.help;
    this.labelNames = [...config.labelNames];
    this.bounds = [...config.buckets].sort((a, b) => a - b);
    for (const registry of config.registers) registry.registerMetric(this as unknown as Parameters<Registry["registerMetric"]>[0]);
  }

  series(labels: Record<T, string>): HistogramSeries {
    const entry = { labels: { ...labels }, buckets: new Float64Array(this.bounds.length), sum: 0, count: 0 };
    this.entries.push(entry);
    const bounds = this.bounds;
    return {
      observe(value) {
        entry.sum += value;
        entry.count++;
        for (let i = 0; i < bounds.length; i++) {
          if (value <= bounds[i]!) {
            entry.buckets[i]!++;
            break;
          }
        }
      },
    };
  }

  async get() {
    const values: { labels: Record<string, string | number>; value: number; metricName: string }[] = [];
    for (const { labels, buckets, sum, count } of this.entries) {
      let cumulative = 0;
      this.bounds.forEach((le, i) => {
        cumulative += buckets[i]!;
        values.push({ labels: { le, ...labels }, value: cumulative, metricName: `${this.name}_bucket` });
      });
      values.push(
        { labels: { le: "+Inf", ...labels }, value: count, metricName: `${this.name}_bucket` },
        { labels: { ...labels }, value: sum, metricName: `${this.name}_sum` },
        { labels: { ...labels }, value: count, metricName: `${this.name}_count` },
      );
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }

  reset() {
    for (const entry of this.entries) {
      entry.buckets.fill(0);
      entry.sum = 0;
      entry.count = 0;
    }
  }
}

