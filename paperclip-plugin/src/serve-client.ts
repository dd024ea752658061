// A `sandbox-host serve` child process and its JSON-lines protocol (documented in the host's
// README): requests written as they come, replies matched by id, in any order.
//
// The child is started on first use and started again when it dies; each child is greeted
// with `hello` before any call reaches it (its protocol version and limits). The lease calls
// are idempotent (acquire on its acquisition id; resume-check, renew, release, destroy on the
// lease), so a call in flight when the child died is sent again to the new one: a lease is
// never lost to a crash of the host, and a killed acquire adopts what it had made. `execute`
// is not: a command the dead child had been sent may have run, so it fails instead of running
// twice (one still waiting for its child to start is sent to the next). A child that keeps
// dying (three exits within ten seconds) fails calls instead. A request the child answers
// `busy` (it queues no more commands for that lease) was never taken, so it is sent again
// after a pause, commands included, for up to two minutes.
//
// Secrets: the kubeconfig reaches the child as a file only the worker's user can read, which
// lives from just before the child starts until it has read it (its `hello` answer, or its
// end), never on the command line; it is marked untrusted, so the host refuses anything in it
// that would run a program or read the host's files, and quotes none of it. The child's stderr
// (its log) is never put in an error: only its final `Error:` line, which the host keeps free
// of values.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import type { Readable, Writable } from "node:stream";

import type { HostSettings } from "./config.js";

/** The serve protocol version this client speaks. */
export const PROTOCOL_VERSION = 1;

/** How often a call is sent in all when children die under it. */
const MAX_ATTEMPTS = 3;
/** Exits within `CRASH_WINDOW_MS` that mean the child cannot run. */
const CRASH_LIMIT = 3;
const CRASH_WINDOW_MS = 10_000;
/** The id of the greeting each child gets; calls count from 1. */
const HELLO_ID = 0;
/** How long a request answered `busy` is sent again, and the pauses between (doubling). */
const BUSY_RETRY_MS = 120_000;
const BUSY_PAUSE_MS = 100;
const BUSY_MAX_PAUSE_MS = 2_000;

/** How long a child may take to load the component and answer `hello`. */
const HELLO_TIMEOUT_MS = 60_000;
/** The longest delay `setTimeout` keeps (a longer one fires at once). */
const MAX_TIMER_MS = 0x7fff_ffff;
/** The longest final error line of a child that an error message carries. */
const ERROR_LINE_CHARS = 400;
/** `sandbox-host`'s exit code for a kubeconfig it cannot use: a wrong config, not a crash. */
const EXIT_BAD_KUBECONFIG = 4;

/** An error reply of `serve`, or the plugin's own failure around it, typed. */
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

/** How one call is sent. */
export interface CallOptions {
  /**
   * How long the call may run past the host's call deadline, added to the time the client
   * waits for its answer: an execute's own timeout (`Infinity` for none: the host's
   * `exec-timeout-ms`, which caps every command's, is used).
   */
  extraMs?: number;
  /**
   * Whether the call may be sent again to the next child when the one it was written to dies
   * (default true). False for a call with effects that may already have happened (a command).
   */
  idempotent?: boolean;
}

interface Pending {
  method: string;
  line: string;
  attempts: number;
  extraMs: number;
  idempotent: boolean;
  /** When sandbox-host first answered `busy` to it, and how often since. */
  busySince?: number;
  busyRetries?: number;
  /** Whether the line was written to the child it was last sent to. */
  written: boolean;
  /** The child the call was last sent to. */
  child?: Child;
  timer?: NodeJS.Timeout;
  resolve: (value: unknown) => void;
  reject: (error: Error) => void;
}

/** What `hello` told about a child's limits. */
interface Limits {
  maxLineBytes: number;
  callTimeoutMs: number;
  /** The longest command the host lets an execute run (`exec-timeout-ms`). */
  execTimeoutMs: number;
  maxConcurrentCalls: number;
}

/** One child process: its pipes, its greeting, and whether its end was handled. */
interface Child {
  process: ChildProcess;
  stdin: Writable;
  ready: Promise<Limits>;
  greeted?: (limits: Limits) => void;
  failed?: (e: Error) => void;
  lastError?: string;
  /** Why it never started (ENOENT, EACCES) or refused its settings, when it did. */
  spawnError?: ServeError;
  /** The kubeconfig file it reads at start, removed once it has. */
  kubeconfigFile?: string;
  ended: boolean;
}

/** A `sandbox-host serve` child for one set of host settings. */
export class ServeClient {
  private child?: Child;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private exits: number[] = [];
  private closed = false;
  private lastUsed = Date.now();
  /** How many times a child was started. */
  starts = 0;
  /** The provider's config schema, read once (`describe`). */
  private schema?: Promise<unknown>;

