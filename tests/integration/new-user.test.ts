import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync } from "node:fs";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { networkInterfaces, tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { SAMPLE_BOOK } from "../../ingest/sample-book.ts";
import { parseSseEvents } from "../support/chat.ts";
import { runPrintedCurl } from "../support/npm-start.ts";
import { freePort, REPO_ROOT, startService } from "../support/process.ts";

// A new user on a machine with Node.js and npm and no Bun: the README's quick start and every command
// it, the banner and the usage lines print, typed as printed. Each step is a real npm process; the
// first `npm start` creates the embedded Postgres.
setDefaultTimeout(240_000);

/** PATH without any folder that holds a `bun` (node_modules/.bin is added by `npm run` itself, as on such a machine). */
const NODE_ONLY_PATH = (process.env.PATH ?? "")
  .split(delimiter)
  .filter((dir) => dir !== "" && !existsSync(join(dir, "bun")))
  .join(delimiter);

interface Run {
  exitCode: number;
  stdout: string;
  stderr: string;
}

/** A command line as a user types it in a shell, with `input` typed on stdin. */
async function shell(command: string, env: Record<string, string>, input = ""): Promise<Run> {
  const proc = Bun.spawn(["sh", "-c", command], {
    cwd: REPO_ROOT,
    env: { PATH: NODE_ONLY_PATH, HOME: process.env.HOME ?? "", ...env },
    stdin: "pipe",
    stdout: "pipe",
    stderr: "pipe",
    timeout: 180_000,
  });
  proc.stdin.write(input);
  await proc.stdin.end();
  const [stdout, stderr, exitCode] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { exitCode, stdout, stderr };
}

let dataDir: string;
let env: Record<string, string>;
beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), "new-user-"));
  env = { DATA_DIR: dataDir, PORT: String(await freePort()) };
});
afterAll(async () => {
  await rm(dataDir, { recursive: true, force: true });
});

test("the PATH of these tests has node and npm but no bun", () => {
  expect(Bun.which("bun", { PATH: NODE_ONLY_PATH })).toBeNull();
  expect(Bun.which("npm", { PATH: NODE_ONLY_PATH })).not.toBeNull();
  expect(Bun.which("node", { PATH: NODE_ONLY_PATH })).not.toBeNull();
});

describe("every command answers --help as printed, without Bun", () => {
  const scripts = ["start", "chat", "ingest", "migrate", "nlp", "openapi", "bench", "api", "worker"];
  for (const script of scripts) {
    const command = script === "start" ? "npm start -- --help" : `npm run ${script} -- --help`;
    test(command, async () => {
      const run = await shell(command, env);
      expect(run.stderr).not.toContain("bun: not found");
      expect(run.exitCode).toBe(0);
      const usage = script === "start" ? "usage: npm start" : `usage: npm run ${script}`;
      expect(run.stdout).toContain(usage);
      expect(run.stdout).toContain(`bun run ${script}`);
    });
  }
});

