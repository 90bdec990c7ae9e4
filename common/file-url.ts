import { isForbiddenAddress, isIpLiteral } from "./ip-ranges.ts";
import { decodeBookBytes } from "./text-decoding.ts";

/**
 * Checks and downloads the `file_url` of a book. Used by the API (to refuse a bad book before it is
 * queued) and by the worker (to fetch it). Every refusal is a FileUrlError whose message can be shown
 * to the caller as is.
 */

export const ALLOWED_BOOK_EXTENSIONS = [".txt", ".md"] as const;
export const DEFAULT_DOWNLOAD_TIMEOUT_MS = 120_000;
/**
 * Slowest average a download may keep up once its grace period is over: 16 KiB/s brings a 2 MB novel
 * in about two minutes. A server sending a byte a second would otherwise hold a worker (and every
 * book queued behind it) for the whole timeout.
 */
export const DEFAULT_MIN_DOWNLOAD_BYTES_PER_SECOND = 16 * 1024;
export const DEFAULT_DOWNLOAD_RATE_GRACE_MS = 10_000;
export const DEFAULT_MAX_REDIRECTS = 5;
/** Bytes inspected before a file is accepted as text. */
export const TEXT_SNIFF_BYTES = 64 * 1024;

export type FileUrlRefusal =
  | "invalid_url"
  | "scheme"
  | "extension"
  | "forbidden_host"
  | "unresolvable"
  | "too_large"
  | "not_text"
  | "http_status"
  | "too_many_redirects"
  | "timeout"
  | "too_slow"
  | "unreachable";

export class FileUrlError extends Error {
  constructor(
    readonly reason: FileUrlRefusal,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = "FileUrlError";
  }
}

export type ResolveHost = (hostname: string) => Promise<string[]>;

/**
 * The runtime's resolver, loaded on first use: Bun's and Deno's own, workerd's from its nodejs_compat
 * layer (DNS over HTTPS), so the module graph of an edge build carries no static import of node:dns.
 */
const resolveWithDns: ResolveHost = async (hostname) => {
  const { lookup } = await import("node:dns/promises");
  return (await lookup(hostname, { all: true, verbatim: true })).map((a) => a.address);
};

export interface FileUrlPolicy {
  /** Entries `host` or `host:port` that skip the address check (FILE_URL_ALLOWED_HOSTS). */
  allowedHosts: readonly string[];
  resolveHost?: ResolveHost;
}

function defaultPort(url: URL): string {
  return url.port || (url.protocol === "https:" ? "443" : "80");
}

function isAllowListed(url: URL, allowedHosts: readonly string[]): boolean {
  const host = url.hostname.toLowerCase();
  const withPort = `${host}:${defaultPort(url)}`;
  return allowedHosts.some((entry) => entry === host || entry === withPort);
}

/** Checks what can be checked without downloading: syntax, scheme, extension. */
export function checkFileUrlSyntax(raw: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new FileUrlError("invalid_url", "file_url is not a valid URL");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new FileUrlError("scheme", "file_url must use http or https");
  }
  if (url.username || url.password) throw new FileUrlError("invalid_url", "file_url must not carry credentials");
  let path: string;
  try {
    path = decodeURIComponent(url.pathname).toLowerCase();
  } catch {
    throw new FileUrlError("invalid_url", "file_url has a malformed percent-encoding");
  }
  if (!ALLOWED_BOOK_EXTENSIONS.some((ext) => path.endsWith(ext))) {
    throw new FileUrlError("extension", "file_url must name a .txt or .md file");
  }
  return url;
}

/** Refuses hosts that are, or resolve to, non-public addresses, unless allow-listed. */
export async function checkFileUrlHost(url: URL, policy: FileUrlPolicy): Promise<void> {
  if (isAllowListed(url, policy.allowedHosts)) return;
  const host = url.hostname;
  let addresses: string[];
  if (isIpLiteral(host)) addresses = [host];
  else {
    try {
      addresses = await (policy.resolveHost ?? resolveWithDns)(host);
    } catch (err) {
      throw new FileUrlError("unresolvable", "file_url host cannot be resolved", { cause: err });
    }
  }
  if (addresses.length === 0) throw new FileUrlError("unresolvable", "file_url host cannot be resolved");
  if (addresses.some(isForbiddenAddress)) {
    throw new FileUrlError("forbidden_host", "file_url host is not a public address");
  }
}

export interface DownloadOptions extends FileUrlPolicy {
  maxBytes: number;
  timeoutMs?: number;
  /** Average rate below which the download is abandoned, checked once rateGraceMs have passed. */
  minBytesPerSecond?: number;
  rateGraceMs?: number;
  maxRedirects?: number;
  fetch?: (input: string | URL | Request, init?: RequestInit) => Promise<Response>;
  signal?: AbortSignal;
  /** Receives the body as it streams in; the download is refused (and stops) past maxBytes. */
  onChunk?: (chunk: Uint8Array) => void | Promise<void>;
}

export interface DownloadResult {
  url: string;
  bytes: number;
  contentType: string | null;
}

