import { existsSync, readdirSync } from "node:fs";
import { chown, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { closedPort } from "./redis.ts";

/**
 * Servers a fault test owns alone, on free loopback ports in temporary folders, so that it can stop,
 * kill and restart them without touching the shared Redis on 6379 or the shared Postgres on 5432.
 * Each `start*` resolves once the server answers; each `unavailable*` says why one cannot be started
 * (the suite then skips with that reason).
 */

const REDIS_SERVER = ["/usr/bin/redis-server", "/usr/local/bin/redis-server"].find(existsSync);
const REDIS_CLI = ["/usr/bin/redis-cli", "/usr/local/bin/redis-cli"].find(existsSync);

/** The newest PostgreSQL server binaries installed the Debian way, if any. */
function postgresBin(): string | undefined {
  const root = "/usr/lib/postgresql";
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root).sort((a, b) => Number(b) - Number(a));
  return versions.map((v) => join(root, v, "bin")).find((bin) => existsSync(join(bin, "initdb")) && existsSync(join(bin, "pg_ctl")));
}
const POSTGRES_BIN = postgresBin();
/** initdb and postgres refuse to run as root; as root the cluster belongs to the postgres account. */
const RUN_AS_POSTGRES = process.getuid?.() === 0;
// By absolute path: /usr/sbin is not on every PATH (a user's shell, a CI image), and a spawn by name would crash the suite.
const RUNUSER = ["/usr/sbin/runuser", "/sbin/runuser"].find(existsSync);
const ID = ["/usr/bin/id", "/bin/id"].find(existsSync);

export function unavailableRedisServer(): string | undefined {
  if (!REDIS_SERVER || !REDIS_CLI) return "redis-server and redis-cli are not installed (apt-get install redis-server)";
  return undefined;
}

export function unavailablePostgresServer(): string | undefined {
  if (!POSTGRES_BIN) return "no PostgreSQL server binaries under /usr/lib/postgresql (apt-get install postgresql)";
  if (RUN_AS_POSTGRES && !RUNUSER) return "running as root without runuser (/usr/sbin/runuser or /sbin/runuser) to start the cluster as the postgres account";
  if (RUN_AS_POSTGRES && (!ID || !Bun.spawnSync([ID, "-u", "postgres"]).success)) return "running as root without a postgres account for initdb";
  return undefined;
}

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(50);
  }
}

function run(command: string[], asPostgres = false): { ok: boolean; output: string } {
  const argv = asPostgres && RUN_AS_POSTGRES ? [RUNUSER!, "-u", "postgres", "--", ...command] : command;
  const result = Bun.spawnSync(argv, { stdout: "pipe", stderr: "pipe" });
  return { ok: result.success, output: result.stdout.toString() + result.stderr.toString() };
}

export interface PrivateRedis {
  readonly url: string;
  readonly port: number;
  /** Runs a redis-cli command against it and returns its output, trimmed. */
  cli(...args: string[]): string;
  /** Kills the process with SIGKILL: nothing is saved beyond what the append-only file already holds. */
  kill(): Promise<void>;
  /** Starts it again on the same port and folder (the append-only file is replayed). */
  start(): Promise<void>;
  /** kill() then start(). */
  restart(): Promise<void>;
  /** SIGSTOP: the server keeps its connections and answers nothing, as a stalled Redis does. */
  pause(): void;
  /** SIGCONT: it reads and runs what arrived meanwhile. */
  resume(): void;
  stop(): Promise<void>;
}

/**
 * A redis-server of our own. `persistent` (the default) keeps an append-only file synced on every
 * write, like a managed Redis (Upstash persists every write): a restart loses nothing.
 */
export async function startPrivateRedis(options: { persistent?: boolean; password?: string } = {}): Promise<PrivateRedis> {
  const reason = unavailableRedisServer();
  if (reason) throw new Error(reason);
  const dir = await mkdtemp(join(tmpdir(), "private-redis-"));
  const port = closedPort();
  const persistent = options.persistent ?? true;
  let proc: ReturnType<typeof Bun.spawn> | undefined;
  const auth = options.password ? ["--no-auth-warning", "-a", options.password] : [];
  const cli = (...args: string[]) => run([REDIS_CLI!, "-h", "127.0.0.1", "-p", String(port), ...auth, ...args]).output.trim();
  const start = async () => {
    proc = Bun.spawn(
      [
        REDIS_SERVER!,
        "--port", String(port),
        "--bind", "127.0.0.1",
        "--dir", dir,
        "--save", "",
        "--appendonly", persistent ? "yes" : "no",
        "--appendfsync", "always",
        "--protected-mode", "no",
        ...(options.password ? ["--requirepass", options.password] : []),
      ],
      { stdout: "ignore", stderr: "ignore" },
    );
    await until(`redis-server on port ${port}`, () => cli("PING") === "PONG");
  };
  const kill = async () => {
    proc?.kill("SIGCONT");
    proc?.kill("SIGKILL");
    await proc?.exited;
    proc = undefined;
  };
  await start();
  return {
    url: options.password ? `redis://:${encodeURIComponent(options.password)}@127.0.0.1:${port}` : `redis://127.0.0.1:${port}`,
    port,
    cli,
    kill,
    start,
    async restart() {
      await kill();
      await start();
    },
    pause: () => void proc?.kill("SIGSTOP"),
    resume: () => void proc?.kill("SIGCONT"),
    async stop() {
      await kill();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export interface PrivatePostgres {
  /** URL of the `test` database on it, user postgres, trust authentication. */
  readonly url: string;
  readonly port: number;
  /** pg_ctl stop -m immediate: every connection is cut, like a crash. */
  crash(): Promise<void>;
  start(): Promise<void>;
  /** crash() then start(). */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

/** A PostgreSQL cluster of our own (initdb in a temporary folder, loopback only, fsync off). */
export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const reason = unavailablePostgresServer();
  if (reason) throw new Error(reason);
  const dir = await mkdtemp(join(tmpdir(), "private-postgres-"));
  const data = join(dir, "data");
  if (RUN_AS_POSTGRES) await chown(dir, Number(run(["id", "-u", "postgres"]).output.trim()), Number(run(["id", "-g", "postgres"]).output.trim()));
  const init = run([join(POSTGRES_BIN!, "initdb"), "-D", data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"], true);
  if (!init.ok) throw new Error(`initdb failed: ${init.output}`);
  const port = closedPort();
  const pgCtl = (...args: string[]) => run([join(POSTGRES_BIN!, "pg_ctl"), "-D", data, ...args], true);
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off`;
  const ready = () => run([join(POSTGRES_BIN!, "pg_isready"), "-q", "-h", "127.0.0.1", "-p", String(port)]).ok;
  const start = async () => {
    const started = pgCtl("-o", options, "-l", join(dir, "log"), "-w", "-t", "60", "start");
    if (!started.ok) throw new Error(`pg_ctl start failed: ${started.output}`);
    await until(`postgres on port ${port}`, ready);
  };
  const crash = async () => {
    pgCtl("-m", "immediate", "-w", "stop");
  };
  await start();
  const created = run([join(POSTGRES_BIN!, "psql"), "-h", "127.0.0.1", "-p", String(port), "-U", "postgres", "-d", "postgres", "-qc", "CREATE DATABASE test"]);
  if (!created.ok) throw new Error(`could not create the test database: ${created.output}`);
  return {
    url: `postgres://postgres@127.0.0.1:${port}/test`,
    port,
    crash,
    start,
    async restart() {
      await crash();
      await start();
    },
    async stop() {
      await crash();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
