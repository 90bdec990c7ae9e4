/**
 * Runs a command and reports its wall time, CPU time and peak RSS.
 *
 * Linux carries a process's peak RSS across exec, and a child starts from its parent's memory: a
 * command spawned straight from the benchmark (which holds whole books and indexes) reports the
 * benchmark's own peak, not its own. So the command is started by this file run as a small
 * launcher process, whose memory is a fresh Bun's, and the launcher writes the command's usage to a
 * file.
 *
 *   bun bench/measured-spawn.ts <usage.json> <command> [args…]
 */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { answerHelp } from "./support.ts";

interface Usage {
  exitCode: number;
  /** From the command's start to its exit, the launcher's own start-up left out. */
  wallSeconds: number;
  cpuSeconds: number;
  rssMb: number;
}

export interface MeasuredRun extends Usage {
  stdout: string;
  stderr: string;
}

export async function measuredSpawn(argv: readonly string[], options: { env?: Record<string, string>; cwd?: string } = {}): Promise<MeasuredRun> {
  const dir = await mkdtemp(join(tmpdir(), "bench-usage-"));
  try {
    const usageFile = join(dir, "usage.json");
    const proc = Bun.spawn([process.execPath, import.meta.path, usageFile, ...argv], {
      ...(options.env ? { env: options.env } : {}),
      ...(options.cwd ? { cwd: options.cwd } : {}),
      stdout: "pipe",
      stderr: "pipe",
    });
    const [stdout, stderr] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    const usage = JSON.parse(await readFile(usageFile, "utf8")) as Usage;
    return { ...usage, stdout, stderr };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

if (import.meta.main) {
  answerHelp("usage: bun bench/measured-spawn.ts <usage file> <command> [args …]\n\nRuns the command and writes its wall time, CPU time and peak RSS to the usage file; the benchmarks start it, see measuredSpawn().");
  const [usageFile, ...argv] = process.argv.slice(2);
  const start = performance.now();
  const child = Bun.spawn(argv, { stdio: ["inherit", "inherit", "inherit"] });
  const exitCode = await child.exited;
  const wallSeconds = (performance.now() - start) / 1000;
  const usage = child.resourceUsage()!;
  const report: Usage = {
    exitCode,
    wallSeconds,
    cpuSeconds: Number(usage.cpuTime.user + usage.cpuTime.system) / 1e6,
    rssMb: usage.maxRSS / 2 ** 20,
  };
  await Bun.write(usageFile!, JSON.stringify(report));
}
