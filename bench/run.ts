/**
 * `bun run bench`: every benchmark in one run, printed as markdown and written to
 * bench/results/<date>.md.
 *
 *   bun run bench [--quick] [--only chunking,nlp,ingestion,retrieval,chat,chat-paced,http,runtimes,first-token,hostile-text]
 *
 * --quick is a smoke run (one repetition, small loads; its figures are not worth publishing) and
 * writes <date>-quick.md; --only runs some sections and writes <date>-<sections>.md.
 */
import { firstTokenSection } from "./first-token.ts";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { loadavg } from "node:os";
import { parseArgs } from "node:util";
import { bookNlpSection } from "./book-nlp.ts";
import { chatSection } from "./chat.ts";
import { pacedChatSection } from "./chat-paced.ts";
import { chunkingSection } from "./chunking.ts";
import { hostileTextSection } from "./hostile-text.ts";
import { httpSection } from "./http.ts";
import { ingestionSection } from "./ingestion.ts";
import { retrievalSection } from "./retrieval.ts";
import { runtimesSection } from "./runtimes.ts";
import { usage } from "../common/cli-usage.ts";
import { loadBooks, machineHeader, removeDataDirTemplate, type BenchContext, type BenchSection } from "./support.ts";

const SECTIONS: Record<string, (ctx: BenchContext) => Promise<BenchSection>> = {
  chunking: chunkingSection,
  nlp: bookNlpSection,
  ingestion: ingestionSection,
  retrieval: retrievalSection,
  chat: chatSection,
  "chat-paced": pacedChatSection,
  http: httpSection,
  runtimes: runtimesSection,
  "first-token": firstTokenSection,
  "hostile-text": hostileTextSection,
};

const { values } = parseArgs({
  args: process.argv.slice(2),
  options: { quick: { type: "boolean", default: false }, only: { type: "string" }, help: { type: "boolean" } },
});
if (values.help) {
  console.log(
    `${usage("bench", `[--quick] [--only ${Object.keys(SECTIONS).join(",")}]`)}\n\n` +
      "Runs the benchmarks and writes bench/results/<date>.md (see BENCHMARKS.md). --quick is a smoke run; --only picks sections.",
  );
  process.exit(0);
}
const chosen = values.only ? values.only.split(",").map((s) => s.trim()) : Object.keys(SECTIONS);
const unknown = chosen.filter((name) => !(name in SECTIONS));
if (unknown.length > 0) {
  console.error(`unknown section ${unknown.join(", ")}; sections: ${Object.keys(SECTIONS).join(", ")}`);
  process.exit(2);
}

const started = performance.now();
const elapsed = () => `${((performance.now() - started) / 1000).toFixed(0)} s`;
/** Other work on the machine moves every figure; the load average says how much there was. */
const load = () => loadavg().map((x) => x.toFixed(1)).join(", ");
const { books, cleanup } = await loadBooks();
const ctx: BenchContext = { quick: values.quick, books, progress: (message) => console.error(`[${elapsed()}] ${message}`) };

const date = new Date().toISOString().slice(0, 10);
const header = [
  `# Benchmarks${values.quick ? " (quick smoke run: one repetition, small loads)" : ""}`,
  "",
  `${machineHeader()} · load average at start ${load()}`,
  "",
  "Figures are medians with (min–max) over the runs each section states; ratios are measured in the same run.",
].join("\n");
const out: string[] = [header];
console.log(`${header}\n`);
try {
  for (const [i, name] of Object.keys(SECTIONS).entries()) {
    if (!chosen.includes(name)) continue;
    const section = await SECTIONS[name]!(ctx);
    const text = `## ${i + 1}. ${section.title}\n\n${section.body}`;
    out.push(text);
    console.log(`${text}\n`);
  }
} finally {
  await removeDataDirTemplate();
  await cleanup();
}
const footer = `Whole run: ${elapsed()}; load average at the end ${load()}.`;
out.push(footer);
console.log(footer);

const suffix = [values.quick ? "quick" : "", values.only ? chosen.join("-") : ""].filter(Boolean).join("-");
const file = join(import.meta.dir, "results", `${date}${suffix ? `-${suffix}` : ""}.md`);
await mkdir(join(import.meta.dir, "results"), { recursive: true });
await writeFile(file, `${out.join("\n\n")}\n`);
console.error(`written to ${file}`);
