import { cpus, totalmem } from "node:os";
import { existsSync } from "node:fs";
import { join } from "node:path";

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

export function formatSummary(s: Summary, digits = 0): string {
  return `${s.median.toFixed(digits)} (${s.min.toFixed(digits)}–${s.max.toFixed(digits)})`;
}

export function markdownTable(header: readonly string[], rows: readonly (readonly (string | number)[])[]): string {
  const line = (cells: readonly (string | number)[]) => `| ${cells.join(" | ")} |`;
  return [line(header), line(header.map(() => "---")), ...rows.map(line)].join("\n");
}

/** The shared development books, when this checkout sits beside them. */
export const SHARED_BOOKS_DIR = join(import.meta.dir, "..", "..", "shared", "books");
export const sharedBooksPresent = () => existsSync(SHARED_BOOKS_DIR);
