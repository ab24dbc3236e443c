/**
 * One replica's terms as leader: the Lease elector, the leader-only work it starts and stops, and the
 * control loop of the current term. Every replica serves the API and /fn/; a request that needs the
 * control loop on a replica that does not lead is refused as unavailable, and the API forwards it.
 */
import type { Logger } from 'pino';
import type { LeaderElectionSettings } from '../../config/kube.js';
import { asError, UnavailableError } from '../../core/errors.js';
import { ALWAYS_LEADER, type Leadership, LeaderTasks, type StopTask } from '../../core/leadership.js';
import type { KubeHttp } from './http.js';
import { LeaderElector } from './leader-election.js';

/** What a term's control loop must offer: it starts when the term begins and stops when it ends. */
export interface ControlLoop {
  start(): Promise<void>;
  stop(): Promise<void>;
}

export class LeaderTerm<Loop extends ControlLoop> {
  readonly leadership: Leadership;
  readonly tasks: LeaderTasks;
  private readonly election: LeaderElectionSettings;
  private readonly logger: Logger;
  private elector: LeaderElector | undefined;
  private loop: Loop | undefined;
  private loopStarted: Promise<void> | undefined;

  constructor(options: { election: LeaderElectionSettings; logger: Logger; newControlLoop: () => Loop }) {
    const { election, logger } = options;
    this.election = election;
    this.logger = logger;
    this.leadership = election.enabled
      ? {
          isLeader: () => this.elector?.isLeader() ?? false,
          info: () =>
            this.elector?.info() ?? { identity: election.identity, holder: undefined, isLeader: false },
        }
      : {
          ...ALWAYS_LEADER,
          info: () => ({ identity: election.identity, holder: election.identity, isLeader: true }),
        };
    this.tasks = new LeaderTasks({
      onError: (task, error) =>
        logger.error({ task, err: asError(error).message }, 'leader-only work failed to start or stop'),
    });
    // The control loop is the first leader-only task: each term gets a fresh one, so nothing a
    // previous term queued or cached outlives the Lease it was decided under.
    this.tasks.register('control loop', () => {
      const loop = options.newControlLoop();
      this.loop = loop;
      this.loopStarted = loop
        .start()
        .catch((error: unknown) =>
          this.logger.error({ err: asError(error).message }, 'the control loop failed to start'),
        );
      return () => loop.stop();
    });
  }

  /** Work that runs only while this replica leads, started after the control loop. */
  register(name: string, start: () => StopTask | Promise<StopTask>): void {
    this.tasks.register(name, start);
  }

  /** The control loop of the current term, for requests that change what is reconciled. */
  current(): Loop {
    if (!this.loop || !this.leadership.isLeader())
      throw new UnavailableError('this replica is not the leader; the request goes to the leader');
    return this.loop;
  }

  /** The current term's loop, or the last one once this replica stopped leading; none before the first. */
  latest(): Loop | undefined {
    return this.loop;
  }

  /** The URL the leader advertises on the Lease, for forwarding. */
  leaderUrl(): string | undefined {
    return this.elector?.leaderUrl();
  }

  /**
   * Campaigns for the Lease (or leads at once without election). A replica that leads at once has its
   * control loop running before this resolves, as a single controller always had.
   */
  async start(options: { http: KubeHttp; namespace: string; url: string }): Promise<void> {
    if (this.election.enabled) {
      this.elector = new LeaderElector({
        http: options.http,
        logger: this.logger,
        namespace: options.namespace,
        name: this.election.leaseName,
        identity: this.election.identity,
        url: this.election.advertiseUrl ?? options.url,
        timing: this.election.timing,
        onStartedLeading: () => void this.tasks.startAll(),
        onStoppedLeading: () => void this.tasks.stopAll(),
      });
      await this.elector.start();
    }
    if (this.leadership.isLeader()) {
      await this.tasks.startAll();
      await this.loopStarted;
    }
  }

  /** Reconciling stops first; releasing the Lease then lets another replica take over at once. */
  async stop(): Promise<void> {
    await this.tasks.stopAll();
    await this.elector?.stop();
  }
}
