import type { ErrorBody } from "../common/contract/schemas.ts";

/**
 * What the API refuses before any route sees a request, so that a web page on another site cannot
 * use a browser as its way in (the API has no authentication of its own):
 *
 * - a request with no host at all (400): HTTP/1.1 requires `Host` (RFC 9112 §3.2), HTTP/1.0 may leave
 *   it out. Such a request cannot be DNS rebinding (every browser sends `Host`), but nothing names
 *   what it is addressed to, so it is refused rather than guessed. A runtime that names the request
 *   itself (Deno puts its listening address in the URL) and in-process callers give an absolute URL,
 *   whose host is judged like a `Host` header.
 * - a `Host` that is not one of ours (403): a page on evil.example whose name is made to resolve to
 *   127.0.0.1 (DNS rebinding) reaches a loopback-bound API as a *same-origin* page and can read
 *   every answer. Host names that cannot be re-pointed are always allowed: IP literals, `localhost`
 *   and `*.localhost` (browsers resolve those to loopback themselves); others only when listed.
 * - a state-changing request (any method but GET, HEAD and OPTIONS) from a browser page of another
 *   origin (403): by its `Origin`, or, without one, by `Sec-Fetch-Site` saying cross-site or
 *   same-site. Requests without either (servers, curl) are not a browser's and pass.
 * - a state-changing request with a body or a content type that is not JSON (415): a page can send text/plain, form and
 *   multipart bodies anywhere without asking first (no CORS preflight); JSON needs the preflight,
 *   which this API never grants.
 */

export interface RequestGuardOptions {
  /** Host names accepted beyond IP literals and localhost names; "*" accepts any. DEFAULT_ALLOWED_HOSTS when unset. */
  allowedHosts?: readonly string[] | "*";
  /** Origins (`https://app.example.com`) whose pages may send state-changing requests; "*" any. Same origin only when unset. */
  allowedOrigins?: readonly string[] | "*";
}

export const DEFAULT_ALLOWED_HOSTS: readonly string[] = [];
export const DEFAULT_ALLOWED_ORIGINS: readonly string[] = [];

export const NO_HOST_ERROR = "the request has no Host header: name the host the request is for";
export const NOT_JSON_ERROR = "the request body must be application/json";
export const FOREIGN_ORIGIN_EXAMPLE = "requests from the origin https://elsewhere.example are not allowed: add it to ALLOWED_ORIGINS";

/** The refusals of every state-changing route, as their documentation lists them. */
export const GUARD_REFUSALS_DOC = `- **403**: the \`Host\` is not an allowed name (\`ALLOWED_HOSTS\`), or a browser page of another origin sent
  the request (\`ALLOWED_ORIGINS\`).
- **415**: the body is not sent as \`application/json\`.`;

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);
const FOREIGN_FETCH_SITES = new Set(["cross-site", "same-site"]);

/** `application/json`, with or without parameters, and structured-syntax types like `application/problem+json`. */
export function isJsonMediaType(contentType: string | null): boolean {
  const mediaType = contentType?.split(";")[0]!.trim().toLowerCase() ?? "";
  return mediaType === "application/json" || /^application\/[a-z0-9.!#$&^_-]+\+json$/.test(mediaType);
}

/**
 * The host a request is addressed to: its `Host` header, else the host of its URL when that is
 * absolute; undefined when there is none (Bun gives a request without `Host` the bare path as URL).
 */
export function requestHost(request: Request): string | undefined {
  const header = request.headers.get("host");
  if (header !== null) return header;
  return URL.canParse(request.url) ? new URL(request.url).host : undefined;
}

/** The host name of a `Host` value (`name[:port]`, `[v6][:port]`), lower case; undefined when it is not one. */
export function hostNameOf(host: string): string | undefined {
  try {
    const { hostname, username, password, pathname, search, hash } = new URL(`http://${host}`);
    if (username || password || pathname !== "/" || search || hash) return undefined;
    return hostname.toLowerCase();
  } catch {
    return undefined;
  }
}

const IPV4 = /^\d{1,3}(\.\d{1,3}){3}$/;

/** A host name that DNS cannot re-point: an IP literal, `localhost` or a name under `.localhost`. */
export function isFixedHostName(hostname: string): boolean {
  return IPV4.test(hostname) || hostname.startsWith("[") || hostname === "localhost" || hostname.endsWith(".localhost");
}

/** Whether the request carries a body (a POST without one, to a route that serves none, is a 405 rather than a 415). */
function hasBody(request: Request): boolean {
  const declared = request.headers.get("content-length");
  if (request.headers.has("transfer-encoding")) return true;
  return declared === null ? request.body !== null : Number(declared) > 0;
}

/** Host values whose verdict is remembered (see createRequestGuard). */
export const HOST_VERDICTS_KEPT = 64;

const refusal = (status: 400 | 403 | 415, error: string) => Response.json({ error } satisfies ErrorBody, { status });

/** Returns the refusal for a request the API must not serve, or undefined to serve it. */
export function createRequestGuard(options: RequestGuardOptions = {}): (request: Request) => Response | undefined {
  const allowedHosts = options.allowedHosts ?? DEFAULT_ALLOWED_HOSTS;
  const hosts = allowedHosts === "*" ? "*" : new Set(allowedHosts.map((h) => h.toLowerCase()));
  const allowedOrigins = options.allowedOrigins ?? DEFAULT_ALLOWED_ORIGINS;
  const origins = allowedOrigins === "*" ? "*" : new Set(allowedOrigins.map((o) => new URL(o).origin));

  /** Why a Host value is refused, or null when it is allowed. */
  const judgeHost = (host: string): string | null => {
    const hostname = hostNameOf(host);
    if (hostname === undefined) return "the Host header is not a host name";
    if (hosts !== "*" && !isFixedHostName(hostname) && !hosts.has(hostname)) return `host ${hostname} is not allowed: add it to ALLOWED_HOSTS`;
    return null;
  };
  // A server sees a handful of Host values: each is parsed once, not on every request (the parse was a
  // quarter of GET /health's CPU). Bounded, so a client inventing names cannot grow it.
  const verdicts = new Map<string, string | null>();

  return (request) => {
    const host = requestHost(request);
    if (host === undefined) return refusal(400, NO_HOST_ERROR);
    let verdict = verdicts.get(host);
    if (verdict === undefined) {
      verdict = judgeHost(host);
      if (verdicts.size >= HOST_VERDICTS_KEPT) verdicts.clear();
      verdicts.set(host, verdict);
    }
    if (verdict !== null) return refusal(403, verdict);
    if (SAFE_METHODS.has(request.method)) return undefined;

    if (origins !== "*") {
      const origin = request.headers.get("origin");
      if (origin !== null) {
        let sameOrigin = false;
        try {
          const parsed = new URL(origin);
          sameOrigin = parsed.host.toLowerCase() === host.toLowerCase() || origins.has(parsed.origin);
        } catch {
          // "null" (a sandboxed or file: page) and anything else unparseable is nobody's origin.
        }
        if (!sameOrigin) return refusal(403, `requests from the origin ${origin} are not allowed: add it to ALLOWED_ORIGINS`);
      } else if (FOREIGN_FETCH_SITES.has(request.headers.get("sec-fetch-site") ?? "")) {
        return refusal(403, "requests from another site are not allowed");
      }
    }
    const contentType = request.headers.get("content-type");
    if ((contentType !== null || hasBody(request)) && !isJsonMediaType(contentType)) return refusal(415, NOT_JSON_ERROR);
    return undefined;
  };
}
