import { cpus, totalmem, tmpdir } from "node:os";
import { existsSync } from "node:fs";
import { cp, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { migrate } from "../common/db/migrate.ts";
import { createPgliteDatabase } from "../common/db/pglite.ts";
import { seededRandom } from "../tests/support/seeded-random.ts";

/** What every benchmark table is headed by, so a figure is never read without its machine. */
export function machineHeader(): string {
  const cpu = cpus()[0]?.model.trim() ?? "unknown CPU";
  const memory = `${(totalmem() / 2 ** 30).toFixed(1)} GiB`;
  return `Machine: ${cpu}, ${cpus().length} cores, ${memory} memory · Bun ${Bun.version} · ${new Date().toISOString().slice(0, 10)}`;
}

export interface Summary {
  median: number;
  min: number;
  max: number;
}

export function summarise(values: readonly number[]): Summary {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  const median = sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
  return { median, min: sorted[0]!, max: sorted[sorted.length - 1]! };
}

export function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

/** "12.3 (11.9–13.0)": the median, then the range, of one figure over its runs. */
export function formatSummary(s: Summary, digits = 0): string {
  if (s.min === s.max) return s.median.toFixed(digits);
  return `${s.median.toFixed(digits)} (${s.min.toFixed(digits)}–${s.max.toFixed(digits)})`;
}

export function markdownTable(header: readonly string[], rows: readonly (readonly (string | number)[])[]): string {
  const line = (cells: readonly (string | number)[]) => `| ${cells.join(" | ")} |`;
  return [line(header), line(header.map(() => "---")), ...rows.map(line)].join("\n");
}

/** The shared development books, when this checkout sits beside them. */
export const SHARED_BOOKS_DIR = join(import.meta.dir, "..", "..", "shared", "books");

/** What a section receives from bench/run.ts. */
export interface BenchContext {
  /** A short smoke run: fewer repetitions and smaller loads, figures not worth publishing. */
  quick: boolean;
  books: readonly BenchBook[];
  /** Progress, to stderr, so that stdout holds only the tables. */
  progress(message: string): void;
}

export interface BenchSection {
  title: string;
  /** Markdown: a line saying what was measured and how often, then tables and notes. */
  body: string;
}

/** When the command line asks for help (--help or -h), prints the script's usage and exits: every script run on its own answers it. */
export function answerHelp(usage: string): void {
  if (!process.argv.includes("--help") && !process.argv.includes("-h")) return;
  console.log(usage.trim());
  process.exit(0);
}

/** A section of `bun run bench` started on its own: says how to run it, whatever the arguments. */
export function runsInBench(section: string): void {
  console.log(`usage: bun run bench --only ${section}\n\nThis file is the "${section}" section of the benchmarks (bench/run.ts runs it and writes bench/results/<date>.md).`);
  process.exit(0);
}

/**
 * A bench process of ours (`bun <script> <args>`) that prints `lines` lines (its addresses) when it is
 * ready; it holds our pipe to its stdin and exits when that closes (exitWithParent).
 */
export async function spawnChild(script: string, args: readonly string[], lines: number): Promise<{ lines: string[]; pid: number; stop(): void }> {
  return spawnCommand([process.execPath, script, ...args], lines);
}

/** spawnChild for any command (another runtime's), with `env` as its whole environment when given. */
export async function spawnCommand(command: readonly string[], lines: number, env?: Record<string, string>): Promise<{ lines: string[]; pid: number; stop(): void }> {
  const child = Bun.spawn([...command], { stdin: "pipe", stdout: "pipe", stderr: "inherit", ...(env ? { env } : {}) });
  const reader = child.stdout.getReader();
  const decoder = new TextDecoder();
  let out = "";
  while (out.split("\n").length <= lines) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`${command.join(" ")} exited before it was ready`);
    out += decoder.decode(value, { stream: true });
  }
  reader.releaseLock();
  return { lines: out.split("\n").slice(0, lines).map((line) => line.trim()), pid: child.pid, stop: () => child.kill() };
}

/** In a process started by spawnChild: exits when the parent does, however it exits (its pipe to our stdin closes). */
export function exitWithParent(): void {
  void (async () => {
    for await (const _ of Bun.stdin.stream());
    process.exit(0);
  })();
}

/** The value after `--name` on the command line of a script run on its own. */
export function option(name: string): string | undefined {
  const k = process.argv.indexOf(name);
  return k > 0 ? process.argv[k + 1] : undefined;
}

/** Full runs, or the quick smoke run's count. */
export const reps = (ctx: Pick<BenchContext, "quick">, full: number, quick = 1) => (ctx.quick ? quick : full);