  constructor(private readonly settings: HostSettings) {}

  /** What the process is for (validation, or a company's calls). */
  get purpose(): HostSettings["purpose"] {
    return this.settings.purpose;
  }

  /** The running child's pid, if one runs. */
  pid(): number | undefined {
    return this.child?.process.pid;
  }

  /** Milliseconds since the last call ended, or 0 while calls are in flight. */
  idleMillis(): number {
    return this.pending.size > 0 ? 0 : Date.now() - this.lastUsed;
  }

  /** Sends one request; resolves with its result, rejects with a `ServeError`. */
  call(method: string, params?: unknown, options: CallOptions = {}): Promise<unknown> {
    if (this.closed) {
      return Promise.reject(new ServeError("plugin", "closed", "the plugin is shutting down; retry on a running worker", true));
    }
    this.lastUsed = Date.now();
    return new Promise((resolve, reject) => {
      const id = this.nextId++;
      const line = JSON.stringify(params === undefined ? { id, method } : { id, method, params });
      const extraMs = Math.max(0, Math.ceil(options.extraMs ?? 0));
      const idempotent = options.idempotent ?? true;
      this.pending.set(id, { method, line, attempts: 0, extraMs, idempotent, written: false, resolve, reject });
      this.send(id);
    });
  }

  /** The provider's config schema (JSON Schema), as its `describe` gives it; null when it has none. */
  configSchema(): Promise<unknown> {
    if (!this.schema) {
      const schema = this.call("describe").then((info) => {
        const text = (info as Record<string, unknown> | null)?.["config-schema"];
        return typeof text === "string" && text !== "" ? (JSON.parse(text) as unknown) : null;
      });
      // A failed describe is asked again by the next call.
      schema.catch(() => {
        if (this.schema === schema) this.schema = undefined;
      });
      this.schema = schema;
    }
    return this.schema;
  }

  /** Ends the child: end of input lets its calls finish; it is killed if it lingers. */
  async close(graceMs = 8_000): Promise<void> {
    this.closed = true;
    const child = this.child;
    if (child && !child.ended) {
      const ended = new Promise<void>((done) => child.process.once("close", () => done()));
      child.stdin.end();
      const timer = setTimeout(() => child.process.kill("SIGKILL"), graceMs);
      await Promise.race([ended, new Promise((r) => setTimeout(r, graceMs + 2_000))]);
      clearTimeout(timer);
    }
    this.failAll(new ServeError("plugin", "closed", "the plugin shut down before the call answered; retry it", true));
  }

  private settle(id: number): Pending | undefined {
    const pending = this.pending.get(id);
    if (!pending) return undefined;
    this.pending.delete(id);
    clearTimeout(pending.timer);
    this.lastUsed = Date.now();
    return pending;
  }

  private failAll(error: Error): void {
    for (const id of [...this.pending.keys()]) this.settle(id)?.reject(error);
  }

  private send(id: number): void {
    const pending = this.pending.get(id);
    if (!pending) return;
    pending.attempts += 1;
    pending.written = false;
    let child: Child;
    try {
      child = this.running();
    } catch (e) {
      this.settle(id)?.reject(e as Error);
      return;
    }
    pending.child = child;
    child.ready.then(
      (limits) => {
        if (!this.pending.has(id) || pending.child !== child) return;
        if (Buffer.byteLength(pending.line) > limits.maxLineBytes) {
          this.settle(id)?.reject(
            new ServeError(
              "plugin",
              "request-too-large",
              `the ${pending.method} request is ${Buffer.byteLength(pending.line)} bytes; sandbox-host takes at most ${limits.maxLineBytes}: send a smaller ${pending.method === "execute" ? "stdin, env or command" : "config"}`,
              false,
            ),
          );
          return;
        }
        // Every call waits for a slot (at most a few rounds of calls) and then runs within the
        // host's call deadline, an execute for its own timeout on top; past that, the child is
        // not answering.
        const extraMs = Math.min(pending.extraMs, limits.execTimeoutMs);
        const waitMs = Math.min(limits.callTimeoutMs * 5 + 5_000 + extraMs, MAX_TIMER_MS);
        clearTimeout(pending.timer);
        pending.timer = setTimeout(() => {
          this.settle(id)?.reject(
            new ServeError(
              "plugin",
              "no-answer",
              `sandbox-host serve did not answer ${pending.method} within ${waitMs} ms; it may still finish${pending.idempotent ? ": retry" : ""}`,
              pending.idempotent,
            ),
          );
        }, waitMs);
        pending.written = true;
        child.stdin.write(`${pending.line}\n`);
      },
      (e: Error) => {
        // A call sent again to the next child is that child's now.
        if (pending.child === child) this.settle(id)?.reject(e);
      },
    );
  }

