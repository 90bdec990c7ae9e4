import { UNMATCHED_ENDPOINT, type Metrics } from "../common/metrics.ts";

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

function compileRoutes(table: RouteTable): ((method: string, path: string) => string | undefined) {
  const compiled = table.routes.map((r) => ({
    method: r.method.toUpperCase(),
    path: r.path,
    pattern: new RegExp(
      "^" + r.path.replace(/[.+?^${}()|[\]\\]/g, "\\$&").replace(/:[^/]+/g, "[^/]+").replace(/\*$/, ".*") + "/?$",
    ),
  }));
  return (method, path) => {
    // HEAD is answered by the GET route.
    const wanted = method === "HEAD" ? ["HEAD", "GET"] : [method];
    return compiled.find((r) => (wanted.includes(r.method) || r.method === "ALL") && r.pattern.test(path))?.path;
  };
}

/** Passes the body through and calls onEnd exactly once: after the last chunk, on error, or on cancel. */
function observeEnd(body: ReadableStream<Uint8Array>, onEnd: () => void): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  let ended = false;
  const end = () => {
    if (!ended) {
      ended = true;
      onEnd();
    }
  };
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done, value } = await reader.read();
        if (done) {
          end();
          controller.close();
        } else controller.enqueue(value);
      } catch (err) {
        end();
        controller.error(err);
      }
    },
    async cancel(reason) {
      end();
      await reader.cancel(reason);
    },
  });
}

/** Returns `handle` wrapped with the HTTP metrics. Routes are read on the first request. */
export function withHttpMetrics(app: RouteTable, handle: Handler, metrics: Metrics): Handler {
  let match: ReturnType<typeof compileRoutes> | undefined;

  return async (request) => {
    match ??= compileRoutes(app);
    const start = performance.now();
    const method = request.method;
    const endpoint = match(method, new URL(request.url).pathname) ?? UNMATCHED_ENDPOINT;
    metrics.http.inProgress.inc({ method, endpoint });
    const finish = (status: number) => {
      metrics.http.inProgress.dec({ method, endpoint });
      metrics.http.requests.inc({ method, endpoint, status_code: String(status) });
      metrics.http.duration.observe({ method, endpoint }, (performance.now() - start) / 1000);
    };

    let response: Response;
    try {
      response = await handle(request);
    } catch (err) {
      finish(500);
      throw err;
    }
    if (!response.body || !response.headers.get("content-type")?.startsWith("text/event-stream")) {
      finish(response.status);
      return response;
    }
    return new Response(observeEnd(response.body, () => finish(response.status)), {
      status: response.status,
      headers: response.headers,
    });
  };
}
