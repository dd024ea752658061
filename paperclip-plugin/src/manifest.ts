// The plugin's manifest: one `sandbox_provider` environment driver, `kubernetes`, whose
// environments run sandboxes on a Kubernetes cluster through the provider component.
//
// Two configs, two owners. The plugin's instance config (`instanceConfigSchema`) is the
// operator's: where `sandbox-host` and the component are, which namespaces the host lets the
// provider use, the installation's owner id. An environment's config (`configSchema`) is the
// provider config (namespace, image, backend, resources, ...) plus the cluster's kubeconfig and
// per-lease secret environment variables, both secret references Paperclip resolves.
import type { PaperclipPluginManifestV1 } from "@paperclipai/plugin-sdk";

/** The environment driver's key, the provider's `driver-key` too. */
export const DRIVER_KEY = "kubernetes";

const manifest: PaperclipPluginManifestV1 = {
  id: "sandbox-provider.kubernetes",
  apiVersion: 1,
  version: "0.1.0",
  displayName: "Kubernetes sandboxes",
  description:
    "Sandboxes on Kubernetes (agent-sandbox Sandbox or batch/v1 Job) through a WebAssembly provider that reaches the cluster only through its host's policy.",
  author: "Kubernetes sandbox provider authors",
  categories: ["automation"],
  capabilities: ["environment.drivers.register", "plugin.state.read", "plugin.state.write"],
  entrypoints: { worker: "./dist/src/worker.js" },
  instanceConfigSchema: {
    type: "object",
    properties: {
      sandboxHostBinary: {
        type: "string",
        description: "Path of the sandbox-host binary (default: $SANDBOX_HOST_BIN, else sandbox-host on PATH).",
      },
      component: {
        type: "string",
        description:
          "Path of the provider component, kubernetes_provider.wasm (default: $SANDBOX_HOST_COMPONENT, else component/kubernetes_provider.wasm in this package).",
      },
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
      cacheDir: { type: "string", description: "Where sandbox-host caches the compiled component." },
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
      displayName: "Kubernetes",
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
            description: "kubeconfig (YAML) of the cluster; omit it to use the in-cluster service account.",
          },
          secretEnv: {
            type: "object",
            additionalProperties: { type: "string", format: "secret-ref" },
            description: "Secret environment variables of every sandbox, NAME -> secret; kept out of pod specs and leases.",
          },
          leaseTtlSeconds: { type: "integer", minimum: 1, default: 3600 },
          resources: { type: "object", description: "Requests and limits of the sandbox container." },
          env: { type: "object", additionalProperties: { type: "string" }, description: "Plain environment variables." },
        },
        additionalProperties: true,
      },
    },
  ],
};

export default manifest;