  /** The running child, started and greeted if none runs. */
  private running(): Child {
    if (this.child) return this.child;
    const now = Date.now();
    this.exits = this.exits.filter((t) => now - t < CRASH_WINDOW_MS);
    if (this.exits.length >= CRASH_LIMIT) {
      throw new ServeError("plugin", "host-unavailable", `sandbox-host serve exited ${this.exits.length} times in ${CRASH_WINDOW_MS / 1000} s; see the worker's log`, true);
    }
    const env = { ...process.env };
    delete env.RUST_BACKTRACE;
    delete env.RUST_LIB_BACKTRACE;
    let kubeconfigFile: string | undefined;
    if (this.settings.cluster.kind === "kubeconfig") {
      // mkdtemp makes the directory 0700; the file is 0600 inside it.
      kubeconfigFile = join(mkdtempSync(join(tmpdir(), "sandbox-host-")), "kubeconfig");
      writeFileSync(kubeconfigFile, this.settings.cluster.yaml, { mode: 0o600 });
    }
    const process_ = spawn(this.settings.binary, this.args(kubeconfigFile), { stdio: ["pipe", "pipe", "pipe"], env });
    this.starts += 1;
    const child: Child = {
      process: process_,
      stdin: process_.stdin as Writable,
      ready: Promise.resolve({} as Limits),
      ended: false,
      kubeconfigFile,
    };
    child.ready = new Promise<Limits>((resolve, reject) => {
      child.greeted = resolve;
      child.failed = reject;
    });
    // A call waiting on a child that never answers `hello` is failed, not kept forever.
    const helloTimer = setTimeout(
      () => child.failed?.(new ServeError("plugin", "host-unavailable", `sandbox-host serve did not start within ${HELLO_TIMEOUT_MS} ms`, true)),
      HELLO_TIMEOUT_MS,
    );
    const started = () => {
      clearTimeout(helloTimer);
      removeKubeconfig(child);
    };
    child.ready.then(started, started);
    this.child = child;
    process_.on("error", (e) => {
      if (process_.pid === undefined) {
        // It never started (ENOENT, EACCES): no `exit` comes; the next call tries again.
        child.spawnError = new ServeError(
          "plugin",
          "host-unavailable",
          `cannot start sandbox-host at ${this.settings.binary} (${e.message}); reinstall the plugin package, which carries it`,
          false,
        );
        this.ended(child, null, null);
      }
    });
    child.stdin.on("error", () => {
      // A write to a child that died; its end sends the calls again.
    });
    const stdout = process_.stdout as Readable;
    stdout.on("error", () => {});
    createInterface({ input: stdout, crlfDelay: Infinity }).on("line", (line) => this.reply(child, line));
    const stderr = process_.stderr as Readable;
    stderr.setEncoding("utf8");
    stderr.on("error", () => {});
    createInterface({ input: stderr, crlfDelay: Infinity }).on("line", (line) => {
      if (line.startsWith("Error: ")) child.lastError = line.slice(0, ERROR_LINE_CHARS);
    });
    process_.once("close", (code, signal) => this.ended(child, code, signal));
    child.stdin.write(`${JSON.stringify({ id: HELLO_ID, method: "hello" })}\n`);
    return child;
  }

  private args(kubeconfigFile: string | undefined): string[] {
    const s = this.settings;
    const args = ["serve", `--component=${s.component}`, `--cache-dir=${s.cacheDir}`];
    for (const ns of s.namespaces) args.push(`--allow-namespace=${ns}`);
    for (const pool of s.warmPools) args.push(`--warm-pool=${pool}`);
    for (const template of s.claimTemplates) args.push(`--claim-template=${template}`);
    if (s.policyFile) args.push(`--policy=${s.policyFile}`);
    if (s.ownerId) args.push(`--owner-id=${s.ownerId}`);
    if (s.ownershipKeyFile) args.push(`--ownership-key-file=${s.ownershipKeyFile}`);
    if (s.limitsFile) args.push(`--limits=${s.limitsFile}`);
    if (kubeconfigFile !== undefined) args.push("--untrusted-kubeconfig", `--kubeconfig=${kubeconfigFile}`);
    if (s.cluster.kind === "none") args.push("--no-cluster");
    return args;
  }

