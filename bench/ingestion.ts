/**
 * Section 3. Ingestion end to end on embedded defaults (PGlite, in-process key-value store, embedded
 * vector and BM25 indexes, native NLP engine): each run is `bun run ingest <book>` in its own process
 * on a fresh data dir, against the loopback LLM gateway of the ingestion tests (answers every
 * profile, persona and embedding request from its payload), once answering at once and once with a
 * model's latency. Phase times are the pipeline's own (the CLI prints them); embedding and chat
 * requests are counted by the gateway; peak RSS is the child process's.
 */
import { rm } from "node:fs/promises";
import { resolve } from "node:path";
import { PIPELINE_PHASES, type PipelinePhase } from "../common/metrics/processing.ts";
import { startScriptedGateway, type ScriptedGateway } from "../tests/fixtures/ingest/harness.ts";
import { measuredSpawn } from "./measured-spawn.ts";
import { runsInBench, booksNote, formatSummary, freshDataDir, markdownTable, mb, reps, summarise, type BenchBook, type BenchContext, type BenchSection } from "./support.ts";

const CLI = resolve(import.meta.dir, "..", "ingest", "cli.ts");
/** text-embedding-3-small's dimension: the size of what a real gateway sends and the index stores. */
const EMBEDDING_DIMENSION = 1536;

interface Latency {
  label: string;
  chatMs: number;
  embeddingsMs: number;
}

const LATENCIES: Latency[] = [
  { label: "gateway answers at once", chatMs: 0, embeddingsMs: 0 },
  { label: "gateway with a model's latency: 300 ms per chat call, 50 ms per embedding request", chatMs: 300, embeddingsMs: 50 },
];

type Phase = Exclude<PipelinePhase, "total">;
const PHASES = PIPELINE_PHASES.filter((p): p is Phase => p !== "total");

interface Run {
  phases: Record<PipelinePhase, number>;
  wallSeconds: number;
  rssMb: number;
  chunks: number;
  characters: number;
  chatCalls: number;
  embeddingRequests: number;
}

