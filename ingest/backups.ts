import { mkdir, readdir, rename, rm, writeFile } from "node:fs/promises";
import { join, resolve, sep } from "node:path";
import { sha256 } from "@noble/hashes/sha2.js";
import { bytesToHex, utf8ToBytes } from "@noble/hashes/utils.js";

/**
 * Persona prompt backups: SYSTEM_PROMPT_STORAGE_PATH/{book_id}/{name}.md, one per character, so a
 * prompt can be restored or audited without the database.
 *
 * A character's name is model- or book-supplied text, so it never reaches the file system as is: it
 * is lower-cased and reduced to [a-z0-9_-], and whenever that changed anything beyond spaces, or the
 * result is taken by another character of the book, a short hash of the full name is appended.
 * "Elizabeth Bennet" → elizabeth-bennet.md; "Natásha" → natasha-3f2a9c1e.md; "../../etc/x" →
 * etc-x-<hash>.md.
 */

export const BACKUP_EXTENSION = ".md";
export const MAX_BASE_NAME_CHARS = 64;
const HASH_CHARS = 8;
/** Used when nothing of the name survives (a name in another script). */
const FALLBACK_BASE = "character";

function shortHash(text: string): string {
  return bytesToHex(sha256(utf8ToBytes(text))).slice(0, HASH_CHARS);
}

function readable(name: string): string {
  return name.trim().toLowerCase().replace(/\s+/g, "-");
}

function sanitise(name: string): string {
  const ascii = readable(name)
    .normalize("NFKD")
    .replace(/\p{M}/gu, "")
    .replace(/[^a-z0-9_-]+/g, "-")
    .replace(/-{2,}/g, "-");
  return ascii.slice(0, MAX_BASE_NAME_CHARS).replace(/^[-_]+|[-_]+$/g, "");
}

/** File names for the given character names, in order: safe, distinct, and stable across runs. */
export function backupFileNames(names: readonly string[]): string[] {
  const taken = new Set<string>();
  return names.map((name) => {
    let base = sanitise(name) || FALLBACK_BASE;
    if (base !== readable(name) || taken.has(base)) base = `${base}-${shortHash(name)}`;
    while (taken.has(base)) base = `${base}-${shortHash(base)}`;
    taken.add(base);
    return `${base}${BACKUP_EXTENSION}`;
  });
}

/** The book's backup folder; throws if the id could step outside the storage root. */
export function bookBackupDir(root: string, bookId: string): string {
  const base = resolve(root);
  const dir = resolve(base, bookId);
  if (!/^[0-9a-f-]{36}$/i.test(bookId) || !dir.startsWith(base + sep)) throw new Error(`not a book id: ${JSON.stringify(bookId)}`);
  return dir;
}

export interface Backup {
  name: string;
  systemPrompt: string;
}

/**
 * Writes one file per character (each atomically) and removes the book's backups of characters no
 * longer in the list, so a re-ingested book ends with exactly its current characters. Returns the
 * paths written, in order.
 */
export async function writeBackups(root: string, bookId: string, backups: readonly Backup[]): Promise<string[]> {
  const dir = bookBackupDir(root, bookId);
  await mkdir(dir, { recursive: true });
  const files = backupFileNames(backups.map((b) => b.name));
  const paths = await Promise.all(
    backups.map(async (backup, i) => {
      const path = join(dir, files[i]!);
      const temporary = `${path}.${crypto.randomUUID()}.tmp`;
      await writeFile(temporary, backup.systemPrompt.endsWith("\n") ? backup.systemPrompt : `${backup.systemPrompt}\n`);
      await rename(temporary, path);
      return path;
    }),
  );
  const keep = new Set(files);
  for (const entry of await readdir(dir)) {
    if (entry.endsWith(BACKUP_EXTENSION) && !keep.has(entry)) await rm(join(dir, entry), { force: true });
  }
  return paths;
}
