#!/usr/bin/env bash
# Runs the suites of the runtime-neutral core (chunking, fusion, retrieval, prompt assembly,
# character prompts, BookNLP file parsing) under Deno, to hold those modules to web-standard APIs
# and npm packages. Extra arguments go to `deno test` (e.g. --filter "chunkText").
#
# How Deno finds things, and why it needs no network:
# - The binary comes from the `deno` npm package (node_modules/.bin/deno, a devDependency); nothing else is downloaded when it runs, and the update check is switched off.
# - deno.json beside this script sets "nodeModulesDir": "manual": bare imports such as "zod" resolve
#   through the project's node_modules, as Node and Bun resolve them, so Deno runs the exact
#   versions package-lock.json pins and fetches nothing. ("none" also works here, but it makes Deno
#   download every package again into its own cache and needs each version range repeated in
#   deno.json.) The same file maps `bun:test` to bun-test.ts, so the test files stay unchanged.
# - --no-check: the CI type check already runs tsc over these files against Bun's types; Deno's
#   job here is to run them.
#
# Left out, because they need more than the core: openapi.test.ts (reads files with Bun.file and
# starts the API) and the other suites (databases, servers, workers, Bun.spawn). schemas.ts has
# no suite of its own: the API suites, which need Bun, exercise it.
set -uo pipefail
cd "$(dirname "$0")/../.."

suites=(
  tests/unit/chunking.test.ts
  tests/unit/fusion.test.ts
  tests/unit/retrieval.test.ts
  tests/unit/prompt.test.ts
  tests/unit/llm-offline-characters.test.ts
  tests/unit/nlp-files.test.ts
)

# Deno is a devDependency (the API runs on it too: api/edge/deno.ts), pinned in package.json; an
# install without dev dependencies gets it here, once, without touching package.json or the lock file.
DENO_VERSION=$(node -p 'require("./package.json").devDependencies.deno')
deno=node_modules/.bin/deno
if [ ! -x "$deno" ] || [ "$("$deno" --version | head -n 1 | cut -d' ' -f2)" != "$DENO_VERSION" ]; then
  echo "installing deno@$DENO_VERSION for this suite (npm install --no-save)"
  npm install --no-save --no-audit --no-fund "deno@$DENO_VERSION" >/dev/null || { echo "could not install deno@$DENO_VERSION" >&2; exit 2; }
fi

# Deno colours its report even into a pipe; keep logs plain when no one is watching a terminal.
[ -t 1 ] || export NO_COLOR=1
log=$(mktemp)
trap 'rm -f "$log"' EXIT

echo "$("$deno" --version | head -n 1), ${#suites[@]} suites"
DENO_NO_UPDATE_CHECK=1 "$deno" test --config tests/deno/deno.json --no-check --no-prompt \
  --allow-read --allow-env "$@" "${suites[@]}" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}

# Deno closes with e.g. "ok | 129 passed | 0 failed (10s)" or "FAILED | 2 passed (3 steps) | 1 failed | 4 ignored (1s)".
summary=$(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E '^(ok|FAILED) \| [0-9]+ passed' | tail -n 1)
if [ -z "$summary" ]; then
  echo "deno test stopped before its summary (exit $status)" >&2
  exit $((status == 0 ? 1 : status))
fi
count() { grep -oE "[0-9]+ $1" <<<"$summary" | head -n 1 | cut -d' ' -f1; }
passed=$(count passed)
failed=$(count failed)
ignored=$(count ignored)
# Deno can report its tests and still fail afterwards, e.g. on a module it could not load: that counts as a failure.
if [ "$status" -ne 0 ] && [ "${failed:-0}" -eq 0 ]; then
  echo "deno test exited with $status after its summary (a suite failed to load?)" >&2
  failed=1
fi
echo
echo "deno: ${ignored:-0} skipped"
echo "$passed passed, $failed failed"
if [ "$status" -ne 0 ] || [ "$failed" -ne 0 ]; then exit $((status == 0 ? 1 : status)); fi
