// Paperclip's configs onto the host's and the provider's.
//
// An environment's config holds the provider config, plus keys that are the plugin's
// (`kubeconfig`, `secretEnv`) and keys Paperclip itself sets and reads (`timeoutMs`,
// `reuseLease`, ...). Only the provider config reaches the provider; the others are kept in
// the normalized config. The plugin's config is the operator's, per company (Paperclip keeps
// plugin config per company): the host policy's namespaces, warm pools, owner id. The programs
// the worker runs (`sandbox-host`, the component) are the package's own, never a setting.
//
// What each call can read decides what it checks. `environmentValidateConfig` comes with no
// company (Paperclip refuses `config.get` then), and with secret references unresolved: it checks
// the config offline (its shape, the provider's own validation, unknown keys, an inline
// kubeconfig) and never the operator's policy. Probe, acquire and every lease call come with the
// company and resolved secrets: they check the policy too. So nothing validation refuses is
// something an acquire would allow.
import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { homedir } from "node:os";
import { fileURLToPath } from "node:url";

import { isSecretId, readSecretEnv } from "./secret-env.js";

/** Environment-config keys that are the plugin's, not the provider's. */
export const PLUGIN_KEYS = ["kubeconfig", "secretEnv"] as const;

/** Environment-config keys Paperclip sets and reads itself. */
export const PAPERCLIP_KEYS = [
  "provider",
  "driver",
  "timeoutMs",
  "reuseLease",
  "runnerLifecycleMode",
  "runnerIdleTimeoutMs",
  "archiveOnRelease",
  "streamRunLogs",
] as const;

/** One problem of a config, with the JSON pointer of its field. */
export interface Problem {
  path: string;
  message: string;
}

/** Where the provider's cluster comes from. */
export type ClusterSetting =
  /** No cluster at all: calls that need none (describe, validate-config). */
  | { kind: "none" }
  /** A kubeconfig (YAML) from the environment: untrusted. */
  | { kind: "kubeconfig"; yaml: string }
  /** The worker's own credentials (in-cluster), when the operator allows them. */
  | { kind: "ambient" };

/** How one `sandbox-host serve` process is started; equal settings share a process. */
export interface HostSettings {
  /** Validation's offline process, or a company's under its policy. */
  purpose: "validation" | "company";
  binary: string;
  component: string;
  namespaces: string[];
  /** The warm pools a SandboxClaim may name (`*`: any); none by default. */
  warmPools: string[];
  /** The templates a v1alpha1 SandboxClaim may name (`*`: any); none by default. */
  claimTemplates: string[];
  ownerId?: string;
  /** The operator's sandbox-host policy file (pod-security ceiling, egress, ...). */
  policyFile?: string;
  /** The operator's ownership key file: the host signs what it creates and proves it by that. */
  ownershipKeyFile?: string;
  cacheDir: string;
  limitsFile?: string;
  cluster: ClusterSetting;
}

/** An environment's `kubeconfig`, as far as the plugin can tell. */
export type KubeconfigValue =
  | { kind: "none" }
  | { kind: "inline"; yaml: string }
  /** The id of a Paperclip secret: resolved by Paperclip for every call but validation. */
  | { kind: "reference" };

/** An environment config, split. */
export interface EnvironmentConfig {
  /** What the provider gets. */
  provider: Record<string, unknown>;
  /** Everything else, kept as it came (`secretEnv` in its stored form). */
  rest: Record<string, unknown>;
  kubeconfig: KubeconfigValue;
  /** Secret environment variables, NAME -> value (resolved by Paperclip at run time). */
  secretEnv: Record<string, string>;
  /** Paperclip's `reuseLease`: ask for leases that release suspends. */
  reusable: boolean;
  /** Problems every call refuses. */
  problems: Problem[];
  /** Problems of a stored config only, which validation refuses and run time tolerates. */
  storedProblems: Problem[];
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * Splits an environment config into the provider's part and the rest. `runtime`: Paperclip
 * resolved its secret references (every call but validation).
 */
export function splitEnvironmentConfig(raw: unknown, runtime: boolean): EnvironmentConfig {
  const problems: Problem[] = [];
  const storedProblems: Problem[] = [];
  const config = isObject(raw) ? raw : {};
  if (!isObject(raw)) problems.push({ path: "", message: "the environment config is not an object" });
  const provider: Record<string, unknown> = {};
  const rest: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(config)) {
    const ours = (PLUGIN_KEYS as readonly string[]).includes(key) || (PAPERCLIP_KEYS as readonly string[]).includes(key);
    (ours ? rest : provider)[key] = value;
  }
  let kubeconfig: KubeconfigValue = { kind: "none" };
  const k = config.kubeconfig;
  if (k !== undefined && k !== null && k !== "") {
    if (typeof k !== "string") {
      problems.push({ path: "/kubeconfig", message: "must be a kubeconfig (YAML) stored as a Paperclip secret" });
    } else if (isSecretId(k)) {
      kubeconfig = { kind: "reference" };
      if (runtime) {
        problems.push({
          path: "/kubeconfig",
          message: "is the id of a Paperclip secret that Paperclip did not resolve for this call: check that the secret exists and the environment may use it",
        });
      }
    } else {
      kubeconfig = { kind: "inline", yaml: k };
    }
  }
  const secretEnv = readSecretEnv(config.secretEnv, runtime);
  problems.push(...secretEnv.problems);
  if (secretEnv.slots !== undefined) rest.secretEnv = secretEnv.slots;
  if (config.archiveOnRelease === true) {
    // Paperclip's own probe sets it on the config it acquires with: at run time the sandbox is
    // deleted at release all the same, never left running until its expiry.
    storedProblems.push({
      path: "/archiveOnRelease",
      message:
        "is not supported: a Kubernetes sandbox is deleted at release, not archived; remove it (reuseLease with backend sandbox and sandbox.workspaceVolume keeps a workspace between runs)",
    });
  }
  return { provider, rest, kubeconfig, secretEnv: secretEnv.vars, reusable: config.reuseLease === true, problems, storedProblems };
}