/** Milliseconds of each of `runs` calls, after `warmup` untimed ones; and the last call's result. */
export async function timeRuns<T>(runs: number, fn: () => T | Promise<T>, warmup = 0): Promise<{ ms: number[]; result: T }> {
  for (let i = 0; i < warmup; i++) await fn();
  const ms: number[] = [];
  let result: T | undefined;
  for (let i = 0; i < runs; i++) {
    const start = performance.now();
    result = await fn();
    ms.push(performance.now() - start);
  }
  return { ms, result: result as T };
}

/** Per thread (by id) of a process: its name, whether it is the main thread, and the nanoseconds it has spent on a CPU. */
export type ThreadTimes = Map<string, { name: string; main: boolean; ns: number }>;

/** A process's threads and their CPU time (Linux), or undefined elsewhere. */
export async function threadTimes(pid: number): Promise<ThreadTimes | undefined> {
  try {
    const tasks = await readdir(`/proc/${pid}/task`);
    const rows = await Promise.all(
      tasks.map(async (task) => {
        const [comm, schedstat] = await Promise.all([readFile(`/proc/${pid}/task/${task}/comm`, "utf8"), readFile(`/proc/${pid}/task/${task}/schedstat`, "utf8")]);
        return [task, { name: comm.trim(), main: task === String(pid), ns: Number(schedstat.split(" ")[0]) }] as const;
      }),
    );
    return new Map(rows);
  } catch {
    return undefined;
  }
}

/**
 * Nanoseconds a process's threads have spent on a CPU (Linux), or undefined elsewhere: threads that
 * have exited are not counted. On a shared machine a server's CPU time per request moves far less
 * than its rate or its latency.
 */
export async function cpuNanoseconds(pid: number): Promise<number | undefined> {
  const times = await threadTimes(pid);
  return times && [...times.values()].reduce((sum, t) => sum + t.ns, 0);
}

/** Clock ticks per second of /proc's CPU times (USER_HZ: 100 on every Linux this runs on). */
const USER_HZ = 100;

/**
 * Nanoseconds of CPU a process has used (Linux), threads that have exited included, or undefined
 * elsewhere. Coarser than cpuNanoseconds (10 ms ticks) but right over seconds of a paced stream, in
 * which the engine's and Bun's helper threads come and go (summing the live threads then went
 * backwards by hundreds of milliseconds).
 */
export async function processCpuNanoseconds(pid: number): Promise<number | undefined> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, "utf8");
    // Fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return ((Number(fields[11]) + Number(fields[12])) / USER_HZ) * 1e9;
  } catch {
    return undefined;
  }
}

/** Processes' CPU nanoseconds summed (processCpuNanoseconds), or undefined when one cannot be read. */
export async function processesCpuNanoseconds(pids: readonly number[]): Promise<number | undefined> {
  const each = await Promise.all(pids.map(processCpuNanoseconds));
  return each.includes(undefined) ? undefined : each.reduce<number>((sum, ns) => sum + ns!, 0);
}

/** A process's resident set and its peak so far, in bytes (Linux /proc), or NaN where it cannot be read. */
export async function memoryOf(pid: number): Promise<{ rss: number; peak: number }> {
  const status = await readFile(`/proc/${pid}/status`, "utf8").catch(() => "");
  const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? NaN) * 1024;
  return { rss: field("VmRSS"), peak: field("VmHWM") };
}

export interface ProcessInfo {
  pid: number;
  /** Its command line, arguments joined by spaces. */
  command: string;
}

/** A process and every process under it, the root first (Linux; just the root elsewhere). */
export async function processTree(root: number): Promise<ProcessInfo[]> {
  const children = new Map<number, number[]>();
  try {
    for (const entry of await readdir("/proc")) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        const stat = await readFile(`/proc/${entry}/stat`, "utf8");
        const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
        children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)]);
      } catch {
        // exited meanwhile
      }
    }
  } catch {
    return [{ pid: root, command: "" }];
  }
  const pids = [root];
  for (let i = 0; i < pids.length; i++) pids.push(...(children.get(pids[i]!) ?? []));
  return Promise.all(
    pids.map(async (pid) => ({ pid, command: await readFile(`/proc/${pid}/cmdline`, "utf8").then((c) => c.split("\0").join(" ").trim(), () => "") })),
  );
}

/** Where a Bun process's CPU went: its main thread, worker threads, the engine's JIT and GC helpers, and the rest (Bun's I/O pool). */
export type ThreadGroup = "main" | "worker" | "jit and gc" | "other";