  private reply(child: Child, line: string): void {
    let message: { id?: unknown; result?: unknown; error?: Record<string, unknown> };
    try {
      message = JSON.parse(line);
    } catch {
      return;
    }
    if (message.id === HELLO_ID) {
      this.greet(child, message);
      return;
    }
    if (typeof message.id !== "number") return;
    if (message.error?.kind === "busy" && this.resendWhenFree(message.id)) return;
    const pending = this.settle(message.id);
    if (!pending) return;
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

  /**
   * A request sandbox-host answered `busy` was never taken (it queues no more commands for the
   * lease, or in all): it is sent again after a growing pause, a command included, for up to
   * BUSY_RETRY_MS; false when that time is up and the caller gets the answer.
   */
  private resendWhenFree(id: number): boolean {
    const pending = this.pending.get(id);
    if (!pending) return false;
    const now = Date.now();
    pending.busySince ??= now;
    if (now - pending.busySince > BUSY_RETRY_MS) return false;
    pending.busyRetries = (pending.busyRetries ?? 0) + 1;
    // Not an attempt, and nothing ran: should the child die meanwhile, it is sent again.
    pending.attempts -= 1;
    pending.written = false;
    const pause = Math.min(BUSY_PAUSE_MS * 2 ** Math.min(pending.busyRetries - 1, 5), BUSY_MAX_PAUSE_MS);
    setTimeout(() => this.send(id), pause);
    return true;
  }

  private greet(child: Child, message: { result?: unknown; error?: unknown }): void {
    const hello = (message.result ?? {}) as Record<string, unknown>;
    if (hello.protocol !== PROTOCOL_VERSION) {
      child.failed?.(
        new ServeError("plugin", "host-unavailable", `sandbox-host serve speaks protocol ${String(hello.protocol)}, this plugin ${PROTOCOL_VERSION}; install matching versions`, false),
      );
      child.stdin.end();
      return;
    }
    const number = (key: string, fallback: number) => (typeof hello[key] === "number" ? (hello[key] as number) : fallback);
    child.greeted?.({
      maxLineBytes: number("max-line-bytes", 1 << 20),
      callTimeoutMs: number("call-timeout-ms", 30_000),
      maxConcurrentCalls: number("max-concurrent-calls", 16),
      execTimeoutMs: number("exec-timeout-ms", 600_000),
    });
  }

  /** A child ended: its calls go to the next one, unless they were sent too often. */
  private ended(child: Child, code: number | null, signal: NodeJS.Signals | null): void {
    if (child.ended) return;
    child.ended = true;
    removeKubeconfig(child);
    const why = signal ? `signal ${signal}` : `exit code ${code}`;
    const last = child.lastError ? `; it said: ${child.lastError}` : "";
    if (this.child === child) this.child = undefined;
    if (code === EXIT_BAD_KUBECONFIG && !child.spawnError) {
      // The environment's kubeconfig is wrong: starting again would refuse it again.
      const said = child.lastError?.replace(/^Error: /, "") ?? "sandbox-host cannot use it";
      child.spawnError = new ServeError("plugin", "invalid-config", said, false, "/kubeconfig");
    }
    if (child.spawnError) {
      // Starting again would fail the same way: every call waiting for it is told why.
      child.failed?.(child.spawnError);
      for (const [id, pending] of [...this.pending]) if (pending.child === child) this.settle(id)?.reject(child.spawnError);
      return;
    }
    child.failed?.(new ServeError("plugin", "host-unavailable", `sandbox-host serve ended (${why}) before it was ready${last}`, true));
    this.exits.push(Date.now());
    if (this.closed) {
      this.failAll(new ServeError("plugin", "closed", "the plugin shut down before the call answered; retry it", true));
      return;
    }
    for (const [id, pending] of [...this.pending]) {
      if (!pending.idempotent && pending.written) {
        this.settle(id)?.reject(
          new ServeError(
            "plugin",
            "host-unavailable",
            `sandbox-host serve ended (${why}) during ${pending.method}; it may have run, so it is not sent again: run it again if that is safe${last}`,
            false,
          ),
        );
      } else if (pending.attempts >= MAX_ATTEMPTS) {
        this.settle(id)?.reject(
          new ServeError("plugin", "host-unavailable", `sandbox-host serve ended (${why}) ${pending.attempts} times during ${pending.method}${last}`, true),
        );
      } else {
        this.send(id);
      }
    }
  }
}

/** Removes a child's kubeconfig file and its private directory, once read or not needed. */
function removeKubeconfig(child: Child): void {
  if (!child.kubeconfigFile) return;
  rmSync(join(child.kubeconfigFile, ".."), { recursive: true, force: true });
  child.kubeconfigFile = undefined;
}
