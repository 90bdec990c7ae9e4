import { Registry } from "./prom.ts";
import type { KeyValueStore } from "../kv/index.ts";
import { silentLogger, type Logger } from "../log.ts";
import type { Metrics, MetricsAggregation } from "./catalogue.ts";
import { boundedEntries, createSeriesReader, parseIsolateGauges, seriesField, MAX_AGGREGATED_FIELDS, type Family, type IsolateGauges } from "./kv-aggregation-fields.ts";

/**
 * The metric catalogue on an isolate runtime (Deno Deploy, Cloudflare Workers), where requests land on
 * many short-lived isolates and a scrape reaches one of them. Each isolate keeps recording into its
 * own registry as on Bun; every `flushRequests` requests or `flushIntervalMs`, whichever comes first,
 * it adds what its counters and histograms moved since its last flush to one shared hash in the
 * key-value store (one HINCRBYFLOAT script for all series) and writes its gauges under its own field of
 * a second hash, with an expiry time. `/metrics` then renders the sums over every isolate: counters
 * and histogram buckets, sums and counts summed (they never go down, whatever isolates come and go),
 * gauges combined over the isolates still alive (summed, or by the gauge's own aggregator: `max` for
 * the queue depth), so an isolate that died drops out once its gauges expire.
 *
 * The request path gains a counter and a clock read; the store sees at most two commands per flush
 * (one HTTP request on Upstash, which pipelines commands issued together), none when nothing moved.
 * What an isolate recorded after its last flush is lost if it is evicted before the next.
 */

/** Requests an isolate serves between two flushes at most. */
export const DEFAULT_METRICS_FLUSH_REQUESTS = 100;
/** Longest an isolate holds recorded series before it flushes them. */
export const DEFAULT_METRICS_FLUSH_INTERVAL_MS = 10_000;
/**
 * How long an isolate's gauges count after its last flush. Several flush intervals, so a live isolate
 * (which flushes at least every interval while its gauges are not zero) never drops out between two.
 */
export const DEFAULT_METRICS_GAUGE_TTL_MS = 60_000;
export const DEFAULT_METRICS_KEY_PREFIX = "metrics:api";

/**
 * Per-process metrics (CPU, memory, event loop) describe one isolate and mean nothing summed; the
 * aggregated exposition leaves them out.
 */
const PER_PROCESS_PREFIXES = ["process_", "nodejs_"];

export interface KvMetricsAggregationOptions {
  flushRequests?: number;
  flushIntervalMs?: number;
  gaugeTtlMs?: number;
  /** The two hashes are `<prefix>:totals` and `<prefix>:gauges`. */
  keyPrefix?: string;
  /** This isolate's name in the gauges hash; random by default. */
  isolateId?: string;
  /** Epoch milliseconds; tests pass a fake clock. */
  now?: () => number;
  logger?: Logger;
}

/** Exposition order: by labels (le aside), then buckets by bound, then sum and count. */
function compareSeries(a: { metricName: string; labels: Record<string, string> }, b: { metricName: string; labels: Record<string, string> }): number {
  const rest = (s: typeof a) => JSON.stringify(Object.entries(s.labels).filter(([k]) => k !== "le"));
  const byLabels = rest(a).localeCompare(rest(b));
  if (byLabels !== 0) return byLabels;
  const rank = (s: typeof a) => (s.metricName.endsWith("_bucket") ? 0 : s.metricName.endsWith("_sum") ? 1 : 2);
  if (rank(a) !== rank(b)) return rank(a) - rank(b);
  const le = (s: typeof a) => (s.labels.le === "+Inf" ? Infinity : Number(s.labels.le ?? 0));
  return le(a) - le(b);
}

/** Combines the live isolates' readings of one gauge series by the gauge's aggregator. */
export function combineGauge(aggregator: string, readings: readonly number[]): number {
  if (readings.length === 0) return 0;
  switch (aggregator) {
    case "max":
      return Math.max(...readings);
    case "min":
      return Math.min(...readings);
    case "average":
      return readings.reduce((a, b) => a + b, 0) / readings.length;
    default:
      return readings.reduce((a, b) => a + b, 0);
  }
}

/**
 * Switches `metrics` to aggregation through `kv`: the HTTP metrics count finished requests into it
 * and the API's `/metrics` renders its sums. The edge entries call this; on Bun it is
 * METRICS_AGGREGATION=kv (common/deps.ts).
 */
