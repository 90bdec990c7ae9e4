import { describe, expect, test } from "bun:test";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { ScaledObject } from "@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject";
import { TriggerAuthentication } from "@kubernetes-models/keda/keda.sh/v1alpha1/TriggerAuthentication";
import { Deployment } from "kubernetes-models/apps/v1/Deployment";
import { HorizontalPodAutoscaler } from "kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1/PodDisruptionBudget";
import { Secret } from "kubernetes-models/v1/Secret";
import { Service } from "kubernetes-models/v1/Service";
import { buildKustomization, DEPLOY_DIR, readKustomization, readManifestFile, uncommentedExampleSecret, type Manifest } from "../support/deploy-manifests.ts";

/**
 * Every manifest under deploy/ against the published schemas, without a cluster: Kubernetes' own
 * OpenAPI schemas for 1.27 (kubernetes-models) and KEDA's CRD schemas (@kubernetes-models/keda),
 * compiled to ajv validators by those packages. Both kustomizations are built and each of their
 * manifests checked; so is the commented Secret template, once uncommented.
 */

interface Validating {
  validate(): void;
}
const MODELS: Record<string, new (data: never) => Validating> = {
  "apps/v1/Deployment": Deployment,
  "v1/Service": Service,
  "v1/Secret": Secret,
  "policy/v1/PodDisruptionBudget": PodDisruptionBudget,
  "autoscaling/v2/HorizontalPodAutoscaler": HorizontalPodAutoscaler,
  "keda.sh/v1alpha1/ScaledObject": ScaledObject,
  "keda.sh/v1alpha1/TriggerAuthentication": TriggerAuthentication,
};

/** The schema's complaints about a manifest, or null when it conforms. */
function schemaErrors(manifest: Manifest): string | null {
  const Model = MODELS[`${manifest.apiVersion}/${manifest.kind}`];
  if (!Model) return `no schema for ${manifest.apiVersion} ${manifest.kind}`;
  try {
    new Model(structuredClone(manifest) as never).validate();
    return null;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

const VARIANTS = { "deploy/ (Redis over TCP)": DEPLOY_DIR, "deploy/upstash/ (rediss://)": join(DEPLOY_DIR, "upstash") };

describe("the Kubernetes manifests under deploy/", () => {
  for (const [variant, dir] of Object.entries(VARIANTS)) {
    test(`every manifest ${variant} applies conforms to its Kubernetes or KEDA schema`, () => {
      const manifests = buildKustomization(dir);
      expect(manifests.length).toBeGreaterThan(0);
      const errors = manifests.map((m) => ({ manifest: `${m.kind}/${m.metadata.name}`, errors: schemaErrors(m) }));
      expect(errors.filter((e) => e.errors !== null)).toEqual([]);
    });
  }

  test("every YAML file in deploy/ is listed in the kustomization, except the commented Secret template", () => {
    const files = readdirSync(DEPLOY_DIR).filter((f) => f.endsWith(".yaml") && f !== "kustomization.yaml");
    const listed = readKustomization(DEPLOY_DIR).resources ?? [];
    expect(files.filter((f) => !listed.includes(f)).sort()).toEqual(["secret.example.yaml"]);
  });

  test("the Secret template applies nothing as shipped, and is a valid Secret once uncommented", () => {
    expect(readManifestFile(join(DEPLOY_DIR, "secret.example.yaml"))).toEqual([]);
    const secret = uncommentedExampleSecret();
    expect(secret.kind).toBe("Secret");
    expect(schemaErrors(secret)).toBeNull();
  });

  test("only the Upstash variant turns TLS on for KEDA's Redis connection, on every trigger", () => {
    const tls = (dir: string) =>
      (buildKustomization(dir).find((m) => m.kind === "ScaledObject")!.spec as { triggers: { metadata: Record<string, string> }[] }).triggers.map((t) => t.metadata.enableTLS);
    expect(tls(DEPLOY_DIR)).toEqual(["false", "false"]);
    expect(tls(join(DEPLOY_DIR, "upstash"))).toEqual(["true", "true"]);
  });

  test("the schemas refuse a manifest with a wrongly typed field, so a conforming one means something", () => {
    const manifests = buildKustomization();
    const deployment = structuredClone(manifests.find((m) => m.kind === "Deployment")!);
    (deployment.spec as { template: { spec: { containers: { ports: { containerPort: unknown }[] }[] } } }).template.spec.containers[0]!.ports[0]!.containerPort = "9464";
    expect(schemaErrors(deployment)).toContain("containerPort must be integer");

    const scaled = structuredClone(manifests.find((m) => m.kind === "ScaledObject")!);
    // KEDA's trigger metadata is a map of strings: an unquoted number is a mistake kubectl would refuse.
    (scaled.spec as { triggers: { metadata: Record<string, unknown> }[] }).triggers[0]!.metadata.listLength = 4;
    expect(schemaErrors(scaled)).toContain("listLength must be string");
  });
});
