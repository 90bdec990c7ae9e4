/**
 * Commands as they are printed to a reader (README, the start-up banner, usage lines, error messages).
 * They must work on a machine with only Node.js and npm: Bun is a dev dependency in node_modules/.bin,
 * which `npm run` puts on PATH and a plain shell does not, and npm hands a script the arguments after
 * `--` only (before it, `--character` would be read as an npm option).
 */

/** `npm run <script> -- <args>`: the form that works everywhere. */
export function npmRun(script: string, args = ""): string {
  if (script === "start") return args ? `npm start -- ${args}` : "npm start";
  return args ? `npm run ${script} -- ${args}` : `npm run ${script}`;
}

/** The shorter form, for those who have Bun on their PATH. */
export function bunRun(script: string, args = ""): string {
  return args ? `bun run ${script} ${args}` : `bun run ${script}`;
}

/** A usage message: the npm form, then the Bun form. */
export function usage(script: string, args: string): string {
  return `usage: ${npmRun(script, args)}\n       ${bunRun(script, args)}   (the same, with Bun installed)`;
}
