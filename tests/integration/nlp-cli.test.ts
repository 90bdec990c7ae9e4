import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REPO_ROOT } from "../support/process.ts";
import { ENGLISH_BOOK, FIXTURES } from "../fixtures/ingest/harness.ts";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "nlp-cli-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function nlp(args: string[]) {
  const proc = Bun.spawn([process.execPath, "ingest/nlp/cli.ts", ...args], { cwd: REPO_ROOT, stdout: "pipe", stderr: "pipe", timeout: 60_000 });
  const [stdout, stderr, exitCode] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { exitCode, stdout, stderr };
}

/** Windows-1252 bytes of a text whose characters are all in that code page. */
function windows1252(text: string): Uint8Array {
  const decoder = new TextDecoder("windows-1252");
  const byChar = new Map(Array.from({ length: 256 }, (_, b) => [decoder.decode(new Uint8Array([b])), b]));
  return new Uint8Array([...text].map((c) => byChar.get(c)!));
}

test("npm run nlp reads a Windows-1252 Gutenberg file as the worker does: decoded, without its header and licence", async () => {
  const story = (await readFile(join(FIXTURES, ENGLISH_BOOK), "utf8")).replaceAll('"', (_, at: number) => (at % 2 ? "\u201d" : "\u201c"));
  const file = [
    "The Project Gutenberg eBook of The Keeper's Ledger, by Ada Quill",
    "",
    "Title: The Keeper's Ledger",
    "",
    "*** START OF THE PROJECT GUTENBERG EBOOK THE KEEPER'S LEDGER ***",
    "",
    `${story}\n\n\u201cCaf\u00e9 for the keeper,\u201d said Clara.`,
    "",
    "*** END OF THE PROJECT GUTENBERG EBOOK THE KEEPER'S LEDGER ***",
    "Michael Hart, the originator of the Project Gutenberg concept.",
  ].join("\r\n");
  const path = join(dir, "ledger.txt");
  await Bun.write(path, windows1252(file));
  const out = join(dir, "out");
  const { exitCode, stdout, stderr } = await nlp([path, out]);
  expect({ exitCode, stderr }).toEqual({ exitCode: 0, stderr: "" });
  expect(stdout).toMatch(/^ledger: [\d.]+ MB, \d+ tokens, [1-9]\d* quotes, /);
  const tokens = await readFile(join(out, "ledger.tokens"), "utf8");
  expect(tokens).toContain("Caf\u00e9");
  expect(tokens).not.toContain("\ufffd");
  expect(tokens).not.toMatch(/Gutenberg|Michael/);
});

test.each([
  ["a missing file", () => join(dir, "no-such-book.txt"), /^no such file: .*no-such-book\.txt\n$/],
  ["a directory", () => dir, /^is a directory, not a book file: /],
  ["a PDF", () => join(dir, "scan.pdf.txt"), /^.*scan\.pdf\.txt: file is a PDF document, not plain text\n$/],
])("npm run nlp on %s says so in one line and exits 1", async (_, path, message) => {
  await Bun.write(join(dir, "scan.pdf.txt"), "%PDF-1.5\n1 0 obj\n");
  const { exitCode, stdout, stderr } = await nlp([path(), join(dir, "out2")]);
  expect({ exitCode, stdout }).toEqual({ exitCode: 1, stdout: "" });
  expect(stderr).toMatch(message);
  expect(stderr.trim().split("\n")).toHaveLength(1);
});
