import type { LocalChat } from "../../common/local/sessions.ts";
import { REPO_ROOT, startService, type ServiceProcess } from "./process.ts";

/**
 * `npm start` as a user runs it: the entry point as a real process, ready once it has logged the
 * line that carries what its banner printed (the session and the curl).
 */

export const START_ENTRY = "api/start.ts";
const READY_TIMEOUT_MS = 90_000;

export interface ReadyLine {
  api: string;
  docs: string;
  control_file: string;
  chat?: LocalChat;
  curl?: string;
}

export type LogLine = { msg: string } & Record<string, unknown>;

export function logLines(service: ServiceProcess): LogLine[] {
  return service
    .logs()
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as LogLine);
}

export interface Demo {
  service: ServiceProcess;
  ready: ReadyLine;
}

/**
 * Starts `npm start`'s entry with only PORT and DATA_DIR (plus `env`) and waits for its ready line.
 * Its log is asked for as JSON lines (LOG_FORMAT=json), which the tests read field by field.
 */
export async function startDemo(dataDir: string, env: Record<string, string> = {}, args: readonly string[] = []): Promise<Demo> {
  const service = await startService(START_ENTRY, { DATA_DIR: dataDir, LOG_FORMAT: "json", ...env }, READY_TIMEOUT_MS, "PORT", args);
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    const ready = logLines(service).find((l) => l.msg === "ready");
    if (ready) return { service, ready: ready as unknown as ReadyLine };
    if (service.proc.exitCode !== null) throw new Error(`npm start exited with ${service.proc.exitCode}:\n${service.logs()}`);
    if (Date.now() > deadline) {
      await service.stop();
      throw new Error(`npm start printed no ready line:\n${service.logs()}`);
    }
    await Bun.sleep(50);
  }
}

/** `data:` events of a curl, run in a shell exactly as printed (or sent with fetch where curl is not installed). */
export async function runPrintedCurl(command: string): Promise<string> {
  if (Bun.which("curl")) {
    const proc = Bun.spawn(["sh", "-c", command], { cwd: REPO_ROOT, stdout: "pipe", stderr: "ignore", timeout: 60_000 });
    const [text, code] = await Promise.all([new Response(proc.stdout).text(), proc.exited]);
    if (code !== 0) throw new Error(`curl exited with ${code}`);
    return text;
  }
  const parsed = /^curl -N (\S+) -H '([^:']+): ([^']+)' -d '((?:[^']|'\\'')*)'$/.exec(command);
  if (!parsed) throw new Error(`not the printed curl form: ${command}`);
  const [, url, header, value, body] = parsed;
  const response = await fetch(url!, { method: "POST", headers: { [header!]: value! }, body: body!.replaceAll(`'\\''`, "'") });
  return response.text();
}