/** Follows redirects by hand so that every hop passes the same checks as the first URL. */
async function openChecked(start: URL, options: DownloadOptions, signal: AbortSignal): Promise<Response> {
  const doFetch = options.fetch ?? fetch;
  let url = start;
  for (let hop = 0; ; hop++) {
    await checkFileUrlHost(url, options);
    const res = await doFetch(url, { redirect: "manual", signal, headers: { accept: "text/plain, text/markdown, */*;q=0.1" } });
    if (res.status < 300 || res.status >= 400) return res;
    await res.body?.cancel();
    const location = res.headers.get("location");
    if (!location) throw new FileUrlError("http_status", `file_url answered ${res.status} without a location`);
    if (hop >= (options.maxRedirects ?? DEFAULT_MAX_REDIRECTS)) {
      throw new FileUrlError("too_many_redirects", "file_url redirects too many times");
    }
    url = checkRedirect(new URL(location, url));
  }
}

function checkRedirect(next: URL): URL {
  if (next.protocol !== "http:" && next.protocol !== "https:") {
    throw new FileUrlError("scheme", "file_url redirects to a scheme other than http or https");
  }
  return next;
}

/** Why the file's beginning is not text (see text-decoding.ts), or undefined when it is. */
function notText(head: Uint8Array, complete: boolean): string | undefined {
  const decoded = decodeBookBytes(head, { partial: !complete });
  return decoded.ok ? undefined : decoded.reason;
}

/**
 * Downloads file_url with every check: address policy on each hop, timeout, size limit (declared and
 * actual), and a text check on the first TEXT_SNIFF_BYTES. Streams; never holds the whole body.
 */
export async function downloadBook(raw: string, options: DownloadOptions): Promise<DownloadResult> {
  const url = checkFileUrlSyntax(raw);
  const timeout = AbortSignal.timeout(options.timeoutMs ?? DEFAULT_DOWNLOAD_TIMEOUT_MS);
  const tooSlow = new AbortController();
  const signal = AbortSignal.any([timeout, tooSlow.signal, ...(options.signal ? [options.signal] : [])]);
  const minRate = options.minBytesPerSecond ?? DEFAULT_MIN_DOWNLOAD_BYTES_PER_SECOND;
  const grace = options.rateGraceMs ?? DEFAULT_DOWNLOAD_RATE_GRACE_MS;
  const started = performance.now();
  let bytes = 0;
  // Checked on a clock, not per chunk: a server that sends nothing at all sends no chunk to check on.
  const rateCheck = setInterval(() => {
    const elapsed = performance.now() - started;
    if (elapsed >= grace && (bytes * 1000) / elapsed < minRate) tooSlow.abort();
  }, Math.max(50, Math.min(1_000, grace / 4)));
  try {
    const res = await openChecked(url, options, signal);
    if (!res.ok) {
      await res.body?.cancel();
      throw new FileUrlError("http_status", `file_url answered HTTP ${res.status}`);
    }
    const declared = Number(res.headers.get("content-length") ?? NaN);
    if (Number.isFinite(declared) && declared > options.maxBytes) {
      await res.body?.cancel();
      throw new FileUrlError("too_large", `file is larger than ${options.maxBytes} bytes`);
    }
    let head: Uint8Array = new Uint8Array(0);
    let sniffed = false;
    const reader = res.body?.getReader();
    while (reader) {
      const { done, value } = await reader.read();
      if (done) break;
      bytes += value.byteLength;
      if (bytes > options.maxBytes) {
        await reader.cancel();
        throw new FileUrlError("too_large", `file is larger than ${options.maxBytes} bytes`);
      }
      if (!sniffed) {
        head = concat(head, value.subarray(0, TEXT_SNIFF_BYTES - head.byteLength));
        if (head.byteLength >= TEXT_SNIFF_BYTES) {
          sniffed = true;
          const reason = notText(head, false);
          if (reason) {
            await reader.cancel();
            throw new FileUrlError("not_text", reason);
          }
        }
      }
      await options.onChunk?.(value);
    }
    const reason = sniffed ? undefined : notText(head, true);
    if (reason) throw new FileUrlError("not_text", reason);
    return { url: res.url || url.href, bytes, contentType: res.headers.get("content-type") };
  } catch (err) {
    if (err instanceof FileUrlError) throw err;
    if (timeout.aborted) throw new FileUrlError("timeout", "file_url did not answer in time", { cause: err });
    if (tooSlow.signal.aborted) {
      throw new FileUrlError("too_slow", `file_url sent ${bytes} bytes in ${Math.round((performance.now() - started) / 1000)} s, slower than ${minRate} bytes/s`, { cause: err });
    }
    if (options.signal?.aborted) throw err;
    throw new FileUrlError("unreachable", "file_url could not be downloaded", { cause: err });
  } finally {
    clearInterval(rateCheck);
  }
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  if (a.byteLength === 0) return b.slice();
  const out = new Uint8Array(a.byteLength + b.byteLength);
  out.set(a);
  out.set(b, a.byteLength);
  return out;
}
