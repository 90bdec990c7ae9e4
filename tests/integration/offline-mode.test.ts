import { expect, test } from "bun:test";
import { loadConfig } from "../../common/config.ts";
import { buildDeps } from "../../common/deps.ts";
import { createLogger } from "../../common/log.ts";
import { tempDirs } from "../support/temp-dirs.ts";

// The offline provider as the composition root picks it, on a laptop's defaults: the whole embedded
// stack is built (PGlite's initdb takes seconds on a busy machine), hence the long timeout.
const freshDir = tempDirs("offline-mode-");

test("announces offline mode in the start-up log when no gateway is configured", async () => {
  const lines: string[] = [];
  const deps = await buildDeps(loadConfig({ DATA_DIR: await freshDir() }), {
    logger: createLogger({ level: "info", format: "json", write: (line) => lines.push(line) }),
  });
  await deps.close();
  // On a laptop's defaults (embedded database, loopback HOST) the note is INFO: expected there, not a warning.
  const notes = lines.map((l) => JSON.parse(l) as { level: string; msg: string }).filter((l) => l.level === "info");
  expect(deps.llm.provider).toBe("offline");
  expect(notes.map((w) => w.msg)).toContain("LLM gateway not configured: offline provider (deterministic, no model)");
}, 60_000);
