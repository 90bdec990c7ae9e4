import type { Logger } from "../log.ts";

/**
 * How the two hashes of the metrics aggregation (kv-aggregation.ts) hold what the isolates record: a
 * series as a field of the totals hash, an isolate's gauges as an entry of the gauges hash, and how both
 * are read back, where anything else that is in the hashes is refused rather than rendered. Pure.
 */

interface MetricValue {
  labels: Record<string, string | number>;
  value: number;
  metricName?: string;
}

export interface Family {
  name: string;
  help: string;
  type: string;
  aggregator: string;
  values: MetricValue[];
}

/** A series as a hash field: its metric name and labels, keys sorted, so one series is always one field. */
export function seriesField(metricName: string, labels: Record<string, string | number>): string {
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
export function createSeriesReader(families: readonly Family[], labelNamesOf: (family: string) => readonly string[]) {
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
export function boundedEntries(hash: Record<string, string>, what: string, log: Logger, keep: (field: string) => boolean = () => false): [string, string][] {
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
export function parseIsolateGauges(json: string): IsolateGauges | undefined {
  if (json.length > MAX_GAUGE_ENTRY_CHARS) return undefined;
  try {
    const entry = JSON.parse(json) as Partial<IsolateGauges> | null;
    if (typeof entry?.expiresAt !== "number" || typeof entry.values !== "object" || entry.values === null || Array.isArray(entry.values)) return undefined;
    return { expiresAt: entry.expiresAt, values: entry.values };
  } catch {
    return undefined;
  }
}

export interface IsolateGauges {
  expiresAt: number;
  values: Record<string, number>;
}
