// `secretEnv`: the secret environment variables of every sandbox of an environment, as Paperclip
// secret references.
//
// Paperclip resolves (and stores, and lists as bindings) a secret only at a config path that the
// driver's config schema declares under `properties` with `format: "secret-ref"`: a map keyed by
// the variables' own names cannot be declared, so its values would stay plain text in the
// environment and be handed over unresolved. The stored form is therefore a fixed set of slots,
// `secretEnv.1` .. `secretEnv.16`, each `{ name, value }`, whose `value` is declared a secret
// reference (`SLOT_SCHEMA`). A user may still write the map `{ NAME: value }`: validation turns
// it into slots, and Paperclip then stores each plain value as a secret of its own and keeps only
// its id. At run time Paperclip hands the slots over with their values resolved.
//
// No message here quotes a name or a value: a misplaced secret (name and value swapped) would be
// shown otherwise. Entries are named by their slot or their position.
import type { Problem } from "./config.js";

/** How many secret variables an environment may have: the slots the schema declares. */
export const MAX_SECRET_ENV = 16;

/** What a variable's name must look like: a shell identifier, as `sh` and Kubernetes take it. */
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Paperclip's secret ids: a bare id in a runtime config is a reference nobody resolved. */
const SECRET_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Whether a config string is a Paperclip secret id, not a value. */
export function isSecretId(value: string): boolean {
  return SECRET_ID.test(value.trim());
}

/** One slot's schema: its `value` is a secret Paperclip resolves. */
const SLOT_SCHEMA = {
  type: "object",
  required: ["name", "value"],
  properties: {
    name: { type: "string", pattern: ENV_NAME.source, description: "The variable's name." },
    value: { type: "string", format: "secret-ref", description: "A Paperclip secret (its value is never stored in the environment)." },
  },
};

/** The schema of `secretEnv`: the slots, each declared where Paperclip looks for secrets. */
export const SECRET_ENV_SCHEMA = {
  type: "object",
  description: `Secret environment variables of every sandbox (at most ${MAX_SECRET_ENV}), slot "1".."${MAX_SECRET_ENV}" -> { name, value: a Paperclip secret }; { NAME: secret } is accepted too and stored as slots. Kept out of pod specs, claims and leases, and redacted from command output.`,
  properties: Object.fromEntries(Array.from({ length: MAX_SECRET_ENV }, (_, i) => [String(i + 1), SLOT_SCHEMA])),
};

/** `secretEnv` read: its variables, its stored (slot) form, and what is wrong with it. */
export interface SecretEnv {
  /** NAME -> value (or, before Paperclip resolved it, the secret's id). */
  vars: Record<string, string>;
  /** The slot form, to store (`undefined` when the config has no `secretEnv`). */
  slots?: Record<string, { name: string; value: string }>;
  problems: Problem[];
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * Reads `secretEnv` in either form. `resolved`: the config comes from Paperclip at run time, so
 * every secret reference in a slot has been resolved; a bare secret id in the map form (stored
 * before the slots existed) was never resolved, and is refused rather than handed to the sandbox.
 */
export function readSecretEnv(raw: unknown, resolved: boolean): SecretEnv {
  const out: SecretEnv = { vars: {}, problems: [] };
  if (raw === undefined || raw === null) return out;
  if (!isObject(raw)) {
    out.problems.push({ path: "/secretEnv", message: "must be an object: slot -> { name, value }, or NAME -> secret" });
    return out;
  }
  const entries = Object.entries(raw);
  const slotted = entries.length > 0 && entries.every(([, v]) => isObject(v));
  if (entries.length > MAX_SECRET_ENV) {
    out.problems.push({ path: "/secretEnv", message: `has ${entries.length} entries; at most ${MAX_SECRET_ENV} are allowed` });
    return out;
  }
  const pairs: { name: unknown; value: unknown; where: string; path: string }[] = slotted
    ? entries.map(([slot, v]) => {
        const entry = v as Record<string, unknown>;
        const known = /^([1-9]|1[0-6])$/.test(slot);
        if (!known) out.problems.push({ path: "/secretEnv", message: `has a slot that is not 1..${MAX_SECRET_ENV}` });
        for (const key of Object.keys(entry)) {
          if (key !== "name" && key !== "value") out.problems.push({ path: `/secretEnv/${known ? slot : "?"}`, message: "has a key other than name and value" });
        }
        return { name: entry.name, value: entry.value, where: `slot ${known ? slot : "?"}`, path: `/secretEnv/${known ? slot : "?"}` };
      })
    : entries.map(([name, value], i) => ({ name, value, where: `entry ${i + 1}`, path: "/secretEnv" }));
  const slots: Record<string, { name: string; value: string }> = {};
  pairs.forEach(({ name, value, where, path }, i) => {
    if (typeof name !== "string" || !ENV_NAME.test(name)) {
      out.problems.push({ path, message: `${where}: the name must be an environment variable name (letters, digits, _; not a digit first)` });
      return;
    }
    if (typeof value !== "string" || value.trim() === "") {
      out.problems.push({ path, message: `${where}: the value must be a secret (a Paperclip secret, or the value to store as one)` });
      return;
    }
    if (value.includes("\0")) {
      out.problems.push({ path, message: `${where}: the value holds a NUL byte, which no environment variable can carry` });
      return;
    }
    if (name in out.vars) {
      out.problems.push({ path, message: `${where}: a variable of that name is already set by an earlier entry` });
      return;
    }
    if (resolved && !slotted && isSecretId(value)) {
      out.problems.push({
        path,
        message: `${where}: holds the id of a Paperclip secret that was never resolved (stored before secrets were slots): edit the environment and save it again`,
      });
      return;
    }
    out.vars[name] = value;
    slots[String(i + 1)] = { name, value };
  });
  out.slots = slots;
  return out;
}