function groupOf({ name, main }: { name: string; main: boolean }): ThreadGroup {
  if (main) return "main";
  // A `new Worker()` thread: in the API, the embedded database's.
  if (name === "Worker") return "worker";
  if (/JIT|JSCWarmUp|Heap ?Helper|Helper Thread|scavenger/.test(name)) return "jit and gc";
  return "other";
}

/** Nanoseconds per thread group between two readings (threads started since count from zero). */
export function cpuByGroup(before: ThreadTimes, after: ThreadTimes): Record<ThreadGroup, number> {
  const groups: Record<ThreadGroup, number> = { main: 0, worker: 0, "jit and gc": 0, other: 0 };
  for (const [tid, t] of after) groups[groupOf(t)] += t.ns - (before.get(tid)?.ns ?? 0);
  return groups;
}

// Books -------------------------------------------------------------------------------------------

export interface BenchBook {
  title: string;
  path: string;
  bytes: number;
  /** True when ../shared/books was absent and this is generated text of the same size. */
  generated: boolean;
}

const BOOKS = [
  { title: "Alice in Wonderland", file: "pg11_alices_adventures_in_wonderland.txt", bytes: 151_040 },
  { title: "Pride and Prejudice", file: "pg1342_pride_and_prejudice.txt", bytes: 799_738 },
  { title: "War and Peace", file: "pg2600_war_and_peace.txt", bytes: 3_292_505 },
] as const;

/**
 * A novel-shaped text of about `bytes` bytes: chapters, narration and tagged dialogue among a small
 * cast, deterministic so that runs compare.
 */
export function generatedNovel(bytes: number): string {
  const cast = ["Anna Karsky", "Peter Lindqvist", "Marya Dolokhova", "Captain Reyes", "Mr. Pell", "Elinor Vance"];
  const words = "the lamp harbour letter winter road evening house garden river window candle storm bell morning field".split(" ");
  let state = 2600;
  const next = (n: number) => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    return state % n;
  };
  const sentence = () => {
    const w = Array.from({ length: 8 + next(12) }, () => words[next(words.length)]!);
    return `${w.join(" ").replace(/^./, (c) => c.toUpperCase())}.`;
  };
  const parts: string[] = [];
  let size = 0;
  for (let chapter = 1; size < bytes; chapter++) {
    parts.push(`CHAPTER ${chapter}\n`);
    for (let p = 0; p < 40 && size < bytes; p++) {
      const speaker = cast[next(cast.length)]!;
      const paragraph = next(3) === 0 ? `"${sentence()}" said ${speaker}. ${sentence()}` : `${speaker} ${sentence().toLowerCase()} ${sentence()} ${sentence()}`;
      parts.push(paragraph);
      size += paragraph.length + 2;
    }
  }
  return parts.join("\n\n");
}

/**
 * `base`, then copies of it with each paragraph's words shuffled by a seeded generator, to `bytes`:
 * a long text with a novel's vocabulary that does not repeat itself (no run of eight words recurs
 * but by chance), the same bytes on every run.
 */
export function nonRepeatingText(base: string, bytes: number): string {
  const random = seededRandom(31);
  const parts = [base];
  let size = Buffer.byteLength(base);
  while (size < bytes) {
    for (const paragraph of base.split(/\n\s*\n/)) {
      const words = paragraph.split(/\s+/).filter((w) => w !== "");
      for (let i = words.length - 1; i > 0; i--) {
        const j = Math.floor(random() * (i + 1));
        [words[i], words[j]] = [words[j]!, words[i]!];
      }
      const shuffled = words.join(" ");
      parts.push(shuffled);
      size += Buffer.byteLength(shuffled) + 2;
      if (size >= bytes) break;
    }
  }
  return parts.join("\n\n");
}

