export type LogLevel = "debug" | "info" | "warn" | "error";
/** `text`: plain lines as SPEC says (SPEC: POST /character/chat, after the metric catalogue); `json`: one JSON object per line, for log collectors. */
export type LogFormat = "text" | "json";

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
  /** `text` (SPEC: plain text lines) or `json` (one JSON object per line); text by default. */
  format?: LogFormat;
  /**
   * Where lines go. The services log to stdout (toStdout, as SPEC says, in the same place; see common/deps.ts); the
   * default is stderr, for the CLIs whose stdout carries what they print (bun run ingest, bun run chat).
   */
  write?: (line: string) => void;
  fields?: LogFields;
  /**
   * Values that must never be written (API keys, passwords): replaced by [redacted] wherever they
   * occur in a line. Upstream errors quote response bodies, and a gateway may quote the key it was sent.
   */
  secrets?: readonly string[];
}

export const REDACTED = "[redacted]";

export const toStdout = (line: string) => void process.stdout.write(line + "\n");
const toStderr = (line: string) => void process.stderr.write(line + "\n");
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

/** A value that needs no quotes: nothing a reader (or a parser splitting on spaces) could misread. */
const BARE_VALUE = /^[^\s"=\\\p{C}]+$/u;

/** A field value for a text line: bare when safe, else JSON-quoted, so a newline becomes `\n` and the event stays one line. */
function textValue(value: unknown): string {
  if (value instanceof Error) return textValue(`${value.name}: ${value.message}`);
  const text = typeof value === "string" ? value : (JSON.stringify(value) ?? String(value));
  return BARE_VALUE.test(text) ? text : JSON.stringify(text);
}

/** Control characters (newlines above all) in the message are escaped as JSON would: one event, one line. */
const escapeControls = (text: string) => text.replace(/\p{Cc}/gu, (c) => JSON.stringify(c).slice(1, -1));

interface LogRecord { time: string; level: LogLevel; msg: string; fields: LogFields;
}

const FORMATTERS: Record<LogFormat, (record: LogRecord) => string> = {
  /** `2026-01-01T12:00:00.000Z INFO  api listening url=http://localhost:3000`: SPEC's plain text. */
  text: ({ time, level, msg, fields }) => {
    const pairs = Object.entries(fields).flatMap(([k, v]) => (v === undefined ? [] : [`${k}=${textValue(v)}`]));
    return [time, level.toUpperCase().padEnd(5), escapeControls(msg), ...pairs].join(" ");
  },
  /** One JSON object per line, for a collector that wants structure (LOG_FORMAT=json). */
  json: ({ time, level, msg, fields }) => {
    const record: LogFields = { time, level, msg };
    for (const [k, v] of Object.entries(fields)) record[k] = serialise(v);
    return JSON.stringify(record);
  },
};

export function createLogger(options: LoggerOptions = {}): Logger {
  const threshold = ORDER[options.level ?? "info"];
  const write = options.write ?? toStderr;
  const format = FORMATTERS[options.format ?? "text"];
  const base = options.fields ?? {};
  const redact = createRedactor(options.secrets ?? []);
  const emit = (level: LogLevel, msg: string, fields?: LogFields) => {
    if (ORDER[level] < threshold) return;
    write(redact(format({ time: new Date().toISOString(), level, msg, fields: { ...base, ...fields } })));
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
