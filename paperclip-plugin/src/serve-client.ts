// A `sandbox-host serve` child process and its JSON-lines protocol (documented in the host's
// README): requests written as they come, replies matched by id, in any order.
//
// The child is started on first use and started again when it dies. Every provider call is
// idempotent (acquire on its acquisition id; resume-check, renew, release, destroy on the
// lease), so a call in flight when the child died is sent again to the new one: a lease is
// never lost to a crash of the host, and a killed acquire adopts what it had made. A child that
// keeps dying (three exits within ten seconds) fails calls with the tail of its stderr instead.
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

import type { HostSettings } from "./config.js";

/** The serve protocol version this client speaks. */
export const PROTOCOL_VERSION = 1;

/** How often a call is sent in all when children die under it. */
const MAX_ATTEMPTS = 3;
/** Exits within `CRASH_WINDOW_MS` that mean the child cannot run. */
const CRASH_LIMIT = 3;
const CRASH_WINDOW_MS = 10_000;
/** How much of the child's stderr is kept for error messages. */
const STDERR_TAIL_BYTES = 4096;

/** An error reply of `serve`, typed as the protocol types it. */
export class ServeError extends Error {
  constructor(
    readonly source: "provider" | "host" | "protocol" | "plugin",
    readonly kind: string,
    message: string,
    readonly retryable: boolean,
    readonly path?: string,
  ) {
    super(message);
    this.name = "ServeError";
  }
}

interface Pending {
  method: string;
  params: unknown;
  attempts: number;
  resolve: (value: unknown) => void;
  reject: (error: Error) => void;
}

/** One child process: its pipes and the calls sent to it. */
interface Child {
  process: ChildProcessWithoutNullStreams;
  ready: Promise<void>;
}

/** A `sandbox-host serve` child for one set of host settings. */
export class ServeClient {
  private child?: Child;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private exits: number[] = [];
  private stderrTail = "";
  private readonly secretDir: string;
  private closed = false;
  /** How many times a child was started. */
  starts = 0;

  constructor(private readonly settings: HostSettings) {
    // The kubeconfig is a secret: it goes to a file only this user can read, never on a
    // command line or into a log.
    this.secretDir = mkdtempSync(join(tmpdir(), "sandbox-host-"));
  }

  /** The running child's pid, if one runs. */
  pid(): number | undefined {
    return this.child?.process.pid;
  }

  /** Sends one request; resolves with its result, rejects with a `ServeError`. */
  call(method: string, params?: unknown): Promise<unknown> {
    if (this.closed) {
      return Promise.reject(new ServeError("plugin", "closed", "the plugin is shutting down; retry on a running worker", true));
    }
    return new Promise((resolve, reject) => {
      const id = this.nextId++;
      this.pending.set(id, { method, params, attempts: 0, resolve, reject });
      this.send(id);
    });
  }

  /** Ends the child: end of input lets its calls finish; it is killed if it lingers. */
  async close(graceMs = 35_000): Promise<void> {
    this.closed = true;
    const child = this.child;
    if (child) {
      const exited = new Promise<void>((done) => child.process.once("exit", () => done()));
      child.process.stdin.end();
      const timer = setTimeout(() => child.process.kill("SIGKILL"), graceMs);
      await exited;
      clearTimeout(timer);
    }
    rmSync(this.secretDir, { recursive: true, force: true });
  }

  private send(id: number): void {
    const pending = this.pending.get(id);
    if (!pending) return;
    pending.attempts += 1;
    let child: Child;
    try {
      child = this.running();
    } catch (e) {
      this.pending.delete(id);
      pending.reject(e as Error);
      return;
    }
    child.ready.then(
      () => {
        const line = JSON.stringify(pending.params === undefined ? { id, method: pending.method } : { id, method: pending.method, params: pending.params });
        child.process.stdin.write(`${line}\n`);
      },
      (e: Error) => {
        this.pending.delete(id);
        pending.reject(e);
      },
    );
  }

