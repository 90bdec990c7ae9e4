// The layering of api/, ingest/ and common/ (see ARCHITECTURE.md), read from the source itself so a
// new import that breaks it fails here rather than in a review.
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, posix, relative, resolve } from "node:path";

const ROOT = resolve(import.meta.dir, "..", "..");
const SOURCE_FOLDERS = ["api", "ingest", "common"];

export type ImportKind = "static" | "dynamic" | "worker" | "resolve";
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
const RESOLVE = /\bimport\.meta\.resolve\(\s*["']([^"']+)["']\s*\)/g;
/** The names a file takes from the module "bun": `import { SQL, type X as Y } from "bun"`. */
const BUN_NAMED_IMPORT = /^\s*import\s+(?:type\s+)?\{([^}]*)\}\s*from\s*["']bun["']/gm;
/** Bun's globals reached through the `Bun` object: `new Bun.SQL(…)`, `Bun.redis`. */
const BUN_GLOBAL = /\bBun\.([A-Za-z_$][\w$]*)/g;

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
  collect(RESOLVE, "resolve");
  return found;
}

/** What a file uses of Bun's own module, by name: imported from "bun", or read off the `Bun` global. */
export function scanBunNames(source: string): string[] {
  const code = withoutComments(source);
  const names = new Set<string>();
  for (const match of code.matchAll(BUN_NAMED_IMPORT)) {
    for (const part of match[1]!.split(",")) {
      const name = part.trim().replace(/^type\s+/, "").split(/\s+as\s+/)[0]!.trim();
      if (name) names.add(name);
    }
  }
  for (const match of code.matchAll(BUN_GLOBAL)) names.add(match[1]!);
  return [...names].sort();
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
  /** File → what it uses of Bun's own module (scanBunNames). */
  bunNames: Map<string, string[]>;
}

function readGraph(): Graph {
  const edges = new Map<string, string[]>();
  const packages = new Map<string, string[]>();
  const bunNames = new Map<string, string[]>();
  for (const file of SOURCE_FOLDERS.flatMap(sourceFiles)) {
    const source = readFileSync(join(ROOT, file), "utf8");
    const refs = scanImports(source);
    bunNames.set(file, scanBunNames(source));
    const local = refs.filter((r) => r.specifier.startsWith("."));
    edges.set(file, [...new Set(local.map((r) => posix.normalize(posix.join(dirname(file), r.specifier))))]);
    packages.set(file, [...new Set(refs.map((r) => r.specifier).filter((s) => !s.startsWith(".") && !s.startsWith("node:")))]);
  }
  return { edges, packages, bunNames };
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

// Each vendor package may be imported only where the adapters of its service live (ARCHITECTURE.md,
// rule 4): a home is a folder (ending in "/") or a file. A key ending in "/*" is a whole npm scope.
const VENDOR_HOMES: Record<string, string> = {
  "@neondatabase/serverless": "common/db/",
  "@electric-sql/pglite": "common/db/",
  "@upstash/redis": "common/kv/",
  "@qdrant/js-client-rest": "common/vector/",
  typesense: "common/text-index/",
  minisearch: "common/text-index/",
  "prom-client": "common/metrics/",
  openai: "common/llm/",
  // The web framework, its OpenAPI plugin, the Swagger UI it serves and the YAML of the document it
  // writes: HTTP is api/'s job alone.
  elysia: "api/",
  "@elysiajs/*": "api/",
  "swagger-ui-dist": "api/",
  yaml: "api/",
  // The Workers runtime's own module: only the Workers entry point reads its environment from it.
  "cloudflare:workers": "api/edge/workers.ts",
};

// Bun's own clients of a service, imported from "bun" or read off the Bun global: their adapters only.
const BUN_CLIENT_HOMES: Record<string, string> = {
  SQL: "common/db/",
  sql: "common/db/",
  RedisClient: "common/kv/",
  redis: "common/kv/",
};

// Packages with no service behind them, which any layer may use (ARCHITECTURE.md, rule 4). "bun" is
// the runtime itself; its service clients are held to BUN_CLIENT_HOMES.
const GENERAL_PACKAGES = ["zod", "gpt-tokenizer", "@noble/hashes", "bun"];

function packageName(specifier: string): string {
  const parts = specifier.split("/");
  return specifier.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0]!;
}

