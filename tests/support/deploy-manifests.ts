import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parse, parseAllDocuments } from "yaml";

/**
 * The Kubernetes manifests under deploy/ as `kubectl apply -k` would send them, built without
 * kubectl: a kustomization's resources (files, or another kustomization's folder) followed by its
 * JSON patches. Only what deploy/ uses is supported (resources, labels, patches of `replace` and
 * `add` operations with a target); anything else throws, so that a kustomization growing a feature
 * this builder ignores fails the tests instead of being checked half.
 */

export const DEPLOY_DIR = resolve(import.meta.dir, "..", "..", "deploy");

export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec?: unknown;
  [field: string]: unknown;
}

interface Kustomization {
  resources?: string[];
  labels?: { pairs: Record<string, string> }[];
  patches?: { target: { group?: string; version?: string; kind: string; name: string }; patch: string }[];
  [field: string]: unknown;
}

interface PatchOperation {
  op: string;
  path: string;
  value?: unknown;
}

const SUPPORTED = new Set(["apiVersion", "kind", "resources", "labels", "patches"]);

/** Every YAML document of one file; a file of comments alone has none. */
export function readManifestFile(file: string): Manifest[] {
  return parseAllDocuments(readFileSync(file, "utf8"))
    .map((doc) => {
      if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors[0]!.message}`);
      return doc.toJS() as Manifest | null;
    })
    .filter((m): m is Manifest => m !== null);
}

export function readKustomization(dir: string): Kustomization {
  const k = parse(readFileSync(join(dir, "kustomization.yaml"), "utf8")) as Kustomization;
  const unsupported = Object.keys(k).filter((key) => !SUPPORTED.has(key));
  if (unsupported.length > 0) throw new Error(`${dir}/kustomization.yaml: ${unsupported.join(", ")} not supported by this builder`);
  return k;
}

/** The manifests `kubectl apply -k dir` applies. */
export function buildKustomization(dir: string = DEPLOY_DIR): Manifest[] {
  const k = readKustomization(dir);
  const manifests = (k.resources ?? []).flatMap((resource) => {
    const path = resolve(dir, resource);
    return resource.endsWith(".yaml") ? readManifestFile(path) : buildKustomization(path);
  });
  for (const { pairs } of k.labels ?? []) {
    for (const m of manifests) m.metadata.labels = { ...m.metadata.labels, ...pairs };
  }
  for (const { target, patch } of k.patches ?? []) {
    const matching = manifests.filter(
      (m) => m.kind === target.kind && m.metadata.name === target.name && (!target.group || m.apiVersion === `${target.group}/${target.version}`),
    );
    if (matching.length !== 1) throw new Error(`${dir}: a patch targets ${target.kind}/${target.name}, which matches ${matching.length} manifests`);
    for (const operation of parse(patch) as PatchOperation[]) applyOperation(matching[0]!, operation);
  }
  return manifests;
}

function applyOperation(target: Manifest, { op, path, value }: PatchOperation) {
  if (op !== "replace" && op !== "add") throw new Error(`patch operation ${op} not supported by this builder`);
  const keys = path.split("/").slice(1).map((key) => key.replace(/~1/g, "/").replace(/~0/g, "~"));
  const last = keys.pop()!;
  let node: unknown = target;
  for (const key of keys) {
    node = (node as Record<string, unknown>)[key];
    if (node === undefined || node === null) throw new Error(`patch path ${path} does not exist in ${target.kind}/${target.metadata.name}`);
  }
  const parent = node as Record<string, unknown>;
  // RFC 6902: replace needs the member to exist; a typo in the path must not add a new field silently.
  if (op === "replace" && !(last in parent)) throw new Error(`patch path ${path} does not exist in ${target.kind}/${target.metadata.name}`);
  parent[last] = value;
}

/** The one manifest of a kind and name; throws when there is not exactly one. */
export function find(manifests: Manifest[], kind: string, name?: string): Manifest {
  const found = manifests.filter((m) => m.kind === kind && (name === undefined || m.metadata.name === name));
  if (found.length !== 1) throw new Error(`expected one ${kind}${name ? `/${name}` : ""}, found ${found.length}`);
  return found[0]!;
}

/**
 * The example Secret shipped as comments: its lines from `# apiVersion:` on, each with its leading
 * `#` and one space removed (the prose above them is not part of it).
 */
export function uncommentedExampleSecret(): Manifest {
  const lines = readFileSync(join(DEPLOY_DIR, "secret.example.yaml"), "utf8").split("\n");
  const start = lines.findIndex((line) => line.startsWith("# apiVersion:"));
  if (start < 0) throw new Error("secret.example.yaml has no commented manifest");
  return parse(lines.slice(start).map((line) => line.replace(/^# ?/, "")).join("\n")) as Manifest;
}
