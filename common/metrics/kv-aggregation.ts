import { Registry } from "./prom.ts";
import type { KeyValueStore } from "../kv/index.ts";
import { silentLogger, type Logger } from "../log.ts";
import type { Metrics, MetricsAggregation } from "./catalogue.ts";

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


interface MetricValue {
  labels: Record<string, string | number>;
  value: number;
  metricName?: string;
}

interface Family {
  name: string;
  help: string;
  type: string;
  aggregator: string;
  values: MetricValue[];
}

/** A series as a hash field: its metric name and labels, keys sorted, so one series is always one field. */
function seriesField(metricName: string, labels: Record<string, string | number>): string {
  return JSON.stringify([metricName, Object.keys(labels).sort().map((k) => [k, String(labels[k])])]);
}

interface Series {
  family: string;
  metricName: string;
  labels: Record<string, string>;
}

/**
 * Fields of the two hashes read at one scrape, at most. The catalogue has a few hundred series; the
 * hashes are shared with whatever else can write to the store, and a scrape must not stall the API
 * however many fields someone added (100,000 took 3 s to merge).
 */
export const MAX_AGGREGATED_FIELDS = 10_000;
/** A longer field is no series of this catalogue (label values are route templates, statuses, names). */
const MAX_FIELD_CHARS = 1_000;

/** Label names as the exposition format allows them (names starting `__` are reserved). */
const LABEL_NAME = /^(?!__)[a-zA-Z_][a-zA-Z0-9_]*$/;

/**
 * Reads hash fields back into series of this process's catalogue, or undefined for a field that is
 * not one: not this format, a family this process does not have, a sample name or a label the family
 * cannot have, a bucket without its bound. Only such series reach the exposition, so whatever else
 * is in the hashes can never make it invalid. Each distinct field is read once per scrape.
 */
function createSeriesReader(families: readonly Family[], labelNamesOf: (family: string) => readonly string[]) {
  const kinds = new Map(families.map((f) => [f.name, f.type]));
  const allowedLabels = new Map(families.map((f) => [f.name, new Set(labelNamesOf(f.name))]));
  /** The family of a sample name: histograms' samples carry `_bucket`, `_sum` and `_count`. */
  const familyOf = (metricName: string): { family: string; bucket: boolean } | undefined => {
    const suffix = /_(bucket|sum|count)$/.exec(metricName);
    const base = suffix ? metricName.slice(0, suffix.index) : undefined;
    if (base !== undefined && kinds.get(base) === "histogram") return { family: base, bucket: suffix![1] === "bucket" };
    return kinds.has(metricName) && kinds.get(metricName) !== "histogram" ? { family: metricName, bucket: false } : undefined;
  };
  const read = (field: string): Series | undefined => {
    if (field.length > MAX_FIELD_CHARS) return undefined;
    let parsed: unknown;
    try {
      parsed = JSON.parse(field);
    } catch {
      return undefined;
    }
    if (!Array.isArray(parsed) || parsed.length !== 2) return undefined;
    const [metricName, pairs] = parsed as [unknown, unknown];
    if (typeof metricName !== "string" || !Array.isArray(pairs)) return undefined;
    const owner = familyOf(metricName);
    if (!owner) return undefined;
    const allowed = allowedLabels.get(owner.family)!;
    const labels: Record<string, string> = {};
    for (const pair of pairs) {
      if (!Array.isArray(pair) || pair.length !== 2) return undefined;
      const [name, value] = pair as [unknown, unknown];
      if (typeof name !== "string" || typeof value !== "string" || !LABEL_NAME.test(name) || Object.hasOwn(labels, name)) return undefined;
      if (name === "le" ? !owner.bucket || !(value === "+Inf" || Number.isFinite(Number(value))) : !allowed.has(name)) return undefined;
      labels[name] = value;
    }
    if (owner.bucket && labels.le === undefined) return undefined;
    // One series, one field: as the writer spells it (keys sorted), or it would be a second sample of the same series.
    if (seriesField(metricName, labels) !== field) return undefined;
    return { family: owner.family, metricName, labels };
  };
  const known = new Map<string, Series | undefined>();
  return (field: string): Series | undefined => {
    if (!known.has(field)) known.set(field, read(field));
    return known.get(field);
  };
}

/**
 * A hash's entries, at most MAX_AGGREGATED_FIELDS of them beyond those `keep` names (this process's
 * own series, so that fields added by others can crowd out only each other); how many were left out
 * goes to the log.
 */
function boundedEntries(hash: Record<string, string>, what: string, log: Logger, keep: (field: string) => boolean = () => false): [string, string][] {
  const entries = Object.entries(hash);
  if (entries.length <= MAX_AGGREGATED_FIELDS) return entries;
  let others = 0;
  const kept = entries.filter(([field]) => keep(field) || others++ < MAX_AGGREGATED_FIELDS);
  log.warn(`metrics ${what} hash too large: fields beyond ${MAX_AGGREGATED_FIELDS} left out`, { fields: entries.length, left_out: entries.length - kept.length });
  return kept;
}

/** Far more than an isolate's gauges take as JSON (the catalogue has a few dozen gauge series). */
const MAX_GAUGE_ENTRY_CHARS = 100_000;

/** An isolate's gauges as it wrote them, or undefined for anything else found in the gauges hash. */
function parseIsolateGauges(json: string): IsolateGauges | undefined {
  if (json.length > MAX_GAUGE_ENTRY_CHARS) return undefined;
  try {
    const entry = JSON.parse(json) as Partial<IsolateGauges> | null;
    if (typeof entry?.expiresAt !== "number" || typeof entry.values !== "object" || entry.values === null || Array.isArray(entry.values)) return undefined;
    return { expiresAt: entry.expiresAt, values: entry.values };
  } catch {
    return undefined;
  }
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

interface IsolateGauges {
  expiresAt: number;
  values: Record<string, number>;
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