/** Where a package may be imported, or undefined for a general one (or one the tables do not know). */
function vendorHome(specifier: string): string | undefined {
  const name = packageName(specifier);
  return VENDOR_HOMES[name] ?? (name.startsWith("@") ? VENDOR_HOMES[`${name.split("/")[0]}/*`] : undefined);
}

const isHome = (file: string, home: string) => (home.endsWith("/") ? file.startsWith(home) : file === home);

/** Every import circle, each reported once as the files along it. */
export function circles(edges: ReadonlyMap<string, readonly string[]>): string[][] {
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

// Imports left out of the graph of folders, each with its reason: each would close a circle between
// folders that the file-level rules accept. Keep this list short; each entry is a debt against rule 2.
const FOLDER_CIRCLE_EXCEPTIONS: Record<string, string> = {};

/**
 * The folders directly inside `parent` ("" for the top of the tree), each standing for everything under
 * it, and which of them imports which. A file directly in `parent` belongs to none of them: a folder's
 * own files both use its subfolders and serve them (api/app.ts mounts api/chat, which uses api's SSE
 * writer; common/deps.ts builds every adapter, which logs through common/log.ts), and the file-level
 * rules judge those imports one by one.
 */
export function folderGraph(edges: ReadonlyMap<string, readonly string[]>, parent: string, skip: ReadonlySet<string> = new Set()): Map<string, string[]> {
  const prefix = parent === "" ? "" : `${parent}/`;
  const childOf = (file: string) => {
    if (!file.startsWith(prefix)) return undefined;
    const rest = file.slice(prefix.length).split("/");
    return rest.length > 1 ? prefix + rest[0] : undefined;
  };
  const graph = new Map<string, Set<string>>();
  for (const [file, targets] of edges) {
    const from = childOf(file);
    if (!from) continue;
    for (const target of targets) {
      const to = childOf(target);
      if (!to || to === from || skip.has(`${file} -> ${target}`)) continue;
      if (!graph.has(from)) graph.set(from, new Set());
      graph.get(from)!.add(to);
    }
  }
  return new Map([...graph].map(([from, to]) => [from, [...to].sort()]));
}

/** The top of the tree ("") and every folder with two or more folders of source files inside it: where a circle between folders can be. */
function folderParents(files: Iterable<string>): string[] {
  const children = new Map<string, Set<string>>();
  for (const file of files) {
    const parts = file.split("/");
    for (let depth = 1; depth < parts.length; depth++) {
      const parent = parts.slice(0, depth - 1).join("/");
      if (!children.has(parent)) children.set(parent, new Set());
      children.get(parent)!.add(parts[depth - 1]!);
    }
  }
  return [...children].filter(([, inside]) => inside.size > 1).map(([parent]) => parent).sort();
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
    ["a package file located with import.meta.resolve", `fetch(new URL(f, import.meta.resolve("pkg/package.json")));`, [{ specifier: "pkg/package.json", kind: "resolve" }]],
    ["an import with attributes", `import css from "pkg/a.css" with { type: "text" };`, [{ specifier: "pkg/a.css", kind: "static" }]],
  ];
  test.each(cases)("finds %s", (_name, source, expected) => {
    expect(scanImports(source)).toEqual(expected);
  });

  const bunCases: Array<[string, string, string[]]> = [
    ["a named import from bun", `import { SQL } from "bun";`, ["SQL"]],
    ["type-only and renamed names", `import { type Server, RedisClient as Client } from "bun";`, ["RedisClient", "Server"]],
    ["names over several lines", `import {\n  sql,\n  redis,\n} from "bun";`, ["redis", "sql"]],
    ["a client read off the Bun global", `const db = new Bun.SQL(url); Bun.sleep(1);`, ["SQL", "sleep"]],
    ["a commented-out import", `// import { SQL } from "bun";`, []],
    ["another package's names", `import { SQL } from "bunny";`, []],
  ];
  test.each(bunCases)("finds what a file takes from Bun: %s", (_name, source, expected) => {
    expect(scanBunNames(source)).toEqual(expected);
  });
});