export function enableKvMetricsAggregation(metrics: Metrics, kv: KeyValueStore, options: KvMetricsAggregationOptions = {}): MetricsAggregation {
  const flushRequests = options.flushRequests ?? DEFAULT_METRICS_FLUSH_REQUESTS;
  const flushIntervalMs = options.flushIntervalMs ?? DEFAULT_METRICS_FLUSH_INTERVAL_MS;
  const gaugeTtlMs = Math.max(options.gaugeTtlMs ?? DEFAULT_METRICS_GAUGE_TTL_MS, 2 * flushIntervalMs);
  const prefix = options.keyPrefix ?? DEFAULT_METRICS_KEY_PREFIX;
  const totalsKey = `${prefix}:totals`;
  const gaugesKey = `${prefix}:gauges`;
  // Drawn on first use: workerd refuses random values in a Worker's global scope, where the app is built.
  let drawnId: string | undefined;
  const isolateId = () => (drawnId ??= options.isolateId ?? crypto.randomUUID());
  const now = options.now ?? Date.now;
  const log = (options.logger ?? silentLogger).child({ component: "metrics" });

  /** Each counter and histogram series as last written to the store. */
  const written = new Map<string, number>();
  let writtenGauges = "";
  let gaugesExpireAt = 0;
  let pending = 0;
  let lastFlush = now();
  let timer: ReturnType<typeof setTimeout> | undefined;
  let inFlight: Promise<void> | undefined;
  let again = false;
  let closed = false;

  const labelNamesOf = (name: string): readonly string[] =>
    (metrics.registry.getSingleMetric(name) as unknown as { labelNames?: readonly string[] } | undefined)?.labelNames ?? [];
  const families = async (): Promise<Family[]> =>
    ((await metrics.registry.getMetricsAsJSON()) as unknown as Family[]).filter((f) => !PER_PROCESS_PREFIXES.some((p) => f.name.startsWith(p)));

  const writeOnce = async () => {
    pending = 0;
    lastFlush = now();
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
    const increments: Record<string, number> = {};
    const reached = new Map<string, number>();
    const gauges: Record<string, number> = {};
    for (const family of await families()) {
      for (const v of family.values) {
        const field = seriesField(v.metricName ?? family.name, v.labels);
        if (family.type === "gauge") {
          gauges[field] = v.value;
          continue;
        }
        const before = written.get(field) ?? 0;
        // A registry reset starts counting again from zero: what it counted since is the increment.
        const delta = v.value >= before ? v.value - before : v.value;
        if (delta !== 0) increments[field] = delta;
        reached.set(field, v.value);
      }
    }
    const gaugesJson = JSON.stringify(gauges);
    const at = now();
    // Unchanged gauges are written again only when their expiry nears, and only while not all zero.
    const gaugesDue = gaugesJson !== writtenGauges || (at > gaugesExpireAt - gaugeTtlMs / 2 && Object.values(gauges).some((g) => g !== 0));
    const writes: Promise<unknown>[] = [];
    if (Object.keys(increments).length > 0) {
      writes.push(kv.hincrbyfloat(totalsKey, increments).then(() => reached.forEach((value, field) => written.set(field, value))));
    }
    if (gaugesDue) {
      const entry: IsolateGauges = { expiresAt: at + gaugeTtlMs, values: gauges };
      writes.push(
        kv.hset(gaugesKey, { [isolateId()]: JSON.stringify(entry) }).then(() => {
          writtenGauges = gaugesJson;
          gaugesExpireAt = entry.expiresAt;
        }),
      );
    }
    // Issued together, so the Upstash client sends them in one request.
    const failed = (await Promise.allSettled(writes)).find((r) => r.status === "rejected");
    if (failed) {
      // Nothing is lost: what was not written stays a delta for the next flush, due an interval from now.
      log.warn("metrics flush failed; kept for the next", { error: (failed as PromiseRejectedResult).reason });
      armTimer();
      throw (failed as PromiseRejectedResult).reason;
    }
    // While a gauge is not zero (a request in flight, a queue seen waiting) the isolate keeps flushing
    // without new requests, so its reading stays current and does not expire.
    if (Object.values(gauges).some((g) => g !== 0)) armTimer();
  };

  function armTimer() {
    if (timer !== undefined || closed) return;
    timer = setTimeout(flushInBackground, flushIntervalMs);
    (timer as { unref?: () => void }).unref?.();
  }

  const flush = (): Promise<void> => {
    if (inFlight) {
      again = true;
      return inFlight;
    }
    const run = async () => {
      try {
        do {
          again = false;
          await writeOnce();
        } while (again);
      } finally {
        inFlight = undefined;
      }
    };
    return (inFlight = run());
  };

  const flushInBackground = () => void flush().catch(() => {});

  const aggregation: MetricsAggregation = {
    requestFinished() {
      pending++;
      if (pending >= flushRequests || now() - lastFlush >= flushIntervalMs) return flushInBackground();
      // An isolate that goes quiet still flushes its last requests once the interval has passed.
      armTimer();
    },
    flush,
    settled: async () => {
      await inFlight?.catch(() => {});
    },
    async render() {
      await flush();
      const local = await families();
      const kinds = new Map(local.map((f) => [f.name, f.type]));
      const [totals, gaugeEntries] = await Promise.all([kv.hgetall(totalsKey), kv.hgetall(gaugesKey)]);
      const seriesOf = createSeriesReader(local, labelNamesOf);
      const at = now();
      const live: IsolateGauges[] = [];
      // Expired isolates, and entries no isolate wrote: neither will ever count again.
      const stale: string[] = [];
      for (const [isolate, json] of boundedEntries(gaugeEntries, "gauges", log)) {
        const entry = parseIsolateGauges(json);
        if (entry && entry.expiresAt > at) live.push(entry);
        else stale.push(isolate);
      }
      if (stale.length > 0) await kv.hdel(gaugesKey, stale);

      /** Per family, each series (by field) and its value; a field that is no series of ours is skipped. */
      const byFamily = new Map<string, Map<string, number>>();
      const fieldsOf = (family: string) => {
        let fields = byFamily.get(family);
        if (!fields) byFamily.set(family, (fields = new Map()));
        return fields;
      };
      let skipped = 0;
      const own = new Set(local.flatMap((f) => f.values.map((v) => seriesField(v.metricName ?? f.name, v.labels))));
      for (const [field, text] of boundedEntries(totals, "totals", log, (field) => own.has(field))) {
        const series = seriesOf(field);
        const value = Number(text);
        // Counters and histograms only ever go up from zero.
        if (series && kinds.get(series.family) !== "gauge" && Number.isFinite(value) && value >= 0) fieldsOf(series.family).set(field, value);
        else skipped++;
      }
      const gaugeReadings = new Map<string, Map<string, number[]>>();
      let readingsSeen = 0;
      for (const entry of live) {
        for (const [field, value] of Object.entries(entry.values)) {
          if (readingsSeen++ >= MAX_AGGREGATED_FIELDS) break;
          const series = seriesOf(field);
          if (!series || kinds.get(series.family) !== "gauge" || typeof value !== "number" || !Number.isFinite(value)) {
            skipped++;
            continue;
          }
          let readings = gaugeReadings.get(series.family);
          if (!readings) gaugeReadings.set(series.family, (readings = new Map()));
          const values = readings.get(field);
          if (values) values.push(value);
          else readings.set(field, [value]);
        }
      }
      if (skipped > 0) log.warn("metrics store fields that are no series of this catalogue skipped", { fields: skipped });
      const exposition = new Registry();
      for (const family of local) {
        const fields = fieldsOf(family.name);
        // Series this isolate knows (at zero if nobody moved them yet) beside those only others recorded.
        for (const v of family.values) {
          const field = seriesField(v.metricName ?? family.name, v.labels);
          if (!fields.has(field)) fields.set(field, 0);
        }
        if (family.type === "gauge") {
          const readings = gaugeReadings.get(family.name) ?? new Map<string, number[]>();
          for (const field of fields.keys()) fields.set(field, combineGauge(family.aggregator, readings.get(field) ?? []));
          for (const [field, values] of readings) fields.set(field, combineGauge(family.aggregator, values));
        }
        // Labels in the order this process writes them (fields keep them sorted), so the exposition reads as on Bun.
        const labelOrder = new Map<string, string[]>();
        for (const v of family.values) if (!labelOrder.has(v.metricName ?? family.name)) labelOrder.set(v.metricName ?? family.name, Object.keys(v.labels));
        const ordered = (metricName: string, labels: Record<string, string>) => {
          const order = labelOrder.get(metricName) ?? [];
          const rank = (k: string) => (order.includes(k) ? order.indexOf(k) : order.length);
          return Object.fromEntries(Object.entries(labels).sort(([a], [b]) => rank(a) - rank(b)));
        };
        const values = [...fields]
          .flatMap(([field, value]) => {
            const series = seriesOf(field);
            return series ? [{ metricName: series.metricName, labels: series.labels, value }] : [];
          })
          .sort(compareSeries)
          .map(({ metricName, labels, value }) => ({ metricName, labels: ordered(metricName, labels), value }));
        exposition.registerMetric({ name: family.name, help: family.help, type: family.type, get: async () => ({ ...family, values }) } as unknown as Parameters<Registry["registerMetric"]>[0]);
      }
      return exposition.metrics();
    },
    async close() {
      closed = true;
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
      await flush().catch(() => {});
    },
  };
  metrics.aggregation = aggregation;
  return aggregation;
}
