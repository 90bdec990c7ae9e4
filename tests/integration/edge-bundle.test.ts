// The Workers build of the API, as wrangler bundles it for a deploy (no network): nothing in it needs a
// filesystem, threads, child processes, Bun, or the embedded defaults that stay Bun-only.
import { afterAll, expect, test } from "bun:test";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildWorkerdBundle, edgeRuntimeMissing } from "../support/edge-runtime.ts";

const FORBIDDEN = [
  /(^|\/)node_modules\/@electric-sql\/pglite\//,
  /(^|\/)node_modules\/minisearch\//,
  /^common\/(db\/(pglite|pglite-thread|postgres)|kv\/(redis|memory)|vector\/embedded|text\/embedded|embedded-store|llm\/offline)\.ts$/,
  /^common\/deps\.ts$/,
  /^(node:)?(fs|fs\/promises|worker_threads|child_process|cluster)$/,
  /^bun(:|$)/,
];

const missing = edgeRuntimeMissing("workerd");
if (missing) console.log(`skipping the Workers bundle check: ${missing}`);
const out = await mkdtemp(join(tmpdir(), "edge-bundle-"));
afterAll(() => rm(out, { recursive: true, force: true }));

test.skipIf(Boolean(missing))("the Workers bundle holds no Bun-only module, filesystem, thread or child process", async () => {
  await buildWorkerdBundle(join(out, "dist"), ["--metafile", join(out, "meta.json")]);
  const meta = JSON.parse(await readFile(join(out, "meta.json"), "utf8")) as { inputs: Record<string, { imports?: { path: string; external?: boolean }[] }> };
  const modules = [...Object.keys(meta.inputs).map((p) => p.replace(/^(\.\.\/)+main\//, "")), ...Object.values(meta.inputs).flatMap((i) => (i.imports ?? []).filter((x) => x.external).map((x) => x.path))];
  // Guards against a check that passes because the metafile lists nothing.
  expect(modules).toContain("api/edge/workers.ts");
  expect(modules.filter((m) => FORBIDDEN.some((f) => f.test(m)))).toEqual([]);
});
