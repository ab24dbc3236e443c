// A no-change poll of many remote sources: SOURCES (default 100) GitSources over git's smart HTTP
// (`git http-backend`), each polled every 10 s, served by `node bin/sless.js dev`. Once all are
// synced, sless's own CPU time over one minute (MINUTES to change) is measured with the number of
// polls the git server saw. Functions scale to zero (lazy start), so no runtime runs.
// Run: npx tsx bench/poll-sources.ts
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../src/config/config.js';
import { QUOTA_ENV } from '../src/core/quotas.js';
import { freePort } from '../src/platform/local/ports.js';
import { functionManifest, nodeHandler, TestRepo, tempDir } from '../test/helpers/git.js';
import { startGitHttpServer } from '../test/helpers/git-http-server.js';
import { ensureCompiled } from './compiled.ts';
import { cpuSeconds } from './proc-stat.ts';
import { report } from './report.ts';

const SOURCES = Number(process.env.SOURCES ?? 100);
const MINUTES = Number(process.env.MINUTES ?? 1);
const pause = (msecs: number) => new Promise((r) => setTimeout(r, msecs));

ensureCompiled();
const work = await TestRepo.create({
  'hello/function.yaml': functionManifest('hello'),
  'hello/handler.js': nodeHandler(`return 'hello';`),
});
const root = await tempDir('bench-poll-bare');
// One function name per repository: two sources in one namespace may not own the same function.
for (let i = 0; i < SOURCES; i++) {
  await work.commit({ 'hello/function.yaml': functionManifest(`fn-${i}`) });
  execFileSync('git', ['clone', '--quiet', '--bare', work.dir, join(root, `repo-${i}.git`)]);
}
const git = await startGitHttpServer(root);
const stateDir = await tempDir('bench-poll-state');
const port = await freePort();
const sless = spawn(
  process.execPath,
  [
    join(PACKAGE_ROOT, 'bin', 'sless.js'),
    'dev',
    '--repo',
    `${git.url}/repo-0.git`,
    '--interval',
    '10s',
    '--port',
    String(port),
    '--state-dir',
    stateDir,
    '--scale-to-zero-after',
    '5m',
    '--json',
  ],
  {
    stdio: ['ignore', 'ignore', 'inherit'],
    // An operator who serves this many sources from one namespace raises its quota (default 20).
    // The git server listens on loopback, which tenant URLs may reach only by the admin's allowance.
    env: {
      ...process.env,
      SLESS_LOG_LEVEL: 'warn',
      [QUOTA_ENV.maxSources]: String(SOURCES),
      SLESS_OUTBOUND_ALLOW: '127.0.0.1/32',
    },
  },
);
const api = `http://127.0.0.1:${port}/v1/namespaces/default`;
try {
  for (;;) {
    try {
      if ((await fetch(`${api}/sources`)).status === 200) break;
    } catch {}
    if (sless.exitCode !== null) throw new Error(`sless exited with ${sless.exitCode}`);
    await pause(100);
  }
  for (let i = 1; i < SOURCES; i++) {
    const response = await fetch(`${api}/sources`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        name: `repo-${i}`,
        spec: { url: `${git.url}/repo-${i}.git`, branch: 'main', interval: '10s' },
      }),
    });
    if (response.status >= 300)
      throw new Error(`POST source repo-${i}: ${response.status} ${await response.text()}`);
  }
  const deadline = Date.now() + 5 * 60_000;
  for (;;) {
    if (Date.now() > deadline) {
      const list = (await (await fetch(`${api}/sources`)).json()) as { items: { status?: object }[] };
      const unsynced = list.items.filter(
        (s) => !(s.status as { lastSyncedCommit?: string })?.lastSyncedCommit,
      );
      throw new Error(
        `${unsynced.length} sources did not sync within 5 minutes; the first: ${JSON.stringify(unsynced[0]?.status)}`,
      );
    }
    const list = (await (await fetch(`${api}/sources`)).json()) as {
      items: { status?: { lastSyncedCommit?: string } }[];
    };
    if (list.items.length === SOURCES && list.items.every((s) => s.status?.lastSyncedCommit)) break;
    await pause(500);
  }
  await pause(10_000); // one full interval, so every source is in its steady no-change polling
  const pid = sless.pid ?? 0;
  const requestsBefore = git.requests.length;
  const fetchesBefore = git.requests.filter((r) => r.wantsObjects).length;
  const cpuBefore = cpuSeconds(pid);
  const started = performance.now();
  await pause(MINUTES * 60_000);
  const cpu = cpuSeconds(pid) - cpuBefore;
  const minutes = (performance.now() - started) / 60_000;
  const requests = git.requests.length - requestsBefore;
  const fetches = git.requests.filter((r) => r.wantsObjects).length - fetchesBefore;
  const cpuPerMinute = (cpu / minutes) * 1000;
  console.log(
    `${SOURCES} sources, 10 s interval, no change: sless used ${cpuPerMinute.toFixed(0)} ms CPU per minute ` +
      `(${((cpuPerMinute / 60_000) * 100).toFixed(2)}% of one core); the git server saw ${(requests / minutes).toFixed(0)} requests/min, ${fetches} object fetches`,
  );
  report({
    bench: 'poll-sources',
    measure: `${SOURCES} remote sources, 10 s interval, no change: sless CPU per minute`,
    value: `${cpuPerMinute.toFixed(0)} ms`,
    baseline: `${(requests / minutes).toFixed(0)} ref listings/min, ${fetches} fetches`,
    ratio: cpuPerMinute / 60_000,
  });
} finally {
  if (sless.exitCode === null) {
    const exited = once(sless, 'exit');
    sless.kill('SIGTERM');
    await exited;
  }
  await git.close();
  await work.remove();
  await rm(root, { recursive: true, force: true });
  await rm(stateDir, { recursive: true, force: true });
}
