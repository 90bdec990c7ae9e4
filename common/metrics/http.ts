import { Counter, Gauge, type Registry } from "./prom.ts";
import { SeriesHistogram } from "./series-histogram.ts";

/** The HTTP metrics of SPEC's catalogue (SPEC: POST /character/chat, Metric catalogue), on the API. */

/** Label value for requests that matched no route, so scanners cannot create new series. */
export const UNMATCHED_ENDPOINT = "unmatched";

export const HTTP_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

export interface HttpMetrics {
  requests: Counter<"method" | "endpoint" | "status_code">;
  duration: SeriesHistogram<"method" | "endpoint">;
  inProgress: Gauge<"method" | "endpoint">;
  /**
   * Runs `flush` before the request counter and the in-progress gauge are read (an exposition, or
   * their get()), so that a recorder that counts in plain numbers on the request path writes them
   * there first.
   */
  beforeRead(flush: () => void): void;
}

export function createHttpMetrics(api: Registry[]): HttpMetrics {
  const httpFlushes: (() => void)[] = [];
  const flushHttp = () => {
    for (const flush of httpFlushes) flush();
  };
  return {
    requests: new Counter({
      name: "http_requests_total",
      help: "HTTP requests handled, by method, route template and status code.",
      labelNames: ["method", "endpoint", "status_code"],
      registers: api,
      collect: flushHttp,
    }),
    duration: new SeriesHistogram({
      name: "http_request_duration_seconds",
      help: "HTTP request duration in seconds, until the last byte of a stream.",
      labelNames: ["method", "endpoint"],
      buckets: HTTP_BUCKETS,
      registers: api,
    }),
    inProgress: new Gauge({
      name: "http_requests_in_progress",
      help: "HTTP requests being handled right now, streams included.",
      labelNames: ["method", "endpoint"],
      registers: api,
      collect: flushHttp,
    }),
    beforeRead: (flush) => void httpFlushes.push(flush),
  };
}