async function ingestOnce(book: BenchBook, gateway: ScriptedGateway, env: Record<string, string> = {}): Promise<Run> {
  const dataDir = await freshDataDir();
  gateway.clearRequests();
  try {
    const run = await measuredSpawn([process.execPath, CLI, book.path, "--title", book.title], {
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", DATA_DIR: dataDir, LLM_GATEWAY_URL: gateway.baseURL, LOG_LEVEL: "warn", ...env },
    });
    const counts = /: (\d+) characters, (\d+) chunks/.exec(run.stdout);
    const times = /^time: (.*)$/m.exec(run.stdout);
    if (run.exitCode !== 0 || !counts || !times) throw new Error(`bun run ingest failed on ${book.title} (exit ${run.exitCode}):\n${run.stderr}\n${run.stdout}`);
    const phases = Object.fromEntries(PIPELINE_PHASES.map((p) => [p, Number(new RegExp(`\\b${p} ([\\d.]+) s`).exec(times[1]!)?.[1] ?? NaN)]));
    return {
      phases: phases as Record<PipelinePhase, number>,
      wallSeconds: run.wallSeconds,
      rssMb: run.rssMb,
      characters: Number(counts[1]),
      chunks: Number(counts[2]),
      chatCalls: gateway.chatRequests().length,
      embeddingRequests: gateway.embeddingRequests().length,
    };
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
}

interface BookRuns {
  book: BenchBook;
  runs: Run[];
}

const median = (runs: readonly Run[], f: (r: Run) => number) => summarise(runs.map(f)).median;
const seconds = (runs: readonly Run[], f: (r: Run) => number) => formatSummary(summarise(runs.map(f)), 2);

function phaseTable(results: readonly BookRuns[]): string {
  return markdownTable(
    ["Book", "chunks", "characters", "chat calls", "embedding requests", ...PHASES.map((p) => `${p} s`), "pipeline s", "process wall s", "peak RSS MB"],
    results.map(({ book, runs }) => [
      `${book.title} (${mb(book.bytes).toFixed(2)} MB)`,
      String(median(runs, (r) => r.chunks)),
      String(median(runs, (r) => r.characters)),
      String(median(runs, (r) => r.chatCalls)),
      String(median(runs, (r) => r.embeddingRequests)),
      ...PHASES.map((p) => seconds(runs, (r) => r.phases[p])),
      seconds(runs, (r) => r.phases.total),
      seconds(runs, (r) => r.wallSeconds),
      formatSummary(summarise(runs.map((r) => r.rssMb))),
    ]),
  );
}

/**
 * Seconds per MB of each phase and of the whole, with the growth exponent k of t ∝ size^k between the
 * smallest and the largest book: k ≈ 1 is linear, k ≈ 0 a fixed cost.
 */
function growthTable(results: readonly BookRuns[]): string {
  const first = results[0]!;
  const last = results.at(-1)!;
  const sizeRatio = last.book.bytes / first.book.bytes;
  const parts: { label: string; f: (r: Run) => number }[] = [
    ...(["booknlp", "extract", "prompt", "index"] as const).map((p) => ({ label: p, f: (r: Run) => r.phases[p] })),
    { label: "pipeline", f: (r: Run) => r.phases.total },
    { label: "process wall", f: (r: Run) => r.wallSeconds },
  ];
  const exponent = (f: (r: Run) => number) => {
    const a = median(first.runs, f);
    const b = median(last.runs, f);
    return a > 0 && b > 0 ? (Math.log(b / a) / Math.log(sizeRatio)).toFixed(2) : "–";
  };
  return markdownTable(
    ["s per MB", ...results.map(({ book }) => `${book.title} (${mb(book.bytes).toFixed(2)} MB)`), `growth exponent k (×${sizeRatio.toFixed(1)} size)`],
    parts.map(({ label, f }) => [label, ...results.map(({ book, runs }) => (median(runs, f) / mb(book.bytes)).toFixed(2)), exponent(f)]),
  );
}

/** What spoiler-safe chat's checkpoints cost: the same books with CHARACTER_CHECKPOINTS 1 (whole book only) and 4 (at most 4× the calls; the default is 2, see bench/checkpoint-coverage.ts). */
async function checkpointCost(ctx: BenchContext, runs: number): Promise<string> {
  const latency = LATENCIES[1]!;
  const gateway = startScriptedGateway({ embeddingDimension: EMBEDDING_DIMENSION, chatLatencyMs: latency.chatMs, embeddingsLatencyMs: latency.embeddingsMs });
  const rows: string[][] = [];
  try {
    for (const book of ctx.books) {
      const medians: Record<number, { calls: number; llm: number; total: number }> = {};
      for (const checkpoints of [1, 4]) {
        const bookRuns: Run[] = [];
        for (let r = 0; r < runs; r++) {
          ctx.progress(`ingestion, CHARACTER_CHECKPOINTS=${checkpoints}: ${book.title}, run ${r + 1}/${runs}`);
          bookRuns.push(await ingestOnce(book, gateway, { CHARACTER_CHECKPOINTS: String(checkpoints) }));
        }
        medians[checkpoints] = {
          calls: median(bookRuns, (r) => r.chatCalls),
          llm: median(bookRuns, (r) => r.phases.extract + r.phases.prompt),
          total: median(bookRuns, (r) => r.phases.total),
        };
        rows.push([
          `${book.title} (${mb(book.bytes).toFixed(2)} MB)`,
          String(checkpoints),
          String(medians[checkpoints]!.calls),
          seconds(bookRuns, (r) => r.phases.extract + r.phases.prompt),
          seconds(bookRuns, (r) => r.phases.total),
          checkpoints === 1 ? "1.00" : (medians[checkpoints]!.total / medians[1]!.total).toFixed(2),
        ]);
      }
    }
  } finally {
    gateway.stop();
  }
  return [
    `**What spoiler-safe checkpoints cost** (${latency.label}; median (min–max) of ${runs} runs): each checkpoint adds a profile and a persona call ` +
      "for every character already seen before it, all in the passes' shared pool of concurrent calls.",
    "",
    markdownTable(["Book", "CHARACTER_CHECKPOINTS", "chat calls", "extract + prompt s", "pipeline s", "pipeline ratio"], rows),
  ].join("\n");
}

export async function ingestionSection(ctx: BenchContext): Promise<BenchSection> {
  const runs = reps(ctx, 3, 1);
  const parts: string[] = [
    `${booksNote(ctx.books)} Each run: \`bun run ingest <book>\` in a fresh process on a fresh data dir (the embedded database created and migrated beforehand, as after a first start), ` +
      `median (min–max) of ${runs} runs. Embeddings of dimension ${EMBEDDING_DIMENSION}. The loopback gateway runs in the benchmark's process; ` +
      "phase seconds are the pipeline's (download, booknlp, extract, prompt, index); process wall adds start-up (opening the stores) and shut-down.",
  ];
  for (const latency of LATENCIES) {
    const gateway = startScriptedGateway({ embeddingDimension: EMBEDDING_DIMENSION, chatLatencyMs: latency.chatMs, embeddingsLatencyMs: latency.embeddingsMs });
    try {
      const results: BookRuns[] = [];
      for (const book of ctx.books) {
        const bookRuns: Run[] = [];
        for (let r = 0; r < runs; r++) {
          ctx.progress(`ingestion (${latency.chatMs}/${latency.embeddingsMs} ms): ${book.title}, run ${r + 1}/${runs}`);
          bookRuns.push(await ingestOnce(book, gateway));
        }
        results.push({ book, runs: bookRuns });
      }
      parts.push("", `**${latency.label[0]!.toUpperCase()}${latency.label.slice(1)}**`, "", phaseTable(results), "", "How the time grows with the book:", "", growthTable(results));
    } finally {
      gateway.stop();
    }
  }
  parts.push("", await checkpointCost(ctx, runs));
  return { title: "Ingestion end to end", body: parts.join("\n") };
}

if (import.meta.main) runsInBench("ingestion");
