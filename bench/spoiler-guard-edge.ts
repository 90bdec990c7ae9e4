/**
 * The spoiler guard's data of one large book on workerd, the Workers runtime, where an isolate has
 * 128 MB in all: `bun bench/spoiler-guard-edge.ts [--mb 51]`.
 *
 * The book is the non-repeating text of bench/large-book.ts (War and Peace, then copies of it with each
 * paragraph's words shuffled). Its shingle index is built and stored as ingestion does; a Worker made
 * of common/prompt/book-shingles.ts alone (bundled by `bun build`, served by workerd with wrangler.jsonc's
 * compatibility date and flags) fetches the stored value over loopback, as a database driver would,
 * decodes it and keeps it, as the API's guard cache does. Reported: workerd's resident memory from
 * /proc before and after, and the time of the load.
 */
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { buildShingleIndex } from "../common/prompt/book-shingles.ts";
import { extractWork } from "../ingest/book-text.ts";
import { freePort } from "../tests/support/process.ts";
import { answerHelp, generatedNovel, nonRepeatingText, SHARED_BOOKS_DIR } from "./support.ts";

answerHelp("usage: bun bench/spoiler-guard-edge.ts [--mb 51]\n\nThe memory one large book's spoiler-guard data takes in a workerd isolate.");
const { values } = parseArgs({ args: process.argv.slice(2), options: { mb: { type: "string", default: "51" } } });
const bytes = Number(values.mb) * 1e6;
const WORKERD = resolve(import.meta.dir, "..", "node_modules", ".bin", "workerd");
const warAndPeace = join(SHARED_BOOKS_DIR, "pg2600_war_and_peace.txt");
const text = existsSync(warAndPeace) ? nonRepeatingText(extractWork(readFileSync(warAndPeace, "utf8")).text, bytes) : generatedNovel(bytes);
const index = buildShingleIndex(text);
const stored = index.encode();

const WORKER = `
import { decodeShingleIndex } from ${JSON.stringify(resolve(import.meta.dir, "..", "common", "prompt", "book-shingles.ts"))};
const held = [];
export default {
  async fetch(request) {
    const from = new URL(request.url).searchParams.get("from");
    if (!from) return new Response("ok");
    const index = decodeShingleIndex(await (await fetch(from)).text());
    held.push(index);
    return Response.json({ keys: index.size, bytes: index.bytes });
  },
};
`;

const dir = await mkdtemp(join(tmpdir(), "bench-guard-edge-"));
const value = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response(stored) });
let workerd: ReturnType<typeof Bun.spawn> | undefined;
try {
  await writeFile(join(dir, "worker.js"), WORKER);
  const built = await Bun.build({ entrypoints: [join(dir, "worker.js")], outdir: dir, naming: "bundle.js", target: "browser", format: "esm", external: ["node:*"] });
  if (!built.success) throw new Error(built.logs.join("\n"));
  const wrangler = JSON.parse(readFileSync(resolve(import.meta.dir, "..", "wrangler.jsonc"), "utf8").split("\n").filter((l) => !l.trimStart().startsWith("//")).join("\n"));
  const port = await freePort();
  await writeFile(
    join(dir, "config.capnp"),
    `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [(name = "main", worker = .w), (name = "internet", network = (allow = ["public", "private", "local"]))],
  sockets = [(name = "http", address = "127.0.0.1:${port}", http = (), service = "main")],
);
const w :Workerd.Worker = (modules = [(name = "bundle.js", esModule = embed "bundle.js")], compatibilityDate = ${JSON.stringify(wrangler.compatibility_date)}, compatibilityFlags = ${JSON.stringify(wrangler.compatibility_flags ?? [])});
`,
  );
  workerd = Bun.spawn([WORKERD, "serve", join(dir, "config.capnp")], { stdout: "ignore", stderr: "inherit" });
  const memory = () => {
    const status = readFileSync(`/proc/${workerd!.pid}/status`, "utf8");
    return Number(/^VmRSS:\s+(\d+) kB/m.exec(status)![1]) / 1024;
  };
  const base = `http://127.0.0.1:${port}/`;
  for (let i = 0; ; i++) {
    const up = await fetch(base).then((r) => r.ok, () => false);
    if (up) break;
    if (i > 200) throw new Error("workerd did not start");
    await Bun.sleep(50);
  }
  const before = memory();
  const started = performance.now();
  const answer = (await (await fetch(`${base}?from=${encodeURIComponent(`http://127.0.0.1:${value.port}/`)}`)).json()) as { keys: number; bytes: number };
  const loadMs = performance.now() - started;
  await Bun.sleep(500);
  const after = memory();
  console.log(
    [
      `book: ${(Buffer.byteLength(text) / 1e6).toFixed(1)} MB, ${index.size} keys kept (window ${index.window}); stored ${(stored.length / 1e6).toFixed(1)} MB`,
      "",
      "| keys in the isolate | their bytes MiB | load ms | workerd RSS MiB before → after |",
      "| --- | --- | --- | --- |",
      `| ${answer.keys} | ${(answer.bytes / 2 ** 20).toFixed(1)} | ${loadMs.toFixed(0)} | ${before.toFixed(0)} → ${after.toFixed(0)} |`,
    ].join("\n"),
  );
} finally {
  workerd?.kill();
  await workerd?.exited;
  value.stop(true);
  await rm(dir, { recursive: true, force: true });
}
