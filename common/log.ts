import type { LogLevel } from "./config.ts";

const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export type LogFields = Record<string, unknown>;

export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  child(fields: LogFields): Logger;
}

export interface LoggerOptions {
  level?: LogLevel;
  /** Where lines go; JSON lines on stderr by default so stdout stays free for CLI output. */
  write?: (line: string) => void;
  fields?: LogFields;
  /**
   * Values that must never be written (API keys, passwords): replaced by [redacted] wherever they
   * occur in a line. Upstream errors quote response bodies, and a gateway may quote the key it was sent.
   */
  secrets?: readonly string[];
}

export const REDACTED = "[redacted]";
/** Shorter values would blank out ordinary words; no real key or password is this short. */
const MIN_SECRET_CHARS = 4;

/** Replaces each secret, as written raw, JSON-escaped or percent-encoded, with REDACTED. */
function createRedactor(secrets: readonly string[]): (text: string) => string {
  const forms = [
    ...new Set(secrets.filter((s) => s.length >= MIN_SECRET_CHARS).flatMap((s) => [s, JSON.stringify(s).slice(1, -1), encodeURIComponent(s)])),
  ].sort((a, b) => b.length - a.length);
  if (forms.length === 0) return (text) => text;
  return (text) => forms.reduce((out, form) => out.replaceAll(form, REDACTED), text);
}

function serialise(value: unknown): unknown {
  if (value instanceof Error) return { name: value.name, message: value.message };
  return value;
}

/** One JSON object per line: easy to grep locally and to ship to any log collector. */
export function createLogger(options: LoggerOptions = {}): Logger {
  const threshold = ORDER[options.level ?? "info"];
  const write = options.write ?? ((line: string) => process.stderr.write(line + "\n"));
  const base = options.fields ?? {};
  const redact = createRedactor(options.secrets ?? []);
  const emit = (level: LogLevel, msg: string, fields?: LogFields) => {
    if (ORDER[level] < threshold) return;
    const record: LogFields = { time: new Date().toISOString(), level, msg, ...base };
    for (const [k, v] of Object.entries(fields ?? {})) record[k] = serialise(v);
    write(redact(JSON.stringify(record)));
  };
  return {
    debug: (m, f) => emit("debug", m, f),
    info: (m, f) => emit("info", m, f),
    warn: (m, f) => emit("warn", m, f),
    error: (m, f) => emit("error", m, f),
    child: (fields) => createLogger({ ...options, fields: { ...base, ...fields } }),
  };
}

/** For tests and libraries used without a configured logger. */
export const silentLogger: Logger = createLogger({ write: () => {} });
