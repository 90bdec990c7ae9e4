import { mkdir, readdir, rename, rm, writeFile } from "node:fs/promises";
import { join, resolve, sep } from "node:path";
import { sha256 } from "@noble/hashes/sha2.js";
import { bytesToHex, utf8ToBytes } from "@noble/hashes/utils.js";

/**
 * Persona prompt backups at SYSTEM_PROMPT_STORAGE_PATH/{book_id}/<character_name_lowercase>.md (SPEC: Ingestion
 * behavior, step 10), one per character, so a prompt can be restored or audited without the database.
 *
 * The file name is the character's name lower-cased as it is ("Mr. Darcy" → "mr. darcy.md"). Only
 * what cannot stand in a Linux file name is replaced: `/` and NUL become `_`, a name that is empty,
 * `.` or `..` becomes `_`, `_` or `__`, text that has no UTF-8 form (a lone surrogate) becomes U+FFFD,
 * and a name longer than 255 bytes with `.md` is cut at a character boundary. A name is model- or
 * book-supplied text, and with `/` gone it cannot leave the book's folder.
 *
 * Two characters whose names give the same file name (Pierre, PIERRE) are told apart by a suffix:
 * the first keeps the plain name, each later one gets `-` and the first 8 hex digits of the SHA-256
 * of its full name (pierre.md, pierre-<hash>.md). The same names give the same files on every run.
 */

export const BACKUP_EXTENSION = ".md";
/** Linux's NAME_MAX: the most bytes one path component may have. */
export const MAX_FILE_NAME_BYTES = 255;
const HASH_CHARS = 8;
const COLLISION_SUFFIX_BYTES = 1 + HASH_CHARS;

function shortHash(text: string): string {
  return bytesToHex(sha256(utf8ToBytes(text))).slice(0, HASH_CHARS);
}

/** The longest prefix of `text` that fits in `maxBytes` of UTF-8, never splitting a character. */
function truncateUtf8(text: string, maxBytes: number): string {
  let bytes = 0;
  let end = 0;
  for (const char of text) {
    bytes += utf8ToBytes(char).length;
    if (bytes > maxBytes) break;
    end += char.length;
  }
  return text.slice(0, end);
}

/** A lone surrogate has no UTF-8 form: the file system would get U+FFFD for it anyway, so two names could meet there unseen. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/** The name lower-cased, with only what a Linux file name cannot hold replaced, without the extension. */
function baseName(name: string, reserveBytes = 0): string {
  let base = name.replace(LONE_SURROGATE, "\uFFFD").toLowerCase().replace(/[/\0]/g, "_");
  if (base === "" || base === "." || base === "..") base = base.replaceAll(".", "_") || "_";
  return truncateUtf8(base, MAX_FILE_NAME_BYTES - BACKUP_EXTENSION.length - reserveBytes);
}

/** File names for the given character names, in order: distinct, inside one folder, and stable across runs. */
export function backupFileNames(names: readonly string[]): string[] {
  const taken = new Set<string>();
  return names.map((name) => {
    let base = baseName(name);
    // A second round only if the hashed name itself is taken (a character literally named "pierre-<hash>").
    for (let round = 0; taken.has(base); round++) {
      base = `${baseName(name, COLLISION_SUFFIX_BYTES)}-${shortHash(round === 0 ? name : `${name}\0${round}`)}`;
    }
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
      // Not named after the file: a name at the 255-byte limit leaves no room for a longer one.
      const temporary = join(dir, `.${crypto.randomUUID()}.tmp`);
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
