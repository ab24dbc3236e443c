/**
 * Local mode's cron Triggers: schedules run in this process, and each tick invokes the function
 * through its route as an HTTP caller would, so a scheduled call behaves like any other. The last
 * run and its result are kept here for the Trigger's status.
 */

import { Cron } from 'croner';
import type { Logger } from 'pino';
import { Client, request } from 'undici';
import type { RouteResolver, TriggerScheduler } from '../../core/interfaces.js';
import { objectKey } from '../../core/object-key.js';
import type { SlessFunction, Trigger, TriggerStatus } from '../../core/resources.js';

interface Scheduled {
  cron: Cron;
  signature: string;
}

export interface LocalCronSchedulerOptions {
  routes: RouteResolver;
  logger: Logger;
  /** Told after each tick, so the Trigger's reconcile records the run (the scheduler writes no status). */
  onFired?: (namespace: string, name: string) => void;
}

/**
 * Cron triggers in process: croner parses and schedules, and each tick invokes the function through
 * its route with the trigger's event as a JSON POST, exactly as an HTTP caller would. The last run
 * and its result are kept here and handed to the Trigger's reconcile through `apply`.
 */
export class LocalCronScheduler implements TriggerScheduler {
  private readonly jobs = new Map<string, Scheduled>();
  private readonly lastRuns = new Map<string, { lastRun: string; lastResult: string }>();
  private readonly options: LocalCronSchedulerOptions;

  constructor(options: LocalCronSchedulerOptions) {
    this.options = options;
  }

  async apply(trigger: Trigger, fn: SlessFunction | undefined): Promise<TriggerStatus> {
    const key = objectKey(trigger.metadata.namespace, trigger.metadata.name);
    const enabled = trigger.spec.enabled !== false && fn !== undefined;
    const signature = JSON.stringify([
      trigger.spec.schedule,
      trigger.spec.timezone,
      trigger.spec.function,
      trigger.spec.event,
    ]);
    const existing = this.jobs.get(key);
    if (existing && existing.signature !== signature) {
      existing.cron.stop();
      this.jobs.delete(key);
    }
    let scheduled = this.jobs.get(key);
    if (!scheduled) {
      const cron = new Cron(
        trigger.spec.schedule ?? '',
        {
          paused: true,
          protect: true,
          ...(trigger.spec.timezone ? { timezone: trigger.spec.timezone } : {}),
        },
        () => this.fire(trigger),
      );
      scheduled = { cron, signature };
      this.jobs.set(key, scheduled);
    }
    if (enabled) scheduled.cron.resume();
    else scheduled.cron.pause();
    const next = enabled ? scheduled.cron.nextRun() : null;
    return { ...this.lastRuns.get(key), nextRun: next ? next.toISOString() : undefined };
  }

  async remove(namespace: string, name: string): Promise<void> {
    const key = objectKey(namespace, name);
    this.jobs.get(key)?.cron.stop();
    this.jobs.delete(key);
    this.lastRuns.delete(key);
  }

  stopAll(): void {
    for (const job of this.jobs.values()) job.cron.stop();
    this.jobs.clear();
  }

  /** Runs one tick now; the scheduler calls it, and so can tests that cannot wait a minute. */
  async fire(trigger: Trigger): Promise<void> {
    const { namespace, name } = trigger.metadata;
    const lastRun = new Date().toISOString();
    let lastResult: string;
    const route = await this.options.routes.resolve(namespace, trigger.spec.function);
    if (route.state !== 'ready') {
      lastResult = route.state === 'unknown' ? 'function not found' : `skipped: ${route.message}`;
    } else {
      const dispatcher = route.socketPath
        ? new Client(route.origin, { socketPath: route.socketPath })
        : undefined;
      try {
        const response = await request(`${route.origin}/`, {
          ...(dispatcher ? { dispatcher } : {}),
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-sless-trigger': name },
          body: JSON.stringify(trigger.spec.event ?? {}),
          headersTimeout: route.timeoutSec * 1000 + 1000,
          bodyTimeout: route.timeoutSec * 1000 + 1000,
        });
        const body = await response.body.text();
        lastResult = `${response.statusCode} ${body.slice(0, 200)}`;
      } catch (error) {
        lastResult = `error: ${(error as Error).message}`;
      } finally {
        route.release?.();
        void dispatcher?.close();
      }
    }
    const key = objectKey(namespace, name);
    // Removed while it ran: no record of a trigger that is gone.
    if (!this.jobs.has(key)) return;
    this.lastRuns.set(key, { lastRun, lastResult });
    this.options.onFired?.(namespace, name);
    this.options.logger.info(
      { trigger: objectKey(namespace, name), lastResult: lastResult.slice(0, 80) },
      'cron trigger fired',
    );
  }
}
