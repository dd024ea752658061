// Unknown keys of a provider config, found from the provider's own config schema (`describe`).
//
// A provider reports an unknown key as a warning and ignores it; Paperclip shows a user no
// warning of a config that validates (it keeps only the errors of one that does not), so a
// misspelt key (`imagee`) would vanish without a word. The plugin refuses it instead, with the
// same check at validation and at every call that reads the config, from any provider's schema:
// where an object's schema lists `properties` and does not allow others, a key it does not list
// is unknown.
import { type Problem, pointerKey } from "./config.js";

type Schema = Record<string, unknown>;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** The sub-schemas a schema combines (`allOf`, `anyOf`, `oneOf`, `then`, `else`), itself first. */
function branches(schema: Schema): Schema[] {
  const out: Schema[] = [schema];
  for (const key of ["allOf", "anyOf", "oneOf"]) {
    const list = schema[key];
    if (Array.isArray(list)) for (const b of list) if (isObject(b)) out.push(...branches(b));
  }
  for (const key of ["then", "else"]) {
    const b = schema[key];
    if (isObject(b)) out.push(...branches(b));
  }
  return out;
}

/** Every key of `value` that `schema` does not know, with its path; at most `limit` of them. */
export function unknownKeys(value: unknown, schema: unknown, path = "", limit = 20): Problem[] {
  const out: Problem[] = [];
  walk(value, schema, path, out, limit);
  return out;
}

function walk(value: unknown, schema: unknown, path: string, out: Problem[], limit: number): void {
  if (!isObject(value) || !isObject(schema)) return;
  const parts = branches(schema);
  const properties = new Map<string, Schema>();
  let listed = false;
  let additional: unknown = undefined;
  for (const part of parts) {
    if (isObject(part.properties)) {
      listed = true;
      for (const [k, v] of Object.entries(part.properties)) if (isObject(v) && !properties.has(k)) properties.set(k, v);
    }
    if (part.additionalProperties !== undefined && additional === undefined) additional = part.additionalProperties;
  }
  for (const [key, child] of Object.entries(value)) {
    if (out.length >= limit) return;
    const where = `${path}/${pointerKey(key)}`;
    const known = properties.get(key);
    if (known) {
      walk(child, known, where, out, limit);
    } else if (isObject(additional)) {
      walk(child, additional, where, out, limit);
    } else if (listed && additional !== true) {
      const names = [...properties.keys()].sort();
      const near = names.find((n) => distance(n.toLowerCase(), key.toLowerCase()) <= 2);
      const hint = near
        ? `did you mean ${near}?`
        : names.length <= 12
          ? `the keys here are ${names.join(", ")}`
          : "see the provider's config schema";
      out.push({ path: where, message: `is not a key of this provider's config (${hint})` });
    }
  }
}

/** Levenshtein distance, for keys a few characters long (a longer key is never near). */
function distance(a: string, b: string): number {
  if (Math.abs(a.length - b.length) > 2 || a.length > 64 || b.length > 64) return Infinity;
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) {
      next[j] = Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    row = next;
  }
  return row[b.length]!;
}
