// The layering of api/, ingest/ and common/ (see ARCHITECTURE.md), read from the source itself so a
// new import that breaks it fails here rather than in a review.
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, posix, relative, resolve } from "node:path";

const ROOT = resolve(import.meta.dir, "..", "..");
const SOURCE_FOLDERS = ["api", "ingest", "common"];

export type ImportKind = "static" | "dynamic" | "worker";
export interface ImportRef {
  specifier: string;
  kind: ImportKind;
}

// Whole-line comments are dropped so a commented-out import is not counted; string contents such as
// "http://…" survive because only lines that start with a comment marker are removed.
function withoutComments(source: string): string {
  return source
    .replace(/\/\*[\s\S]*?\*\//g, "")
    .split("\n")
    .filter((line) => !/^\s*\/\//.test(line))
    .join("\n");
}

const STATIC_IMPORT = /^\s*(?:import|export)\b[^;"'`]*?\bfrom\s*["']([^"']+)["']/gm;
const BARE_IMPORT = /^\s*import\s*["']([^"']+)["']/gm;
const DYNAMIC_IMPORT = /\bimport\(\s*["']([^"']+)["']\s*\)/g;
const WORKER_URL = /\bnew\s+URL\(\s*["']([^"']+\.ts)["']\s*,\s*import\.meta\.url\s*\)/g;

export function scanImports(source: string): ImportRef[] {
  const code = withoutComments(source);
  const found: ImportRef[] = [];
  const collect = (pattern: RegExp, kind: ImportKind) => {
    for (const match of code.matchAll(pattern)) found.push({ specifier: match[1]!, kind });
  };
  collect(STATIC_IMPORT, "static");
  collect(BARE_IMPORT, "static");
  collect(DYNAMIC_IMPORT, "dynamic");
  collect(WORKER_URL, "worker");
  return found;
}

function sourceFiles(folder: string): string[] {
  return readdirSync(join(ROOT, folder), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts"))
    .map((entry) => relative(ROOT, join(entry.parentPath, entry.name)).split("\\").join("/"))
    .sort();
}

interface Graph {
  /** File → the project files it imports (repo-relative paths). */
  edges: Map<string, string[]>;
  /** File → the packages it imports (bare specifiers, node: builtins left out). */
  packages: Map<string, string[]>;
}

function readGraph(): Graph {
  const edges = new Map<string, string[]>();
  const packages = new Map<string, string[]>();
  for (const file of SOURCE_FOLDERS.flatMap(sourceFiles)) {
    const refs = scanImports(readFileSync(join(ROOT, file), "utf8"));
    const local = refs.filter((r) => r.specifier.startsWith("."));
    edges.set(file, [...new Set(local.map((r) => posix.normalize(posix.join(dirname(file), r.specifier))))]);
    packages.set(file, [...new Set(refs.map((r) => r.specifier).filter((s) => !s.startsWith(".") && !s.startsWith("node:")))]);
  }
  return { edges, packages };
}

// Bottom to top. A file may import its own layer or any layer below it, never one above.
const PORTS = ["db", "kv", "vector", "text-index", "llm", "rerank", "metrics"];
const DOMAIN = ["retrieval", "prompt", "local"];
const COMPOSITION = ["common/config.ts", "common/deps.ts", "common/edge-deps.ts", "common/deps-assembly.ts", "common/db/migrate-cli.ts"];

export type Layer = "contract" | "ports" | "domain" | "composition" | "api" | "ingest";
const RANK: Record<Layer, number> = { contract: 0, ports: 1, domain: 2, composition: 3, api: 4, ingest: 4 };

export function layerOf(file: string): Layer {
  const [top, second] = file.split("/");
  if (top === "api") return "api";
  if (top === "ingest") return "ingest";
  // The composition root: the typed config, the adapter factories that pick an adapter from it, deps.ts that wires
  // them (edge-deps.ts for the edge runtimes, deps-assembly.ts what both do once the adapters are
  // chosen), and the migration command. The config reads its defaults from config-defaults.ts, below
  // everything, like every module whose own options default to a setting.
  if (COMPOSITION.includes(file) || /^common\/[a-z-]+\/create\.ts$/.test(file)) return "composition";
  // The job queue is a shared helper written against the key-value port, so it lives above the ports.
  if (file === "common/queue.ts") return "domain";
  if (second === "contract") return "contract";
  if (PORTS.includes(second!)) return "ports";
  if (DOMAIN.includes(second!)) return "domain";
  return "contract";
}

// Imports that break the layering on purpose. Each needs its reason; keep this list short.
const ALLOWED_UPWARD: Record<string, string> = {
  "api/start.ts -> ingest/jobs/queue-consumer.ts": "`npm start` is the one-process laptop mode: it runs the ingest worker beside the API",
  "api/start.ts -> ingest/sample-book.ts": "`npm start` seeds the sample book through the ingest pipeline on a first run",
};

// Each vendor SDK may be imported only inside the adapter folder that wraps it.
const VENDOR_HOMES: Record<string, string> = {
  "@neondatabase/serverless": "common/db/",
  "@electric-sql/pglite": "common/db/",
  "@upstash/redis": "common/kv/",
  "@qdrant/js-client-rest": "common/vector/",
  typesense: "common/text-index/",
  "prom-client": "common/metrics/",
  openai: "common/llm/",
};

function packageName(specifier: string): string {
  const parts = specifier.split("/");
  return specifier.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0]!;
}

/** Every import circle, each reported once as the files along it. */
function circles(edges: Map<string, string[]>): string[][] {
  // Tarjan's strongly connected components: any component with more than one file (or a self-import) is a circle.
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (file: string) => {
    index.set(file, counter);
    low.set(file, counter);
    counter++;
    stack.push(file);
    onStack.add(file);
    for (const next of edges.get(file) ?? []) {
      if (!edges.has(next)) continue;
      if (!index.has(next)) {
        visit(next);
        low.set(file, Math.min(low.get(file)!, low.get(next)!));
      } else if (onStack.has(next)) {
        low.set(file, Math.min(low.get(file)!, index.get(next)!));
      }
    }
    if (low.get(file) === index.get(file)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== file);
      if (component.length > 1 || (edges.get(file) ?? []).includes(file)) found.push(component.sort());
    }
  };
  for (const file of edges.keys()) if (!index.has(file)) visit(file);
  return found.sort((a, b) => a[0]!.localeCompare(b[0]!));
}

describe("the import scanner", () => {
  const cases: Array<[string, string, ImportRef[]]> = [
    ["a named import", `import { a } from "./a.ts";`, [{ specifier: "./a.ts", kind: "static" }]],
    ["a type-only import over several lines", `import type {\n  A,\n  B,\n} from "../b.ts";`, [{ specifier: "../b.ts", kind: "static" }]],
    ["a re-export", `export { c } from "./c.ts";`, [{ specifier: "./c.ts", kind: "static" }]],
    ["a star re-export", `export * from "./d.ts";`, [{ specifier: "./d.ts", kind: "static" }]],
    ["a side-effect import", `import "./e.ts";`, [{ specifier: "./e.ts", kind: "static" }]],
    ["a dynamic import", `const m = await import("./f.ts");`, [{ specifier: "./f.ts", kind: "dynamic" }]],
    ["a worker script", `new Worker(new URL("./g.ts", import.meta.url));`, [{ specifier: "./g.ts", kind: "worker" }]],
    ["a package import", `import { z } from "zod";`, [{ specifier: "zod", kind: "static" }]],
    ["a commented-out import", `// import { h } from "./h.ts";\n/* import "./i.ts"; */`, []],
    ["a data file URL, which is not code", `const PAGE = new URL("./page.html", import.meta.url);`, []],
    ["a URL inside a string", `const u = "http://example.com/x"; export const v = 1;`, []],
  ];
  test.each(cases)("finds %s", (_name, source, expected) => {
    expect(scanImports(source)).toEqual(expected);
  });
});

describe("the layer map", () => {
  const cases: Array<[string, Layer]> = [
    ["common/contract/schemas.ts", "contract"],
    ["common/config.ts", "composition"],
    ["common/hash.ts", "contract"],
    ["common/contract/search.ts", "contract"],
    ["common/llm/create.ts", "composition"],
    ["common/log.ts", "contract"],
    ["common/db/pglite.ts", "ports"],
    ["common/llm/offline.ts", "ports"],
    ["common/metrics/index.ts", "ports"],
    ["common/prompt/chat.ts", "domain"],
    ["common/local/control-file.ts", "domain"],
    ["common/deps.ts", "composition"],
    ["common/edge-deps.ts", "composition"],
    ["common/metrics/catalogue.ts", "ports"],
    ["api/edge/workers.ts", "api"],
    ["api/chat/turn.ts", "api"],
    ["ingest/nlp/engine.ts", "ingest"],
  ];
  test.each(cases)("puts %s in the %s layer", (file, layer) => {
    expect(layerOf(file)).toBe(layer);
  });
});

describe("the layering of api/, ingest/ and common/", () => {
  const graph = readGraph();

  test("the graph sees the files and the imports it is meant to check", () => {
    // Guards the checks below against passing because the scanner found nothing.
    expect(graph.edges.get("api/app.ts")).toContain("api/chat/index.ts");
    expect(graph.edges.get("common/llm/create.ts")).toContain("common/llm/offline.ts");
    expect(graph.edges.get("ingest/phases/book-nlp/step.ts")).toContain("ingest/phases/book-nlp/thread.ts");
    expect(graph.packages.get("common/vector/qdrant.ts")).toContain("@qdrant/js-client-rest");
  });

  test("no file imports itself back through a circle", () => {
    expect(circles(graph.edges)).toEqual([]);
  });

  test("no file imports from a layer above its own", () => {
    const upward: string[] = [];
    for (const [file, targets] of graph.edges) {
      for (const target of targets) {
        const from = layerOf(file);
        const to = layerOf(target);
        const edge = `${file} -> ${target}`;
        if (RANK[to] > RANK[from] && !(edge in ALLOWED_UPWARD)) upward.push(`${edge} (${from} -> ${to})`);
      }
    }
    expect(upward).toEqual([]);
  });

  test("api/ and ingest/ never import each other", () => {
    const across: string[] = [];
    for (const [file, targets] of graph.edges) {
      for (const target of targets) {
        const from = layerOf(file);
        const to = layerOf(target);
        const edge = `${file} -> ${target}`;
        if ((from === "api" && to === "ingest") || (from === "ingest" && to === "api")) {
          if (!(edge in ALLOWED_UPWARD)) across.push(edge);
        }
      }
    }
    expect(across).toEqual([]);
  });

  test("each vendor SDK is imported only inside its adapter folder", () => {
    const stray: string[] = [];
    for (const [file, imported] of graph.packages) {
      for (const specifier of imported) {
        const home = VENDOR_HOMES[packageName(specifier)];
        if (home && !file.startsWith(home)) stray.push(`${file} imports ${specifier} (belongs in ${home})`);
      }
    }
    expect(stray).toEqual([]);
  });

  test("only the typed config reads the environment", () => {
    const readers = [...graph.edges.keys()].filter(
      (file) => file !== "common/config.ts" && /\b(?:process\.env|Bun\.env|import\.meta\.env)\b/.test(withoutComments(readFileSync(join(ROOT, file), "utf8"))),
    );
    expect(readers).toEqual([]);
  });

  test("no source file imports an entry point, so importing library code never starts a process", () => {
    const scripts = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts;
    const entries = new Set(Object.values(scripts).flatMap((command) => [...command.matchAll(/\bbun run ([\w./-]+\.ts)\b/g)].map((m) => m[1]!)));
    expect(entries).toContain("ingest/worker.ts");
    const importers = [...graph.edges].flatMap(([file, targets]) => targets.filter((t) => entries.has(t)).map((t) => `${file} -> ${t}`));
    expect(importers).toEqual([]);
  });
});