/** This package's root, where the bundled binary and component are. */
const PACKAGE_ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/**
 * The programs the worker runs: the package's own `bin/sandbox-host` and
 * `component/provider.wasm` (`make paperclip-plugin` puts them there). `SANDBOX_HOST_BIN` and
 * `SANDBOX_HOST_COMPONENT` override them for development; Paperclip gives a worker no variables
 * of its own, so an installed plugin always runs what it was packaged with.
 */
export function programs(): { binary: string; component: string } {
  const bundledBinary = join(PACKAGE_ROOT, "bin", "sandbox-host");
  return {
    binary: process.env.SANDBOX_HOST_BIN ?? (existsSync(bundledBinary) ? bundledBinary : "sandbox-host"),
    component: process.env.SANDBOX_HOST_COMPONENT ?? join(PACKAGE_ROOT, "component", "provider.wasm"),
  };
}

/** Where `sandbox-host` caches the compiled component: private, it is native code the host runs. */
function defaultCacheDir(): string {
  return process.env.SANDBOX_HOST_CACHE_DIR ?? join(homedir(), ".cache", "paperclip-sandbox-host");
}

/**
 * The host settings of validation: no company, so no operator policy; the component alone
 * checks the config, with no cluster unless the environment brings an inline kubeconfig (which
 * is then checked too: a serve process started with it refuses a wrong one at once).
 */
export function offlineSettings(kubeconfig: KubeconfigValue): HostSettings {
  return {
    purpose: "validation",
    ...programs(),
    namespaces: ["*"],
    warmPools: ["*"],
    claimTemplates: ["*"],
    cacheDir: defaultCacheDir(),
    cluster: kubeconfig.kind === "inline" ? { kind: "kubeconfig", yaml: kubeconfig.yaml } : { kind: "none" },
  };
}

/** The host settings of a call with a company: its plugin config (the operator's) and the environment's kubeconfig. */
export function hostSettings(instance: unknown, kubeconfig: KubeconfigValue): { settings: HostSettings; problems: Problem[] } {
  const problems: Problem[] = [];
  const config = isObject(instance) ? instance : {};
  const text = (key: string): string | undefined => {
    const value = config[key];
    if (value === undefined || value === null || value === "") return undefined;
    if (typeof value === "string") return value;
    problems.push({ path: `/plugin-config/${key}`, message: "must be a string" });
    return undefined;
  };
  let cluster: ClusterSetting = { kind: "ambient" };
  if (kubeconfig.kind === "inline") {
    cluster = { kind: "kubeconfig", yaml: kubeconfig.yaml };
  } else if (kubeconfig.kind === "none" && config.allowAmbientCredentials !== true) {
    problems.push({
      path: "/kubeconfig",
      message:
        "is required: the operator has not let environments use the worker's own credentials (allowAmbientCredentials in the plugin's config)",
    });
  }
  const names = (key: string, what: string): string[] | undefined => {
    const value = config[key];
    if (value === undefined || value === null) return undefined;
    if (Array.isArray(value) && value.every((n) => typeof n === "string" && n !== "")) return value as string[];
    problems.push({ path: `/plugin-config/${key}`, message: `must be a list of ${what} names` });
    return undefined;
  };
  const allowed = names("allowedNamespaces", "namespace");
  const settings: HostSettings = {
    purpose: "company",
    ...programs(),
    namespaces: allowed !== undefined && allowed.length > 0 ? allowed : ["default"],
    warmPools: names("allowedWarmPools", "warm pool") ?? [],
    claimTemplates: names("allowedClaimTemplates", "template") ?? [],
    ownerId: text("ownerId"),
    policyFile: text("policyFile"),
    ownershipKeyFile: text("ownershipKeyFile"),
    cacheDir: text("cacheDir") ?? defaultCacheDir(),
    limitsFile: text("limitsFile"),
    cluster,
  };
  return { settings, problems };
}

/** A key that tells equal settings apart without holding the kubeconfig itself. */
export function settingsKey(s: HostSettings): string {
  const cluster = s.cluster.kind === "kubeconfig" ? createHash("sha256").update(s.cluster.yaml).digest("hex") : s.cluster.kind;
  return JSON.stringify([
    s.purpose,
    s.binary,
    s.component,
    s.namespaces,
    s.warmPools,
    s.claimTemplates,
    s.ownerId ?? null,
    s.policyFile ?? null,
    s.ownershipKeyFile ?? null,
    s.cacheDir,
    s.limitsFile ?? null,
    cluster,
  ]);
}

/** One key of a JSON pointer, escaped (RFC 6901) and cut short. */
export function pointerKey(key: string): string {
  const escaped = key.replace(/~/g, "~0").replace(/\//g, "~1");
  return escaped.length > 64 ? `${escaped.slice(0, 64)}…` : escaped;
}

/** A problem as the SDK's validation result lists it: `path: message`. */
export function problemText(p: Problem): string {
  return p.path ? `${p.path}: ${p.message}` : p.message;
}
