// The plugin's manifest: one `sandbox_provider` environment driver, `kubernetes-wasm`, whose
// environments run sandboxes on a Kubernetes cluster through the provider component.
//
// Two configs, two owners. The plugin's config (`instanceConfigSchema`, kept per company by
// Paperclip) is the operator's: which namespaces, warm pools and templates the host lets the
// provider use, the installation's owner id. An environment's config (`configSchema`) is the
// provider config (namespace, image, backend, resources, ...) plus the cluster's kubeconfig and
// per-lease secret environment variables, both Paperclip secret references, declared under
// `properties` where Paperclip looks for them.
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import type { PaperclipPluginManifestV1 } from "@paperclipai/plugin-sdk";

import { SECRET_ENV_SCHEMA } from "./secret-env.js";

/**
 * Which provider this package carries: `paperclipSandboxProvider` in its package.json, which
 * `make paperclip-plugin PLUGIN_PROVIDER=...` writes. The package of another provider component
 * (the reference provider) gets a plugin id and driver key of its own, so both install side by
 * side and an environment swaps provider by naming the other driver.
 */
function variant(): { id: string; driverKey: string; displayName: string } {
  const defaults = { id: "sandbox-provider.kubernetes", driverKey: "kubernetes-wasm", displayName: "Kubernetes (WebAssembly provider)" };
  try {
    const pkg = JSON.parse(readFileSync(join(dirname(fileURLToPath(import.meta.url)), "..", "..", "package.json"), "utf8")) as Record<string, unknown>;
    const v = pkg.paperclipSandboxProvider as Record<string, unknown> | undefined;
    const text = (key: keyof typeof defaults) => (typeof v?.[key] === "string" && v[key] !== "" ? (v[key] as string) : defaults[key]);
    return { id: text("id"), driverKey: text("driverKey"), displayName: text("displayName") };
  } catch {
    return defaults;
  }
}

const VARIANT = variant();

/**
 * The environment driver's key: environments name a driver by its key alone, so it must not be
 * `kubernetes`, which Paperclip's own Kubernetes plugin declares (one would shadow the other).
 */
export const DRIVER_KEY = VARIANT.driverKey;

const manifest: PaperclipPluginManifestV1 = {
  id: VARIANT.id,
  apiVersion: 1,
  version: "0.2.0",
  displayName: `${VARIANT.displayName} sandboxes`,
  description:
    "Sandboxes on Kubernetes (agent-sandbox Sandbox, SandboxClaim on a warm pool, or batch/v1 Job) through a WebAssembly provider that reaches the cluster only through its host's policy.",
  author: "Kubernetes sandbox provider authors",
  categories: ["automation"],
  capabilities: ["environment.drivers.register", "plugin.state.read", "plugin.state.write", "metrics.write"],
  entrypoints: { worker: "./dist/src/worker.js" },
  instanceConfigSchema: {
    type: "object",
    description:
      "The operator's policy for this company's environments. Checked at probe and at every run (an environment's validation has no company, so it checks the config alone).",
    properties: {
      allowedNamespaces: {
        type: "array",
        items: { type: "string" },
        description: "The namespaces the host lets the provider use; an environment names one of them (default: [\"default\"]).",
      },
      allowedWarmPools: {
        type: "array",
        items: { type: "string" },
        description:
          "The warm pools (SandboxWarmPool) a claim-backend environment may name; \"*\" for any. A pool's template decides the pod, so list only pools you set up (default: none).",
      },
      allowedClaimTemplates: {
        type: "array",
        items: { type: "string" },
        description:
          "The SandboxTemplates a claim on agent-sandbox v0.4 (extensions v1alpha1) may name; \"*\" for any (default: none).",
      },
      ownerId: {
        type: "string",
        description: "This installation's owner id, stamped on everything it creates; share it between replicas only.",
      },
      policyFile: {
        type: "string",
        description:
          "A sandbox-host policy file (JSON) on the worker's machine: the pod-security ceiling, sandbox egress, pod Secrets and ServiceAccounts. The fields above replace or add to its own.",
      },
      ownershipKeyFile: {
        type: "string",
        description:
          "A file (mode 600) of ownership keys, one per line, at least 32 bytes (`openssl rand -base64 48`): the host signs everything it creates and treats only what it signed as this installation's. Without one, anyone who can create objects in the namespaces with the managed-by label can make one the host will use.",
      },
      cacheDir: { type: "string", description: "Where sandbox-host caches the compiled component (default: ~/.cache/paperclip-sandbox-host)." },
      limitsFile: { type: "string", description: "A sandbox-host limits file (JSON) for every call." },
      allowAmbientCredentials: {
        type: "boolean",
        default: false,
        description:
          "Let an environment without a kubeconfig use the worker's own credentials (its in-cluster service account). Off: every environment brings its kubeconfig.",
      },
    },
  },
  environmentDrivers: [
    {
      driverKey: DRIVER_KEY,
      kind: "sandbox_provider",
      displayName: VARIANT.displayName,
      description: "A sandbox per run on a Kubernetes cluster: an agent-sandbox Sandbox, a SandboxClaim on a warm pool, or a batch/v1 Job.",
      supportsReusableLeases: true,
      sandboxCapabilities: { reusableLeases: true },
      configSchema: {
        type: "object",
        required: ["namespace"],
        properties: {
          namespace: { type: "string", description: "Namespace of the sandboxes; one the plugin's allowedNamespaces lists." },
          image: { type: "string", description: "Container image of the sandbox (backends sandbox and job; a claim's template names its own)." },
          backend: { type: "string", enum: ["sandbox", "job", "claim"], default: "sandbox" },
          claim: {
            type: "object",
            description: "Backend claim: the agent-sandbox warm pool to claim from (and its template, which v1alpha1 clusters need).",
            properties: { warmPool: { type: "string" }, template: { type: "string" } },
          },
          kubeconfig: {
            type: "string",
            format: "secret-ref",
            description: "kubeconfig (YAML) of the cluster, a Paperclip secret; omit it only where the operator allows the worker's own credentials.",
          },
          secretEnv: SECRET_ENV_SCHEMA,
          leaseTtlSeconds: { type: "integer", minimum: 1, default: 3600 },
          workingDir: { type: "string", description: "The sandbox directory the agent's workspace is made in (default /workspace)." },
          resources: { type: "object", description: "Requests and limits of the sandbox container." },
          env: { type: "object", additionalProperties: { type: "string" }, description: "Plain environment variables." },
        },
        additionalProperties: true,
      },
    },
  ],
};

export default manifest;