  /** The running child, started if none runs. */
  private running(): Child {
    if (this.child) return this.child;
    const now = Date.now();
    this.exits = this.exits.filter((t) => now - t < CRASH_WINDOW_MS);
    if (this.exits.length >= CRASH_LIMIT) {
      throw new ServeError(
        "plugin",
        "host-unavailable",
        `sandbox-host serve exited ${this.exits.length} times in ${CRASH_WINDOW_MS / 1000} s; its last words: ${this.stderrTail.trim() || "(none)"}`,
        true,
      );
    }
    const process = spawn(this.settings.binary, this.args(), { stdio: ["pipe", "pipe", "pipe"] });
    this.starts += 1;
    const child: Child = { process, ready: Promise.resolve() };
    this.child = child;
    process.stderr.setEncoding("utf8");
    process.stderr.on("data", (chunk: string) => {
      this.stderrTail = (this.stderrTail + chunk).slice(-STDERR_TAIL_BYTES);
    });
    process.stdin.on("error", () => {
      // A write to a child that died; its exit handler sends the calls again.
    });
    const lines = createInterface({ input: process.stdout, crlfDelay: Infinity });
    lines.on("line", (line) => this.reply(line));
    let started: (() => void) | undefined;
    let failed: ((e: Error) => void) | undefined;
    const spawned = new Promise<void>((resolve, reject) => {
      started = resolve;
      failed = reject;
    });
    process.once("spawn", () => started?.());
    process.once("error", (e) => {
      failed?.(
        new ServeError(
          "plugin",
          "host-unavailable",
          `cannot start sandbox-host at ${this.settings.binary} (${e.message}); set sandboxHostBinary in the plugin's config or SANDBOX_HOST_BIN`,
          false,
        ),
      );
    });
    process.once("exit", (code, signal) => this.exited(child, code, signal));
    child.ready = spawned;
    return child;
  }

  private args(): string[] {
    const s = this.settings;
    const args = ["serve", "--component", s.component, "--cache-dir", s.cacheDir];
    for (const ns of s.namespaces) args.push("--namespace", ns);
    if (s.ownerId) args.push("--owner-id", s.ownerId);
    if (s.limitsFile) args.push("--limits", s.limitsFile);
    if (s.kubeconfig !== undefined) {
      const path = join(this.secretDir, "kubeconfig");
      writeFileSync(path, s.kubeconfig, { mode: 0o600 });
      args.push("--kubeconfig", path);
    }
    return args;
  }

  private reply(line: string): void {
    let message: { id?: unknown; result?: unknown; error?: Record<string, unknown> };
    try {
      message = JSON.parse(line);
    } catch {
      return;
    }
    if (typeof message.id !== "number") return;
    const pending = this.pending.get(message.id);
    if (!pending) return;
    this.pending.delete(message.id);
    if (message.error) {
      const e = message.error;
      pending.reject(
        new ServeError(
          (e.source as ServeError["source"]) ?? "host",
          String(e.kind ?? "unknown"),
          String(e.message ?? "no message"),
          e.retryable === true,
          typeof e.path === "string" ? e.path : undefined,
        ),
      );
    } else {
      pending.resolve(message.result ?? null);
    }
  }

  /** A child ended: its calls go to the next one, unless they were sent too often. */
  private exited(child: Child, code: number | null, signal: NodeJS.Signals | null): void {
    if (this.child !== child) return;
    this.child = undefined;
    this.exits.push(Date.now());
    if (this.closed) return;
    const why = signal ? `signal ${signal}` : `exit code ${code}`;
    for (const [id, pending] of [...this.pending]) {
      if (pending.attempts >= MAX_ATTEMPTS) {
        this.pending.delete(id);
        pending.reject(
          new ServeError(
            "plugin",
            "host-unavailable",
            `sandbox-host serve ended (${why}) ${pending.attempts} times during ${pending.method}; its last words: ${this.stderrTail.trim() || "(none)"}`,
            true,
          ),
        );
      } else {
        this.send(id);
      }
    }
  }
}
