import { appendFileSync, mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { createLogger, type Logger, type LogLevel } from "../log.ts";

/**
 * The logger of an interactive terminal tool (`npm run chat`, `npm run ingest`): every event, with its
 * fields, goes to a log file; a warning or an error also shows in the terminal as one short plain
 * line, so that what the reader is looking at (a reply streaming, a progress bar) stays readable.
 */
export function terminalLogger(options: { file: string; level: LogLevel; secrets: readonly string[]; print: (line: string) => void }): Logger {
  mkdirSync(dirname(options.file), { recursive: true });
  const toFile = createLogger({ level: options.level, secrets: options.secrets, write: (line) => appendFileSync(options.file, `${line}\n`) });
  const wrap = (inner: Logger): Logger => ({
    debug: (msg, fields) => inner.debug(msg, fields),
    info: (msg, fields) => inner.info(msg, fields),
    warn: (msg, fields) => {
      inner.warn(msg, fields);
      options.print(`warning: ${msg} (details in ${options.file})`);
    },
    error: (msg, fields) => {
      inner.error(msg, fields);
      options.print(`error: ${msg} (details in ${options.file})`);
    },
    child: (fields) => wrap(inner.child(fields)),
  });
  return wrap(toFile);
}
