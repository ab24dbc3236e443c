/**
 * What the real node does beyond serving a push (test/e2e/push-to-serve.test.ts), all from one first
 * commit whose builds run in parallel: a crash-looping revision while the old pod serves, tenant code
 * looking for the build's and the pod's credentials, a cron Trigger's CronJob calling its function by
 * Service name (CoreDNS on the host, a curl image built from Debian's curl), a Go function built with
 * the Go toolchain the module proxy serves, a function's logs read and followed through the API, and
 * an SSE answer and a WebSocket through /fn/ from the pod (the socket drained by a rollout).
 * Needs root (see test/cluster/node.ts).
 */

import { WebSocket } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FunctionStatus, SlessFunction } from '../../src/core/resources.js';
import { LABEL_COMPONENT, LABEL_FUNCTION, LABEL_TRIGGER } from '../../src/platform/kube/labels.js';
import { type KubeObject, listObjects } from '../../src/platform/kube/objects.js';
import { readPodLog } from '../../src/platform/kube/pod-log.js';
import { POD } from '../../src/platform/kube/resource-types.js';
import { functionManifest } from '../helpers/git.js';
import { openStream } from '../helpers/stream-reader.js';
import { vendoredWs } from '../helpers/vendored-ws.js';
import { eventually } from '../kube/harness.js';
import { callFunction, type E2eEnv, servedBody as servedBodyOf, startE2e } from './harness.ts';

const BUILD_MS = 10 * 60_000;
/** The controller gives a revision this long to become available (SLESS_ROLLOUT_DEADLINE). */
const ROLLOUT_DEADLINE_S = 30;
/** The live function's timeoutSec: its pods' grace period is the preStop sleep (5 s) + this + 5 s. */
const LIVE_TIMEOUT_S = 5;
const LIVE_GRACE_S = 5 + LIVE_TIMEOUT_S + 5;

/** Reads what the process can see of credentials; the same file runs at build time and at run time. */
const SNAPSHOT_JS = `const fs = require('fs');
const read = (p) => { try { return fs.readFileSync(p, 'utf8'); } catch (e) { return 'unreadable: ' + e.code; } };
const list = (p) => { try { return fs.readdirSync(p, { recursive: true }); } catch (e) { return 'unreadable: ' + e.code; } };
function snapshot(where) {
  const environs = {};
  for (const pid of fs.readdirSync('/proc').filter((d) => /^[0-9]+$/.test(d)))
    environs[pid] = read('/proc/' + pid + '/environ').split('\\0').filter(Boolean);
  return {
    marker: 'sless-e2e-snapshot-' + where,
    uid: process.getuid(),
    env: { ...process.env },
    environs,
    token: read('/var/run/secrets/kubernetes.io/serviceaccount/token'),
    secretsDir: list('/var/run/secrets'),
    dockerConfig: read('/kaniko/.docker/config.json'),
    aws: Object.keys(process.env).filter((k) => k.startsWith('AWS_')),
  };
}
module.exports = { snapshot };
if (require.main === module)
  fs.writeFileSync(__dirname + '/build-snapshot.json', JSON.stringify(snapshot(process.argv[2])));
`;

/** Records the calls its cron Trigger makes, and prints what it is asked to say (for the logs API). */
const TALK_JS = `const calls = [];
exports.handle = async (event) => {
  const trigger = event.headers['x-sless-trigger'];
  if (event.method === 'POST' && trigger) {
    const body = typeof event.body === 'string' ? event.body : JSON.stringify(event.body);
    calls.push({ trigger, body });
    console.log('cron call from ' + trigger + ': ' + body);
    return 'recorded call ' + calls.length;
  }
  if (event.path === '/calls') return calls;
  if (event.path === '/say') {
    console.log('said ' + event.query.word);
    return 'said';
  }
  return 'talk v1';
};
`;

/**
 * Streams and WebSockets on the node: `/events` sends a first event, then waits for `/release` (from
 * any client) before its last; `upgrade` echoes what it is sent, after a greeting that names the
 * revision's WORD, so a test knows which revision holds a connection.
 */
const LIVE_JS = `const { WebSocketServer } = require('ws');
const wss = new WebSocketServer({ noServer: true });
let release;
let released = new Promise((resolve) => { release = resolve; });
async function* events(signal) {
  yield 'data: first\\n\\n';
  await Promise.race([released, new Promise((resolve) => signal.addEventListener('abort', resolve))]);
  yield 'data: last\\n\\n';
}
exports.handle = async (event, context) => {
  if (event.path === '/events')
    return { statusCode: 200, headers: { 'content-type': 'text/event-stream' }, body: events(context.signal) };
  if (event.path === '/release') {
    release();
    released = new Promise((resolve) => { release = resolve; });
    return 'released';
  }
  return 'live ' + process.env.WORD;
};
exports.upgrade = (req, socket, head) => {
  wss.handleUpgrade(req, socket, head, (ws) => {
    ws.send('hello from ' + process.env.WORD);
    ws.on('message', (data) => ws.send(String(data)));
  });
};
`;

