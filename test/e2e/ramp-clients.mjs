// The closed-loop clients of the autoscale ramp (test/e2e/ramp.ts), in a worker thread of their own:
// the controller's /fn/ proxy runs in the test's main thread, and clients sharing its event loop would
// time their requests by its queue. Each client sends one GET, reads the answer, checks it and sends
// the next at once; clients join on the ramp's schedule and all stop when it ends. Plain JavaScript so
// that the worker needs no TypeScript loader. Every time is epoch milliseconds (performance.timeOrigin
// differs between threads).
import { parentPort, workerData } from 'node:worker_threads';

/** @type {{ url: string, expect: string, levels: number[], stepMs: number, holdMs: number, timeoutMs: number }} */
const { url, expect, levels, stepMs, holdMs, timeoutMs } = workerData;
const now = () => performance.timeOrigin + performance.now();
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** [started, ended, status (0: no answer), pod that answered or what was wrong] */
const records = [];
let stopping = false;

async function client() {
  while (!stopping) {
    const started = now();
    let status = 0;
    let what = '';
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
      status = res.status;
      const body = await res.text();
      let pod;
      try {
        const parsed = JSON.parse(body);
        if (parsed?.hello === expect && typeof parsed.pod === 'string') pod = parsed.pod;
      } catch {}
      what = status === 200 && pod ? pod : `bad answer: ${body.slice(0, 200)}`;
    } catch (error) {
      what = `error: ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`;
    }
    records.push([started, now(), status, what]);
  }
}

const start = now();
parentPort.postMessage({ type: 'started', at: start });
const running = [];
for (let step = 0; step < levels.length; step++) {
  const due = start + step * stepMs;
  if (due > now()) await sleep(due - now());
  while (running.length < levels[step]) running.push(client());
}
const fullAt = now();
await sleep(start + (levels.length - 1) * stepMs + holdMs - now());
stopping = true;
const stoppedAt = now();
await Promise.all(running);
parentPort.postMessage({ type: 'done', start, fullAt, stoppedAt, records });
