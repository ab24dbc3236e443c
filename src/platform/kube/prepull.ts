/**
 * Pre-pulling, where the operator allows it (SLESS_PREPULL): a DaemonSet `sless-prepull` in the
 * controller namespace whose init containers pull, on every node it runs on, the kaniko image and the
 * base image of each runtime the cluster's Functions use. A node then has them before the first build
 * pod and the first function pod of a runtime land there: the build's install step and kaniko start
 * without a pull, and a function image shares the base's layers. Kept by the leader, applied again
 * when the runtimes in use change, and deleted when pre-pulling is off.
 */
import type { Logger } from 'pino';
import type { StoreEvent } from '../../core/interfaces.js';
import type { SlessFunction } from '../../core/resources.js';
import type { RuntimeName } from '../../core/schemas.js';
import { INSTALL_IMAGES } from '../../packaging/install-step.js';
import { KANIKO_IMAGE, mirroredImage, UNPRIVILEGED } from './build/kaniko-job.js';
import type { KubeHttp } from './http.js';
import { LABEL_COMPONENT, LABEL_MANAGED_BY, MANAGED_BY } from './labels.js';
import { apply, deleteObject, type KubeObject } from './objects.js';
import { DAEMON_SET } from './resource-types.js';

export const PREPULL_NAME = 'sless-prepull';
/** How often the DaemonSet is applied again anyway: one deleted or edited by hand comes back. */
const RESYNC_MS = 10 * 60_000;
/** Changes of Functions within this long are read as one. */
const COALESCE_MS = 1000;

export interface PrepullSettings {
  controllerNamespace: string;
  kanikoImage?: string;
  registryMap?: readonly string[];
}

/**
 * The images a node needs for builds and functions of `runtimes`, as the build pods name them: each
 * runtime's base (mirrored as build pods mirror it) and the kaniko image. Sorted, no repeats. The Go
 * runtime's distroless run image is left out: it is 2 MB and has no program an init container could run.
 */
export function prepullImages(runtimes: Iterable<RuntimeName>, settings: PrepullSettings): string[] {
  const bases = [...new Set(runtimes)].map((runtime) =>
    mirroredImage(INSTALL_IMAGES[runtime], settings.registryMap),
  );
  return [...new Set(bases)].sort();
}

/** The DaemonSet that pulls `bases` (runtime base images, each with a shell) and the kaniko image. */
export function prepullDaemonSet(settings: PrepullSettings, bases: readonly string[]): KubeObject {
  const labels = { [LABEL_COMPONENT]: 'prepull', [LABEL_MANAGED_BY]: MANAGED_BY };
  const securityContext = { ...UNPRIVILEGED, readOnlyRootFilesystem: true };
  const resources = { requests: { cpu: '1m', memory: '8Mi' }, limits: { memory: '32Mi' } };
  const pull = (name: string, image: string, command: string[]) => ({
    name,
    image,
    imagePullPolicy: 'IfNotPresent',
    command,
    securityContext,
    resources,
  });
  return {
    apiVersion: 'apps/v1',
    kind: 'DaemonSet',
    metadata: { name: PREPULL_NAME, namespace: settings.controllerNamespace, labels },
    spec: {
      selector: { matchLabels: labels },
      // Every node pulls on its own: none waits for another's pull.
      updateStrategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: '100%' } },
      template: {
        metadata: { labels },
        spec: {
          automountServiceAccountToken: false,
          enableServiceLinks: false,
          terminationGracePeriodSeconds: 1,
          // Each image is pulled by running it once: the kubelet pulls what a container needs.
          initContainers: [
            pull('kaniko', settings.kanikoImage ?? KANIKO_IMAGE, ['/kaniko/executor', 'version']),
            ...bases.map((image, i) => pull(`base-${i}`, image, ['sh', '-c', 'exit 0'])),
          ],
          // Something must stay running for the DaemonSet to keep the pod (and the node its images).
          containers: [
            pull('idle', bases[0] as string, [
              'sh',
              '-c',
              'trap "exit 0" TERM; while :; do sleep 3600 & wait $!; done',
            ]),
          ],
        },
      },
    },
  };
}

/** The leader's keeper of the DaemonSet: applied at start, on a change of the runtimes in use, and now and then. */
export class PrepullKeeper {
  private applied: string | undefined;
  private timer: NodeJS.Timeout | undefined;
  private resync: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;
  private running: Promise<void> = Promise.resolve();
  private stopped = false;

  constructor(
    private readonly options: {
      http: KubeHttp;
      logger: Logger;
      settings: PrepullSettings;
      /** Whether pre-pulling is on: off, a DaemonSet left from when it was on is deleted. */
      enabled: boolean;
      functions: {
        cached(kind: 'Function', keep: (fn: SlessFunction) => boolean): SlessFunction[] | undefined;
        subscribe(listener: (event: StoreEvent) => void): () => void;
      };
    },
  ) {}

  start(): void {
    const { enabled, functions } = this.options;
    if (!enabled) {
      // Once, and never retried: without the pre-pull component the controller may delete this one
      // DaemonSet only (deploy/rbac.yaml), which is all this asks.
      this.running = this.remove().catch((error: unknown) =>
        this.options.logger.info(
          { err: (error as Error).message },
          'pre-pull is off; no DaemonSet left to delete',
        ),
      );
      return;
    }
    this.unsubscribe = functions.subscribe((event) => {
      if (event.object.kind === 'Function' && !event.statusOnly) this.schedule(COALESCE_MS);
    });
    this.resync = setInterval(() => {
      this.applied = undefined;
      this.schedule(0);
    }, RESYNC_MS);
    this.resync.unref();
    this.schedule(0);
  }

  stop(): Promise<void> {
    this.stopped = true;
    this.unsubscribe?.();
    if (this.timer) clearTimeout(this.timer);
    if (this.resync) clearInterval(this.resync);
    return this.running;
  }

  /** Done once every change asked for so far is applied (for tests). */
  settled(): Promise<void> {
    return this.running;
  }

  private schedule(delayMs: number): void {
    if (this.stopped || this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.enqueue(() => this.keep());
    }, delayMs);
    this.timer.unref();
  }

  private enqueue(work: () => Promise<void>): void {
    this.running = this.running.then(work).catch((error: unknown) => {
      this.options.logger.warn(
        { err: (error as Error).message },
        'pre-pull DaemonSet not kept; trying again',
      );
      this.applied = undefined;
      this.schedule(5000);
    });
  }

  private async keep(): Promise<void> {
    if (this.stopped) return;
    const runtimes = new Set<RuntimeName>();
    const cached = this.options.functions.cached('Function', (fn) => {
      runtimes.add(fn.spec.runtime);
      return false;
    });
    // Not listed yet: looked at again shortly.
    if (cached === undefined) return this.schedule(COALESCE_MS);
    const bases = prepullImages(runtimes, this.options.settings);
    const wanted = JSON.stringify(bases);
    if (wanted === this.applied) return;
    if (bases.length === 0) await this.remove();
    else {
      await apply(this.options.http, DAEMON_SET, prepullDaemonSet(this.options.settings, bases), {
        force: true,
      });
      this.options.logger.info({ images: bases.length + 1 }, 'pre-pull DaemonSet applied');
    }
    this.applied = wanted;
  }

  private async remove(): Promise<void> {
    await deleteObject(
      this.options.http,
      DAEMON_SET,
      this.options.settings.controllerNamespace,
      PREPULL_NAME,
    );
  }
}