interface Snapshot {
  marker: string;
  uid: number;
  env: Record<string, string>;
  environs: Record<string, string[]>;
  token: string;
  secretsDir: string | string[];
  dockerConfig: string;
  aws: string[];
}

interface LogLine {
  time: string;
  instance: string;
  stream: string;
  line: string;
}

describe('e2e on a real node: crash loop, credentials, cron, Go, logs, streams', () => {
  let env: E2eEnv;

  const status = async (name: string) =>
    ((await env.system.store.get('Function', env.ns, name)) as SlessFunction | undefined)?.status as
      | FunctionStatus
      | undefined;
  const pods = async (labels: Record<string, string>) =>
    (await listObjects<KubeObject>(env.http, POD, { namespace: env.ns, labels })).items;
  const servedBody = (name: string, expected: string, path = '') =>
    servedBodyOf(env, name, expected, BUILD_MS, path);
  const logsUrl = (name: string, query: string) =>
    `${env.system.url}/v1/namespaces/${env.ns}/functions/${name}/logs?${query}`;

  beforeAll(async () => {
    env = await startE2e(
      'e2e-nb',
      {
        // Exits at start-up when its revision says so (the second commit's only change).
        'crashy/function.yaml': functionManifest('crashy', { env: { EXIT_AT_START: 'no' } }),
        'crashy/handler.js': `if (process.env.EXIT_AT_START === 'yes') { console.error('crashy: exiting at start-up'); process.exit(3); }
exports.handle = async () => 'crashy v1';
`,
        'creds/function.yaml': functionManifest('creds'),
        'creds/package.json': JSON.stringify({
          name: 'creds',
          version: '1.0.0',
          // Runs in the build Job's install container, where the tenant's dependency install runs.
          scripts: { preinstall: 'node snapshot.js build' },
        }),
        'creds/snapshot.js': SNAPSHOT_JS,
        'creds/handler.js': `const { snapshot } = require('./snapshot.js');
const build = JSON.parse(require('fs').readFileSync(__dirname + '/build-snapshot.json', 'utf8'));
exports.handle = async () => ({ build, run: snapshot('run') });
`,
        'talk/function.yaml': functionManifest('talk'),
        'talk/handler.js': TALK_JS,
        'talk/trigger.yaml':
          'apiVersion: sless.dev/v1alpha1\nkind: Trigger\nmetadata:\n  name: every-minute\nspec:\n  type: cron\n  function: talk\n  schedule: "* * * * *"\n  event: {tick: 1}\n',
        'live/function.yaml': functionManifest('live', { env: { WORD: 'one' }, timeoutSec: LIVE_TIMEOUT_S }),
        'live/handler.js': LIVE_JS,
        ...vendoredWs('live'),
        'gofn/function.yaml': functionManifest('gofn', { runtime: 'go1.21', entrypoint: 'handler.Handle' }),
        'gofn/handler.go': `package handler

import (
	"context"
	"runtime"

	sless "sless.dev/runtime"
)

func Handle(ctx context.Context, event sless.Event) (any, error) {
	return map[string]any{"message": "hello from go", "go": runtime.Version()}, nil
}
`,
      },
      { extras: true, env: { SLESS_ROLLOUT_DEADLINE: `${ROLLOUT_DEADLINE_S}s` } },
    );
    // Includes the wait for the machine-wide node lock, which other runs on the machine may hold.
  }, 60 * 60_000);

  afterAll(async () => {
    await env?.close();
  }, 300_000);

  it(
    'a crash-looping revision: the old pod serves throughout, the Function is RolloutFailed (not Ready) naming the pod reason; a fix makes it Ready',
    async () => {
      await servedBody('crashy', 'crashy v1');
      const before = await status('crashy');
      const served = before?.servingRevision;
      expect(served).toBeDefined();
      expect(before?.servingCommit).toMatch(/^[0-9a-f]{40}$/);
      const crashing = await env.commit({
        'crashy/function.yaml': functionManifest('crashy', { env: { EXIT_AT_START: 'yes' } }),
      });
      // Requests through /fn/ from the commit until the fixed revision serves.
      const answers: string[] = [];
      let done = false;
      const load = (async () => {
        while (!done) {
          const [code, body] = await callFunction(env, 'crashy').catch((e: Error) => [0, e.message] as const);
          answers.push(`${code} ${body}`);
          await new Promise((r) => setTimeout(r, 250));
        }
      })();
      try {
        const failed = await eventually(
          'crashy RolloutFailed',
          async () => {
            const s = await status('crashy');
            const ready = s?.conditions?.find((c) => c.type === 'Ready');
            return s && ready?.reason === 'RolloutFailed' ? { s, ready } : undefined;
          },
          ROLLOUT_DEADLINE_S * 1000 + 120_000,
        );
        const duringFailure = answers.length;
        // Not Ready: the revision the Function asks for does not serve; the old one still does.
        expect(failed.ready.status).toBe('False');
        expect(failed.s.phase).toBe('Failed');
        expect(failed.s.commit).toBe(crashing);
        expect(failed.s.servingCommit).toBe(before?.servingCommit);
        expect(failed.s.servingRevision).toBe(served);
        expect(failed.ready.message).toContain(`still serving ${served}`);
        expect(failed.ready.message).toContain(`not available after ${ROLLOUT_DEADLINE_S}s`);
        // The kubelet's own words for the new pod: it keeps exiting with the handler's code.
        expect(failed.ready.message).toMatch(
          /pod crashy-[a-z0-9]+-[a-z0-9]+: (CrashLoopBackOff: back-off \S+ restarting failed container.*\(last exit: Error, code 3\)|Error \(exit code 3\)|restarted \d+ times \(last exit: Error, code 3\))/,
        );
        const crashPods = (await pods({ [LABEL_FUNCTION]: 'crashy', [LABEL_COMPONENT]: 'function' })).filter(
          (p) =>
            ((p.status as { containerStatuses?: { restartCount?: number }[] }).containerStatuses?.[0]
              ?.restartCount ?? 0) > 0,
        );
        expect(crashPods).toHaveLength(1);
        // Served while the Function said it was not Ready: the old body, after the failure too.
        await eventually('answers after the failure', async () => answers.length > duringFailure + 2);

        // The fix (a new revision of the same build): Ready again, at the fixed commit.
        const fix = await env.commit({
          'crashy/function.yaml': functionManifest('crashy', { env: { EXIT_AT_START: 'no', FIXED: 'yes' } }),
        });
        const fixed = await eventually(
          'crashy Ready at the fix',
          async () => {
            const s = await status('crashy');
            const ready = s?.conditions?.find((c) => c.type === 'Ready');
            return s?.commit === fix && ready?.status === 'True' ? { s, ready } : undefined;
          },
          ROLLOUT_DEADLINE_S * 1000 + 120_000,
        );
        expect(fixed.s.phase).toBe('Ready');
        expect(fixed.ready.reason).toBe('Serving');
        expect(fixed.s.servingRevision).not.toBe(served);
        // The same build: only the env changed, so the image built at the first commit serves on.
        expect(fixed.s.servingCommit).toBe(before?.servingCommit);
        const afterFix = answers.length;
        await eventually('answers after the fix', async () => answers.length > afterFix + 2);
      } finally {
        done = true;
        await load;
      }
      expect(answers.length).toBeGreaterThan(10);
      // The runtime answers a returned string as JSON. Every answer, from the crashing commit through
      // the fix: the same body, never an error.
      expect(answers.filter((a) => a !== '200 "crashy v1"')).toEqual([]);
    },
    BUILD_MS + 300_000,
  );

  it(
    "tenant code in the build's install step and in the pod finds none of the controller's secrets and no token",
    async () => {
      const body = await servedBody('creds', 'sless-e2e-snapshot-run');
      const { build, run } = JSON.parse(body) as { build: Snapshot; run: Snapshot };
      // Positive signal: the preinstall ran in the install container (its uid and its presigned URL).
      expect(build.marker).toBe('sless-e2e-snapshot-build');
      expect(build.uid).toBe(10001);
      const contextUrl = build.env.SLESS_CONTEXT_URL ?? '';
      expect(contextUrl).toMatch(/^http:\/\/.*X-Amz-Signature=/);
      expect(Object.keys(build.environs).length).toBeGreaterThan(0);
      expect(run.marker).toBe('sless-e2e-snapshot-run');
      expect(run.env.PORT).toBe('8080');

      for (const snap of [build, run]) {
        expect(snap.aws).toEqual([]);
        expect(snap.token).toBe('unreadable: ENOENT');
        expect(snap.secretsDir).toBe('unreadable: ENOENT');
        expect(snap.dockerConfig).toBe('unreadable: ENOENT');
      }
      // The presigned URL names the access key id (never the secret) by design: it may appear there only.
      const text = body.split(JSON.stringify(contextUrl).slice(1, -1)).join('<context url>');
      const { s3AccessKeyId, s3SecretAccessKey, pushPassword, pushAuth } = env.secrets;
      for (const secret of [s3AccessKeyId, s3SecretAccessKey, pushPassword, pushAuth])
        expect(text.includes(secret), `a secret of the controller namespace leaked: ${secret}`).toBe(false);
      expect(text).not.toMatch(/eyJ[A-Za-z0-9_-]{8,}\.eyJ/);
    },
    BUILD_MS,
  );

  it(
    "a cron Trigger's CronJob really fires and calls the function by its Service name",
    async () => {
      const calls = await eventually(
        'a cron call recorded by talk',
        async () => {
          const [code, body] = await callFunction(env, 'talk', '/calls');
          if (code !== 200) return undefined;
          const list = JSON.parse(body) as { trigger: string; body: string }[];
          return list.length > 0 ? list : undefined;
        },
        BUILD_MS,
      );
      expect(calls[0]).toEqual({ trigger: 'every-minute', body: '{"tick":1}' });
      // The call came from the CronJob's pod (curl prints the handler's answer), pulled through the mirror.
      // The handler records the call before curl prints its answer, and the kubelet serves the log
      // only once it has it; a later run's pod may be the one listed meanwhile (one run is kept).
      const runPods = await eventually(
        "a run's log holding the handler's answer",
        async () => {
          const listed = await pods({ [LABEL_TRIGGER]: 'every-minute' });
          const logs = await Promise.all(
            listed.map((p) => readPodLog(env.http, env.ns, p.metadata.name, 'invoke', 20).catch(() => '')),
          );
          return logs.some((l) => l.includes('recorded call')) ? listed : undefined;
        },
        90_000,
      );
      const images = runPods.map(
        (p) => (p.spec as { containers: { image: string }[] }).containers[0]?.image ?? '',
      );
      expect(new Set(images)).toEqual(new Set([`${env.node.registryHost}/curlimages/curl:8.10.1`]));
    },
    BUILD_MS,
  );

  it(
    'a Go function built with the go1.21 toolchain serves through /fn/',
    async () => {
      const body = await servedBody('gofn', 'hello from go');
      expect(JSON.parse(body)).toEqual({ message: 'hello from go', go: 'go1.21.13' });
    },
    BUILD_MS * 2,
  );

  it(
    'an SSE answer streams through /fn/ from the pod: the first event arrives while the handler still waits',
    async () => {
      await servedBody('live', 'live one');
      const stream = await openStream(`${env.system.url}/fn/${env.ns}/live/events`);
      expect(stream.status).toBe(200);
      expect(stream.headers['content-type']).toBe('text/event-stream');
      await stream.until('data: first');
      // The handler is still waiting for the release: nothing beyond the first event has come, and
      // the answer is open.
      expect(stream.received()).toBe('data: first\n\n');
      expect(stream.isOver()).toBe(false);
      expect(await callFunction(env, 'live', '/release')).toEqual([200, '"released"']);
      expect(await stream.ended()).toBe('data: first\n\ndata: last\n\n');
    },
    BUILD_MS,
  );

  it(
    'a WebSocket through /fn/ echoes from the pod, and a rollout while it is open drains it within the grace period',
    async () => {
      await servedBody('live', 'live one');
      const wsUrl = `${env.system.url.replace(/^http/, 'ws')}/fn/${env.ns}/live/socket`;
      const open = (url: string) => {
        const socket = new WebSocket(url);
        const messages: string[] = [];
        const waiters: (() => void)[] = [];
        socket.addEventListener('message', (event) => {
          messages.push(String(event.data));
          for (const wake of waiters.splice(0)) wake();
        });
        const closed = new Promise<number>((resolve) =>
          socket.addEventListener('close', (event) => {
            resolve(event.code);
            for (const wake of waiters.splice(0)) wake();
          }),
        );
        const next = async (count: number): Promise<string> => {
          while (messages.length < count) {
            if (socket.readyState === WebSocket.CLOSED)
              throw new Error(`closed after ${messages.join(', ')}`);
            await new Promise<void>((wake) => waiters.push(wake));
          }
          return messages[count - 1] as string;
        };
        return { socket, messages, closed, next };
      };
      const old = open(wsUrl);
      expect(await old.next(1)).toBe('hello from one');
      old.socket.send('ping 1');
      expect(await old.next(2)).toBe('ping 1');
      const [oldPod] = (await pods({ [LABEL_FUNCTION]: 'live', [LABEL_COMPONENT]: 'function' })).map(
        (p) => p.metadata.name,
      );

      // An env-only commit: a new revision, rolled out without a build, while the socket is open.
      await env.commit({
        'live/function.yaml': functionManifest('live', { env: { WORD: 'two' }, timeoutSec: LIVE_TIMEOUT_S }),
      });
      await servedBody('live', 'live two');
      // Until the new pod's endpoint is known, /fn/ goes to the Service, which may pick either pod:
      // a new socket must go to the new revision, so it waits for the route to name its endpoints.
      await eventually("the route at the new revision's endpoints", async () => {
        const found = env.system.routes.cached(env.ns, 'live');
        return found.kind === 'ready' && (found.route.endpoints?.length ?? 0) > 0;
      });
      // The old pod drains: the open connection still echoes after /fn/ moved to the new revision.
      old.socket.send('ping 2');
      expect(await old.next(3)).toBe('ping 2');
      const fresh = open(wsUrl);
      expect(await fresh.next(1)).toBe('hello from two');
      // It is closed by the time the old pod's grace period is over, and the old pod is gone with it.
      let graceTimer: NodeJS.Timeout | undefined;
      const graceOver = new Promise((_, fail) => {
        graceTimer = setTimeout(
          () => fail(new Error(`the old socket was open ${LIVE_GRACE_S + 10} s after the rollout`)),
          (LIVE_GRACE_S + 10) * 1000,
        );
      });
      await Promise.race([old.closed, graceOver]).finally(() => clearTimeout(graceTimer));
      await eventually('the old pod gone', async () =>
        (await pods({ [LABEL_FUNCTION]: 'live', [LABEL_COMPONENT]: 'function' })).some(
          (p) => p.metadata.name === oldPod,
        )
          ? undefined
          : true,
      );
      // The new revision's socket was not touched by the old one's end.
      fresh.socket.send('ping 3');
      expect(await fresh.next(2)).toBe('ping 3');
      expect(old.messages).toEqual(['hello from one', 'ping 1', 'ping 2']);
      fresh.socket.close();
      await fresh.closed;
    },
    BUILD_MS,
  );

  it(
    "the logs API returns the container's output tagged with the pod name, and follow streams a new line",
    async () => {
      await servedBody('talk', 'said', '/say?word=before');
      const [pod] = (await pods({ [LABEL_FUNCTION]: 'talk', [LABEL_COMPONENT]: 'function' })).map(
        (p) => p.metadata.name,
      );
      expect(pod).toMatch(/^talk-/);
      const tail = await eventually('the said line in the log', async () => {
        const res = await fetch(logsUrl('talk', 'tail=50'));
        expect(res.status).toBe(200);
        const lines = (await res.text())
          .split('\n')
          .filter(Boolean)
          .map((l) => JSON.parse(l) as LogLine);
        return lines.some((l) => l.line === 'said before') ? lines : undefined;
      });
      expect(tail.find((l) => l.line === 'said before')).toMatchObject({ instance: pod, stream: 'output' });
      expect(tail.some((l) => l.line.startsWith('sless-runtime: '))).toBe(true);

      const stop = new AbortController();
      const res = await fetch(logsUrl('talk', 'follow=true&tail=0'), { signal: stop.signal });
      expect(res.status).toBe(200);
      const word = `after-${Date.now()}`;
      const reader = res.body?.pipeThrough(new TextDecoderStream()).getReader();
      if (!reader) throw new Error('no body');
      // The stream is open before the line exists; the handler is asked until the line arrives (the
      // pod's log stream may attach a moment after the response started).
      let asking = true;
      const ask = (async () => {
        while (asking) {
          await callFunction(env, 'talk', `/say?word=${word}`).catch(() => undefined);
          await new Promise((r) => setTimeout(r, 1000));
        }
      })();
      let buffered = '';
      let found: LogLine | undefined;
      const deadline = setTimeout(() => stop.abort(), 60_000);
      try {
        while (!found) {
          const { value, done } = await reader.read();
          if (done) break;
          buffered += value;
          const lines = buffered.split('\n');
          buffered = lines.pop() ?? '';
          found = lines
            .filter(Boolean)
            .map((l) => JSON.parse(l) as LogLine)
            .find((l) => l.line === `said ${word}`);
        }
      } finally {
        clearTimeout(deadline);
        asking = false;
        stop.abort();
        await ask;
      }
      expect(found).toMatchObject({ instance: pod, stream: 'output', line: `said ${word}` });
    },
    BUILD_MS,
  );
});
