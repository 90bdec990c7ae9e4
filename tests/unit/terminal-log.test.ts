import { afterAll, expect, test } from "bun:test";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { terminalLogger } from "../../common/local/terminal-log.ts";

const dirs: string[] = [];
afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

test("a terminal tool shows a warning as one short plain line and keeps every event, with its fields, in the log file", async () => {
  const dir = await mkdtemp(join(tmpdir(), "terminal-log-"));
  dirs.push(dir);
  const file = join(dir, "logs", "chat.log");
  const printed: string[] = [];
  const log = terminalLogger({ file, level: "info", secrets: ["sk-secret-key"], print: (line) => printed.push(line) }).child({ component: "chat" });

  log.info("query rewritten", { session_id: "s1" });
  log.warn("query rewrite failed, using the message", { error: new Error("gateway answered 503 for sk-secret-key") });
  log.error("reply failed", { code: 502 });

  expect(printed).toEqual([
    `warning: query rewrite failed, using the message (details in ${file})`,
    `error: reply failed (details in ${file})`,
  ]);
  const lines = (await readFile(file, "utf8")).trimEnd().split("\n");
  expect(lines).toHaveLength(3);
  expect(lines[0]).toMatch(/ INFO  query rewritten component=chat session_id=s1$/);
  expect(lines[1]).toMatch(/ WARN  query rewrite failed, using the message component=chat error="Error: gateway answered 503 for \[redacted\]"$/);
  expect(lines[2]).toMatch(/ ERROR reply failed component=chat code=502$/);
});
