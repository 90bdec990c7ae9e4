import type { Metrics } from "../common/metrics/index.ts";
import { UNMATCHED_ENDPOINT } from "../common/metrics/http.ts";
import { sseStreamEnd } from "./sse.ts";

/**
 * Counts, times and tracks in flight every request, labelled by the route template (`/books/:id`,
 * never the raw path) so that scanners cannot create series. A streamed response (SSE) is timed
 * until its last byte is sent or the client goes away, not until its headers leave.
 *
 * It wraps the app's fetch handler rather than hooking into the framework's lifecycle, so that the
 * status is the one on the final Response and no request escapes it (parse errors, 404s, streams).
 */

export interface RouteTable {
  routes: readonly { method: string; path: string }[];
}

type Handler = (request: Request) => Promise<Response>;

/** Maps (method, path) to the route template: a map lookup for static routes, patterns for the rest. */
function compileRoutes(table: RouteTable): (method: string, path: string) => string | undefined {
  const exact = new Map<string, string>();
  const patterns: { method: string; path: string; pattern: RegExp }[] = [];
  for (const r of table.routes) {
    const method = r.method.toUpperCase();
    if (!/[:*]/.test(r.path)) {
      exact.set(`${method} ${r.path}`, r.path);
      continue;
    }
    const source = r.path.replace(/[.+?^${}()|[\]\\]/g, "\\$&").replace(/:[^/]+/g, "[^/]+").replace(/\*$/, ".*");
    patterns.push({ method, path: r.path, pattern: new RegExp(`^${source}/?$`) });
  }
  const find = (method: string, path: string) => {
    const trimmed = path.length > 1 && path.endsWith("/") ? path.slice(0, -1) : path;
    return (
      exact.get(`${method} ${trimmed}`) ??
      exact.get(`ALL ${trimmed}`) ??
      patterns.find((r) => (r.method === method || r.method === "ALL") && r.pattern.test(path))?.path
    );
  };
  // HEAD is answered by the GET route.
  return (method, path) => find(method, path) ?? (method === "HEAD" ? find("GET", path) : undefined);
}

/** The path of a request URL without building a URL object (this runs on every request). */
function pathOf(url: string): string {
  // A request without Host has the bare path as its URL on Bun.
  const start = url.startsWith("/") ? 0 : url.indexOf("/", url.indexOf("//") + 2);
  if (start < 0) return "/";
  const end = url.slice(start).search(/[?#]/);
  return end < 0 ? url.slice(start) : url.slice(start, start + end);
}

/**
 * One (method, endpoint) pair. prom-client validates and hashes the labels on every update, even
 * through a label child, which cost GET /health about a third of its throughput; so the request
 * path only adds to plain numbers here, and they are written to the counter and the gauge when
 * those are read (Metrics.http.beforeRead). The histogram is still observed per request: it has
 * no way to add many observations at once.
 */
interface Series {
  inFlight: number;
  inProgress: { set(value: number): void };
  duration: { observe(seconds: number): void };
  /** Per status code: requests finished since the last flush, and the counter they go to. */
  finished: Map<number, { pending: number; counter: { inc(value: number): void } }>;
}

/** The series of one process's requests, shared by the wrapped app and the routes Bun serves itself. */
function createRecorder(metrics: Metrics) {
  const series = new Map<string, Series>();
  const seriesFor = (method: string, endpoint: string): Series => {
    const key = `${method} ${endpoint}`;
    let s = series.get(key);
    if (!s) {
      s = {
        inFlight: 0,
        inProgress: metrics.http.inProgress.labels({ method, endpoint }),
        duration: metrics.http.duration.series({ method, endpoint }),
        finished: new Map(),
      };
      series.set(key, s);
    }
    return s;
  };
  const finishedFor = (s: Series, method: string, endpoint: string, status: number) => {
    let f = s.finished.get(status);
    if (!f) {
      f = { pending: 0, counter: metrics.http.requests.labels({ method, endpoint, status_code: String(status) }) };
      s.finished.set(status, f);
    }
    return f;
  };
  metrics.http.beforeRead(() => {
    for (const s of series.values()) {
      s.inProgress.set(s.inFlight);
      for (const f of s.finished.values()) {
        if (f.pending === 0) continue;
        f.counter.inc(f.pending);
        f.pending = 0;
      }
    }
  });
  return { seriesFor, finishedFor };
}

const recorders = new WeakMap<Metrics, ReturnType<typeof createRecorder>>();
const recorderFor = (metrics: Metrics) => {
  let recorder = recorders.get(metrics);
  if (!recorder) recorders.set(metrics, (recorder = createRecorder(metrics)));
  return recorder;
};

/**
 * A route Bun's own router answers (`Bun.serve({ routes })`) without the app: a fixed answer that
 * needs no request, counted and timed like every other request. `GET /health` is one: probes and load
 * balancers call it most, and the framework's routing cost it a third of a bare server's rate.
 */
export function withRouteMetrics(metrics: Metrics, method: string, endpoint: string, respond: (request: Request) => Response): (request: Request) => Response {
  const { seriesFor, finishedFor } = recorderFor(metrics);
  const s = seriesFor(method, endpoint);
  return (request) => {
    const start = performance.now();
    const response = respond(request);
    finishedFor(s, method, endpoint, response.status).pending++;
    s.duration.observe((performance.now() - start) / 1000);
    metrics.aggregation?.requestFinished();
    return response;
  };
}

/** Returns `handle` wrapped with the HTTP metrics. Routes are read on the first request. */
export function withHttpMetrics(app: RouteTable, handle: Handler, metrics: Metrics): Handler {
  let match: ReturnType<typeof compileRoutes> | undefined;
  const { seriesFor, finishedFor } = recorderFor(metrics);

  return async (request) => {
    match ??= compileRoutes(app);
    const start = performance.now();
    // Methods are bounded too: anything unusual is counted as OTHER.
    const method = KNOWN_METHODS.has(request.method) ? request.method : "OTHER";
    const endpoint = match(request.method, pathOf(request.url)) ?? UNMATCHED_ENDPOINT;
    const s = seriesFor(method, endpoint);
    s.inFlight++;
    const finish = (status: number) => {
      s.inFlight--;
      finishedFor(s, method, endpoint, status).pending++;
      s.duration.observe((performance.now() - start) / 1000);
      metrics.aggregation?.requestFinished();
    };

    let response: Response;
    try {
      response = await handle(request);
    } catch (err) {
      finish(500);
      throw err;
    }
    // A stream (every one comes from api/sse.ts) is timed until it ends, not until its headers leave.
    const ended = sseStreamEnd(response);
    if (ended) void ended.then(() => finish(response.status));
    else finish(response.status);
    return response;
  };
}

const KNOWN_METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);