describe("the graph of folders", () => {
  const edges = new Map<string, string[]>([
    ["a/root.ts", ["a/x/one.ts"]],
    ["a/x/one.ts", ["a/root.ts", "a/y/deep/two.ts"]],
    ["a/y/deep/two.ts", ["a/z/three.ts", "b/four.ts"]],
    ["a/z/three.ts", ["a/x/one.ts"]],
    ["b/four.ts", ["a/root.ts"]],
  ]);

  test("joins the imports between the folders directly inside a parent, each with everything under it", () => {
    expect(folderGraph(edges, "a")).toEqual(
      new Map([
        ["a/x", ["a/y"]],
        ["a/y", ["a/z"]],
        ["a/z", ["a/x"]],
      ]),
    );
    expect(circles(folderGraph(edges, "a"))).toEqual([["a/x", "a/y", "a/z"]]);
  });

  test("leaves out the parent's own files and everything outside it", () => {
    // a/root.ts and a/x import each other, as an app and its routes do: not a circle between folders.
    expect(folderGraph(edges, "a").get("a/x")).toEqual(["a/y"]);
    expect(folderGraph(edges, "a/y")).toEqual(new Map());
  });

  test("at the top of the tree, each top folder stands for all of it", () => {
    expect(circles(folderGraph(edges, ""))).toEqual([["a", "b"]]);
  });

  test("an excused import is not an edge", () => {
    expect(circles(folderGraph(edges, "a", new Set(["a/z/three.ts -> a/x/one.ts"])))).toEqual([]);
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
    expect(graph.packages.get("common/text-index/embedded.ts")).toContain("minisearch");
    expect(graph.packages.get("api/docs.ts")).toEqual(expect.arrayContaining(["@elysiajs/openapi", "elysia", "swagger-ui-dist/package.json"]));
    expect(graph.bunNames.get("common/db/postgres.ts")).toContain("SQL");
    expect(graph.bunNames.get("common/kv/redis.ts")).toContain("RedisClient");
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

  test("each vendor package is imported only where its service's adapters live", () => {
    const stray: string[] = [];
    for (const [file, imported] of graph.packages) {
      for (const specifier of imported) {
        const home = vendorHome(specifier);
        if (home && !isHome(file, home)) stray.push(`${file} imports ${specifier} (belongs in ${home})`);
      }
    }
    expect(stray).toEqual([]);
  });

  test("Bun's SQL and Redis clients are used only in their adapters", () => {
    const stray: string[] = [];
    for (const [file, names] of graph.bunNames) {
      for (const name of names) {
        const home = BUN_CLIENT_HOMES[name];
        if (home && !isHome(file, home)) stray.push(`${file} uses Bun's ${name} (belongs in ${home})`);
      }
    }
    expect(stray).toEqual([]);
  });

  test("every package the source imports has a home or is a general library", () => {
    const unknown = [...graph.packages].flatMap(([file, imported]) =>
      imported.filter((s) => !vendorHome(s) && !GENERAL_PACKAGES.includes(packageName(s))).map((s) => `${file} imports ${s}`),
    );
    expect(unknown).toEqual([]);
  });

  const parents = folderParents(graph.edges.keys());
  const skip = new Set(Object.keys(FOLDER_CIRCLE_EXCEPTIONS));

  test("the folders checked for circles include the top of the tree and common/'s", () => {
    expect(parents).toEqual(expect.arrayContaining(["", "api", "common", "ingest"]));
    expect(folderGraph(graph.edges, "")).toEqual(
      new Map([
        ["api", ["common", "ingest"]],
        ["ingest", ["common"]],
      ]),
    );
    expect([...folderGraph(graph.edges, "common").keys()]).toEqual(expect.arrayContaining(["common/db", "common/prompt", "common/retrieval"]));
  });

  test.each(parents.map((parent) => [parent === "" ? "the tree (api/, ingest/, common/)" : `${parent}/`, parent]))(
    "no circle between the folders of %s",
    (_name, parent) => {
      expect(circles(folderGraph(graph.edges, parent, skip))).toEqual([]);
    },
  );

  test("every excused import is still made, so a paid debt leaves the lists", () => {
    const made = new Set([...graph.edges].flatMap(([file, targets]) => targets.map((t) => `${file} -> ${t}`)));
    const stale = [...Object.keys(ALLOWED_UPWARD), ...Object.keys(FOLDER_CIRCLE_EXCEPTIONS)].filter((edge) => !made.has(edge));
    expect(stale).toEqual([]);
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
