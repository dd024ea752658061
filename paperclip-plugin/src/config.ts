// Paperclip's configs onto the host's and the provider's.
//
// An environment's config holds the provider config, plus keys that are the plugin's
// (`kubeconfig`, `secretEnv`) and keys Paperclip itself sets and reads (`timeoutMs`,
// `reuseLease`, ...). Only the provider config reaches the provider; the others are kept in
// the normalized config, unchanged. The instance config is the operator's and becomes the
// `sandbox-host serve` command line: binary, component, policy namespaces, owner id.
import { createHash } from "node:crypto";
import { dirname, join } from "node:path";
import { homedir } from "node:os";
import { fileURLToPath } from "node:url";

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

/** How one `sandbox-host serve` process is started; equal settings share a process. */
export interface HostSettings {
  binary: string;
  component: string;
  namespaces: string[];
  /** The warm pools a SandboxClaim may name (`*`: any); none by default. */
  warmPools: string[];
  /** The templates a v1alpha1 SandboxClaim may name (`*`: any); none by default. */
  claimTemplates: string[];
  ownerId?: string;
  cacheDir: string;
  limitsFile?: string;
  /** kubeconfig YAML (a resolved secret); none: in-cluster or the host's own inference. */
  kubeconfig?: string;
}

/** An environment config, split. */
export interface EnvironmentConfig {
  /** What the provider gets. */
  provider: Record<string, unknown>;
  /** Everything else, kept as it came. */
  rest: Record<string, unknown>;
  kubeconfig?: string;
  /** Secret environment variables, NAME -> value (resolved by Paperclip). */
  secretEnv: Record<string, string>;
  /** Paperclip's `reuseLease`: ask for leases that release suspends. */
  reusable: boolean;
  problems: Problem[];
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** Splits an environment config into the provider's part and the rest. */
export function splitEnvironmentConfig(raw: unknown): EnvironmentConfig {
  const problems: Problem[] = [];
  const config = isObject(raw) ? raw : {};
  if (!isObject(raw)) problems.push({ path: "", message: "the environment config is not an object" });
  const provider: Record<string, unknown> = {};
  const rest: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(config)) {
    const ours = (PLUGIN_KEYS as readonly string[]).includes(key) || (PAPERCLIP_KEYS as readonly string[]).includes(key);
    (ours ? rest : provider)[key] = value;
  }
  let kubeconfig: string | undefined;
  if (config.kubeconfig !== undefined && config.kubeconfig !== null && config.kubeconfig !== "") {
    if (typeof config.kubeconfig === "string") kubeconfig = config.kubeconfig;
    else problems.push({ path: "/kubeconfig", message: "must be the kubeconfig YAML (a secret reference)" });
  }
  const secretEnv: Record<string, string> = {};
  if (config.secretEnv !== undefined && config.secretEnv !== null) {
    if (!isObject(config.secretEnv)) {
      problems.push({ path: "/secretEnv", message: "must be an object of NAME -> secret" });
    } else {
      for (const [name, value] of Object.entries(config.secretEnv)) {
        // The value is never shown: it is a secret.
        if (typeof value === "string") secretEnv[name] = value;
        else problems.push({ path: `/secretEnv/${pointerKey(name)}`, message: "must be a secret reference (a string)" });
      }
    }
  }
  return { provider, rest, kubeconfig, secretEnv, reusable: config.reuseLease === true, problems };
}

/** This package's root, where the default component is looked for. */
const PACKAGE_ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** The host settings of an instance config (the operator's) and an environment's kubeconfig. */
export function hostSettings(instance: unknown, kubeconfig: string | undefined): { settings: HostSettings; problems: Problem[] } {
  const problems: Problem[] = [];
  const config = isObject(instance) ? instance : {};
  const text = (key: string): string | undefined => {
    const value = config[key];
    if (value === undefined || value === null || value === "") return undefined;
    if (typeof value === "string") return value;
    problems.push({ path: `/instance/${key}`, message: "must be a string" });
    return undefined;
  };
  if (kubeconfig === undefined && config.allowAmbientCredentials !== true) {
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
    problems.push({ path: `/instance/${key}`, message: `must be a list of ${what} names` });
    return undefined;
  };
  const allowed = names("allowedNamespaces", "namespace");
  const namespaces = allowed !== undefined && allowed.length > 0 ? allowed : ["default"];
  const settings: HostSettings = {
    binary: text("sandboxHostBinary") ?? process.env.SANDBOX_HOST_BIN ?? "sandbox-host",
    component:
      text("component") ?? process.env.SANDBOX_HOST_COMPONENT ?? join(PACKAGE_ROOT, "component", "kubernetes_provider.wasm"),
    namespaces,
    warmPools: names("allowedWarmPools", "warm pool") ?? [],
    claimTemplates: names("allowedClaimTemplates", "template") ?? [],
    ownerId: text("ownerId"),
    // A private directory: the compiled component is native code the host runs.
    cacheDir: text("cacheDir") ?? process.env.SANDBOX_HOST_CACHE_DIR ?? join(homedir(), ".cache", "paperclip-sandbox-host"),
    limitsFile: text("limitsFile"),
    kubeconfig,
  };
  return { settings, problems };
}

/** A key that tells equal settings apart without holding the kubeconfig itself. */
export function settingsKey(s: HostSettings): string {
  const kubeconfig = s.kubeconfig === undefined ? null : createHash("sha256").update(s.kubeconfig).digest("hex");
  return JSON.stringify([
    s.binary,
    s.component,
    s.namespaces,
    s.warmPools,
    s.claimTemplates,
    s.ownerId ?? null,
    s.cacheDir,
    s.limitsFile ?? null,
    kubeconfig,
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
