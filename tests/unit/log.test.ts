import { describe, expect, test } from "bun:test";
import { createLogger, REDACTED } from "../../common/log.ts";

/** Lines written by a logger in the given format, at debug level. */
function capture(format?: "text" | "json", secrets: string[] = []) {
  const lines: string[] = [];
  return { lines, log: createLogger({ level: "debug", write: (line) => lines.push(line), secrets, ...(format ? { format } : {}) }) };
}

const TIME = String.raw`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z`;

describe("plain text lines (the default, as SPEC says)", () => {
  test("time, level, message, then key=value fields; values quoted only when they need it", () => {
    const { lines, log } = capture();
    log.child({ worker: "ab12cd34" }).info("job started", { book_id: "5a3b1e00-0000-4000-8000-000000000001", attempt: 2, ok: true, none: null, skip: undefined });
    log.warn("fold failed", { reason: "model said no", tags: ["a", "b"], cost: { tokens: 3 } });
    expect(lines[0]).toMatch(new RegExp(`^${TIME} INFO  job started worker=ab12cd34 book_id=5a3b1e00-0000-4000-8000-000000000001 attempt=2 ok=true none=null$`));
    expect(lines[1]).toMatch(new RegExp(`^${TIME} WARN  fold failed reason="model said no" tags="\\[\\\\"a\\\\",\\\\"b\\\\"\\]" cost="\\{\\\\"tokens\\\\":3\\}"$`));
  });

  test("one event is one line: newlines in the message and in values are escaped; an error shows its name and message", () => {
    const { lines, log } = capture();
    log.error("upstream said:\nno", { error: new TypeError("bad\nthing"), body: 'line 1\r\nline "2"' });
    expect(lines).toHaveLength(1);
    expect(lines[0]).not.toContain("\n");
    expect(lines[0]!.slice(25)).toBe(String.raw`ERROR upstream said:\nno error="TypeError: bad\nthing" body="line 1\r\nline \"2\""`);
  });

  test("levels below the threshold are dropped", () => {
    const lines: string[] = [];
    const log = createLogger({ level: "warn", write: (line) => lines.push(line) });
    log.info("quiet");
    log.error("loud");
    expect(lines.map((l) => l.slice(25))).toEqual(["ERROR loud"]);
  });

  test("credentials are redacted raw, quoted or percent-encoded, in the message and in any field", () => {
    const secret = 'p@ss"w\\rd-42';
    const { lines, log } = capture("text", [secret]);
    log.error(`auth failed for ${secret}`, { error: new Error(`HTTP 401: bad key ${secret}`), url: `postgres://u:${encodeURIComponent(secret)}@db/x`, plain: secret });
    expect(lines[0]).not.toContain("rd-42");
    expect(lines[0]!.slice(25)).toBe(
      `ERROR auth failed for ${REDACTED} error="Error: HTTP 401: bad key ${REDACTED}" url=postgres://u:${REDACTED}@db/x plain="${REDACTED}"`,
    );
  });
});

describe("LOG_FORMAT=json", () => {
  test("one JSON object per line: time, level, msg, then the fields, errors as {name, message}", () => {
    const { lines, log } = capture("json");
    log.child({ component: "api" }).warn("two\nlines", { error: new RangeError("out"), n: 1 });
    expect(lines).toHaveLength(1);
    const record = JSON.parse(lines[0]!);
    expect(Object.keys(record)).toEqual(["time", "level", "msg", "component", "error", "n"]);
    expect(record).toMatchObject({ level: "warn", msg: "two\nlines", component: "api", error: { name: "RangeError", message: "out" }, n: 1 });
    expect(record.time).toMatch(new RegExp(`^${TIME}$`));
  });
});