/** The three benchmark books: Alice, Pride and Prejudice and War and Peace, or generated stand-ins. */
export async function loadBooks(): Promise<{ books: BenchBook[]; cleanup(): Promise<void> }> {
  if (existsSync(SHARED_BOOKS_DIR) && BOOKS.every((b) => existsSync(join(SHARED_BOOKS_DIR, b.file)))) {
    const books = BOOKS.map((b) => ({ title: b.title, path: join(SHARED_BOOKS_DIR, b.file), bytes: Bun.file(join(SHARED_BOOKS_DIR, b.file)).size, generated: false }));
    return { books, cleanup: async () => {} };
  }
  const dir = await mkdtemp(join(tmpdir(), "bench-books-"));
  const books: BenchBook[] = [];
  for (const b of BOOKS) {
    const path = join(dir, b.file);
    await writeFile(path, generatedNovel(b.bytes));
    books.push({ title: `generated text, size of ${b.title}`, path, bytes: Bun.file(path).size, generated: true });
  }
  return { books, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

/** The line under a section title that says where its text came from. */
export function booksNote(books: readonly BenchBook[]): string {
  return books.some((b) => b.generated)
    ? `Books: ${SHARED_BOOKS_DIR} is absent, so generated novel-shaped text of the same sizes (figures are not comparable with real books).`
    : "Books: Project Gutenberg plain texts from ../shared/books.";
}

export const mb = (bytes: number) => bytes / 1e6;

// Embedded data dirs ------------------------------------------------------------------------------

let template: Promise<string> | undefined;

/**
 * A data dir for a service under test, with the embedded database already created and migrated. A
 * fresh PGlite data dir runs initdb, which costs seconds (tens of them on a busy machine) and would
 * otherwise be counted in every ingestion and every server start; it is paid once per bench run
 * here and copied. What runs in the copy starts exactly as on a machine that has run migrations once.
 */
export async function freshDataDir(): Promise<string> {
  template ??= (async () => {
    const dir = await mkdtemp(join(tmpdir(), "bench-template-"));
    const db = await createPgliteDatabase({ dataDir: join(dir, "pg") });
    await migrate(db);
    await db.close();
    return dir;
  })();
  const dir = await mkdtemp(join(tmpdir(), "bench-data-"));
  await cp(await template, dir, { recursive: true });
  return dir;
}

export async function removeDataDirTemplate(): Promise<void> {
  if (template) await rm(await template, { recursive: true, force: true });
  template = undefined;
}

// ---------------------------------------------------------------------------------------------
// CPU profiles of runtimes other than Bun (Deno, workerd), through their V8 inspector: the Chrome
// DevTools protocol's Profiler domain over the WebSocket the runtime lists at `/json/list`.

/** A Chrome .cpuprofile, as V8 writes it. */
export interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; children?: number[] }[];
  samples: number[];
  timeDeltas: number[];
}

/** Sampling interval: V8's default is 1 ms, too coarse for a turn of a few milliseconds. */
const SAMPLING_INTERVAL_US = 100;

export interface InspectorSession {
  send(method: string, params?: Record<string, unknown>): Promise<unknown>;
  close(): void;
}

/** A session with the first target of the V8 inspector on this loopback port (Deno's, workerd's). */
export async function openInspector(port: number): Promise<InspectorSession> {
  const [target] = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as { webSocketDebuggerUrl: string }[];
  if (!target) throw new Error(`the inspector on port ${port} lists no target`);
  const socket = new WebSocket(target.webSocketDebuggerUrl);
  await new Promise<void>((resolve, reject) => {
    socket.onopen = () => resolve();
    socket.onerror = () => reject(new Error(`could not open ${target.webSocketDebuggerUrl}`));
  });
  const waiting = new Map<number, { resolve(result: unknown): void; reject(error: Error): void }>();
  socket.onmessage = (event) => {
    const message = JSON.parse(String(event.data)) as { id?: number; result?: unknown; error?: { message: string } };
    const call = message.id === undefined ? undefined : waiting.get(message.id);
    if (!call) return;
    waiting.delete(message.id!);
    if (message.error) call.reject(new Error(message.error.message));
    else call.resolve(message.result);
  };
  let nextId = 0;
  return {
    send: (method, params = {}) =>
      new Promise<unknown>((resolve, reject) => {
        const id = ++nextId;
        waiting.set(id, { resolve, reject });
        socket.send(JSON.stringify({ id, method, params }));
      }),
    close: () => socket.close(),
  };
}

/** The CPU profile of the runtime whose inspector listens on `port`, sampled while `during` runs. */
export async function profileThroughInspector(port: number, during: () => Promise<void>): Promise<CpuProfile> {
  const { send, close } = await openInspector(port);
  try {
    await send("Profiler.enable");
    await send("Profiler.setSamplingInterval", { interval: SAMPLING_INTERVAL_US });
    await send("Profiler.start");
    await during();
    return ((await send("Profiler.stop")) as { profile: CpuProfile }).profile;
  } finally {
    close();
  }
}

/** Runs a run's cleanups, the latest first, each whatever the others did: every resource is temporary. */
export async function runCleanups(cleanups: readonly (() => unknown)[]): Promise<void> {
  for (const cleanup of [...cleanups].reverse()) {
    try {
      await cleanup();
    } catch {
      // Best effort: one resource left behind must not keep the others.
    }
  }
}