test("every `npm run <script>` the README and docs/ print names a script of package.json, and every `bun run` of the README has its npm form too", async () => {
  const readme = await readFile(join(REPO_ROOT, "README.md"), "utf8");
  // The README's walk-through continues in docs/ (usage.md, ingestion.md, …): their commands are typed as printed too.
  const docs = await Promise.all(
    (await readdir(join(REPO_ROOT, "docs"))).filter((f) => f.endsWith(".md")).map((f) => readFile(join(REPO_ROOT, "docs", f), "utf8")),
  );
  const { scripts } = JSON.parse(await readFile(join(REPO_ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> };
  const named = [...readme.matchAll(/npm run ([a-z:]+)/g)].map((m) => m[1]!);
  expect(named.length).toBeGreaterThan(10);
  for (const text of [readme, ...docs]) for (const m of text.matchAll(/npm run ([a-z:]+)/g)) expect(Object.keys(scripts)).toContain(m[1]!);
  const bunOnly = [...readme.matchAll(/bun run ([a-z:]+)/g)].map((m) => m[1]!).filter((script) => !named.includes(script));
  expect(bunOnly).toEqual([]);
  // Options after an npm script name reach the script only after `--`.
  expect([readme, ...docs].flatMap((text) => text.match(/npm run [a-z:]+ --?[a-z]/g) ?? [])).toEqual([]);
});

test("no package npm installs asks for a newer Node.js than the README names (npm would warn EBADENGINE)", async () => {
  const readme = await readFile(join(REPO_ROOT, "README.md"), "utf8");
  const named = /With only Node\.js \((\d+\.\d+) or later\)/.exec(readme)?.[1];
  expect(named).toBeDefined();
  const lock = JSON.parse(await readFile(join(REPO_ROOT, "package-lock.json"), "utf8")) as { packages: Record<string, { engines?: { node?: string }; optional?: boolean }> };
  const wanting = Object.entries(lock.packages)
    .filter(([, p]) => p.engines?.node !== undefined && !Bun.semver.satisfies(`${named}.0`, p.engines.node))
    .map(([name, p]) => `${name} ${p.engines!.node}`);
  expect(wanting).toEqual([]);
  const { engines } = JSON.parse(await readFile(join(REPO_ROOT, "package.json"), "utf8")) as { engines: { node: string } };
  expect(engines.node).toBe(`>=${named}`);
});

describe("the README's quick start, typed as printed on a machine with only Node.js", () => {
  let banner = "";
  let service: ReturnType<typeof Bun.spawn> | undefined;
  /** Resolves when the service's stdout closes: npm and the Bun process under it have both exited. */
  let outputClosed: Promise<void> = Promise.resolve();
  /** Ctrl-C as a terminal sends it: to the whole process group (npm leaves its script to get it itself). */
  const ctrlC = () => {
    if (service) process.kill(-service.pid, "SIGINT");
  };

  afterAll(async () => {
    ctrlC();
    await outputClosed;
  });

  test("npm start prints a banner whose commands all use npm", async () => {
    // setsid: its own process group, as a terminal gives the command typed into it.
    service = Bun.spawn(["setsid", "sh", "-c", "exec npm start"], {
      cwd: REPO_ROOT,
      env: { PATH: NODE_ONLY_PATH, HOME: process.env.HOME ?? "", ...env },
      stdout: "pipe",
      stderr: "pipe",
    });
    // Read to the end, so that the service never writes into a closed pipe.
    const ready = Promise.withResolvers<void>();
    const stdout = service.stdout as ReadableStream<Uint8Array>;
    outputClosed = (async () => {
      const decoder = new TextDecoder();
      for await (const chunk of stdout) {
        banner += decoder.decode(chunk, { stream: true });
        if (banner.includes("Ctrl-C stops the service")) ready.resolve();
      }
      ready.reject(new Error(`npm start ended before its banner:\n${banner}`));
    })();
    void new Response(service.stderr as ReadableStream<Uint8Array>).text();
    await ready.promise;
    expect(banner).toContain("Book character chat is ready.");
    expect(banner).toContain(`  API          http://127.0.0.1:${env.PORT}`);
    expect(banner).toContain(`  Listening    127.0.0.1:${env.PORT} (this machine only`);
    expect(banner).toContain("\n  npm run chat\n");
    expect(banner).toContain("npm run chat -- --character <name>");
    expect(banner).toContain("npm run ingest -- <file.txt>");
    expect(banner).not.toMatch(/^\s*bun run/m);
  });

  test("the printed `npm run chat` chats with the story's main character", async () => {
    const run = await shell("npm run chat", env, `${SAMPLE_BOOK.question}\n`);
    expect(run.exitCode).toBe(0);
    expect(run.stdout).toContain("Chatting with Ottilie");
    expect(run.stdout).toContain("\nOttilie: ");
  });

  test("`npm run chat -- --character jonah` picks Jonah, case aside", async () => {
    const run = await shell("npm run chat -- --character jonah", env, "What do you sweep?\n");
    expect(run.exitCode).toBe(0);
    expect(run.stdout).toContain('"jonah" is Jonah.');
    expect(run.stdout).toContain("\nJonah: ");
  });

  test("`npm run chat --character Jonah` (without the `--`) says how to write it", async () => {
    const run = await shell("npm run chat --character Jonah", env);
    expect(run.exitCode).not.toBe(0);
    expect(run.stderr).toContain("npm run chat -- --character <name>");
  });

  test("the printed curl streams a reply", async () => {
    const curl = banner.split("\n").find((line) => line.trim().startsWith("curl -N"))!.trim();
    const events = parseSseEvents(await runPrintedCurl(curl));
    expect(events.at(-1)).toMatchObject({ done: true });
    // Swagger UI's "Try it out" comes prefilled with the same working request.
    const body = JSON.parse(/-d '(.*)'$/.exec(curl)![1]!) as unknown;
    const doc = (await (await fetch(`http://127.0.0.1:${env.PORT}/docs/json`)).json()) as {
      paths: Record<string, Record<string, { requestBody: { content: Record<string, { example?: unknown }> } }>>;
    };
    expect(doc.paths["/character/chat"]!.post!.requestBody.content["application/json"]!.example).toEqual(body);
  });

  test("after Ctrl-C, the printed `npm run ingest -- <file.txt>` ingests a book", async () => {
    ctrlC();
    await outputClosed;
    service = undefined;
    expect(banner.trimEnd().split("\n").at(-1)).toMatch(/ INFO  stopped( |$)/);
    const run = await shell(`npm run ingest -- ${JSON.stringify(SAMPLE_BOOK.path)} --title "The Mending Room"`, env);
    expect(run.exitCode).toBe(0);
    expect(run.stdout).toContain("The Mending Room: 3 characters");
  });
});

describe("safe defaults: the API listens on loopback unless HOST says otherwise", () => {
  /** An address of this machine that other machines could use, when it has one. */
  const external = Object.values(networkInterfaces())
    .flat()
    .find((a) => a && a.family === "IPv4" && !a.internal)?.address;

  async function answersAt(url: string): Promise<boolean> {
    try {
      return (await fetch(`${url}/health`, { signal: AbortSignal.timeout(5_000) })).ok;
    } catch {
      return false;
    }
  }

  test.skipIf(external === undefined)("by default only 127.0.0.1 answers, without the chat page; with HOST=0.0.0.0 and PLAYGROUND=on the network address answers too, with it", async () => {
    const loopback = await startService("api/server.ts");
    try {
      expect(loopback.logs()).toContain(`api listening address=127.0.0.1:${new URL(loopback.url).port}`);
      expect(await answersAt(`http://${external}:${new URL(loopback.url).port}`)).toBe(false);
      // A deployment shows no chat page unless PLAYGROUND=on.
      expect((await fetch(`${loopback.url}/playground`)).status).toBe(404);
    } finally {
      await loopback.stop();
    }
    const open = await startService("api/server.ts", { HOST: "0.0.0.0", PLAYGROUND: "on" });
    try {
      const port = new URL(open.url).port;
      expect(open.logs()).toContain(`api listening address=0.0.0.0:${port} url=http://127.0.0.1:${port}`);
      expect(await answersAt(`http://${external}:${port}`)).toBe(true);
      expect((await fetch(`${open.url}/playground`)).status).toBe(200);
    } finally {
      await open.stop();
    }
  });
});
