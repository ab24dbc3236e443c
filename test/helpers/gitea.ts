/**
 * A real Gitea (built once from its Go module by test/pretest.sh into ~/.cache/sless/bin) on a
 * loopback port with SQLite in a temp directory: an admin user and its API token made with Gitea's
 * own CLI, then `gitea web` as a child process that can be stopped and started again on the same
 * port and data (a host going down and coming back). Webhooks may reach loopback, where sless is.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from '../../src/platform/local/ports.js';
import { tempDir } from './git.js';
import { GiveUp, pollUntil } from './poll-until.js';

const exec = promisify(execFile);

export const GITEA_VERSION = '1.27.3';
export const GITEA_BIN =
  process.env.SLESS_GITEA ?? join(homedir(), '.cache', 'sless', 'bin', `gitea-${GITEA_VERSION}`);
export const giteaAvailable = existsSync(GITEA_BIN);

export class Gitea {
  readonly url: string;
  readonly user = 'sless';
  token = '';
  private child: ChildProcess | undefined;
  private readonly dir: string;
  private readonly config: string;
  private errors = '';

  private constructor(dir: string, port: number) {
    this.dir = dir;
    this.url = `http://127.0.0.1:${port}`;
    this.config = join(dir, 'app.ini');
  }

  private get env(): NodeJS.ProcessEnv {
    // The tests run as root; Gitea refuses that unless told it is meant.
    return {
      ...process.env,
      GITEA_WORK_DIR: this.dir,
      GITEA_I_AM_BEING_UNSAFE_RUNNING_AS_ROOT: 'true',
      HOME: this.dir,
    };
  }

  static async start(): Promise<Gitea> {
    const dir = await tempDir('gitea');
    const port = await freePort();
    const gitea = new Gitea(dir, port);
    await mkdir(join(dir, 'repos'), { recursive: true });
    // Built without bindata, Gitea reads its options (the locale, which it needs even for the API)
    // from the module's own tree, as the build left it in the module cache.
    const modCache = (await exec('go', ['env', 'GOMODCACHE'])).stdout.trim();
    const moduleRoot = join(modCache, `code.gitea.io/gitea@v${GITEA_VERSION}`);
    await writeFile(
      gitea.config,
      [
        'APP_NAME = sless-test',
        // A test host on this machine, run by the test's user (root here).
        'I_AM_BEING_UNSAFE_RUNNING_AS_ROOT = true',
        'RUN_MODE = prod',
        `RUN_USER = ${process.env.USER ?? 'root'}`,
        `WORK_PATH = ${dir}`,
        '[server]',
        'HTTP_ADDR = 127.0.0.1',
        `HTTP_PORT = ${port}`,
        `ROOT_URL = ${gitea.url}/`,
        'DISABLE_SSH = true',
        'OFFLINE_MODE = true',
        `STATIC_ROOT_PATH = ${moduleRoot}`,
        'LFS_START_SERVER = false',
        '[database]',
        'DB_TYPE = sqlite3',
        `PATH = ${join(dir, 'gitea.db')}`,
        '[repository]',
        `ROOT = ${join(dir, 'repos')}`,
        'DEFAULT_BRANCH = main',
        '[security]',
        'INSTALL_LOCK = true',
        'SECRET_KEY = sless-test-secret-key-not-for-production',
        // Webhooks may reach loopback, where sless listens.
        'ALLOWED_HOST_LIST = loopback',
        '[service]',
        'DISABLE_REGISTRATION = true',
        '[webhook]',
        'DELIVER_TIMEOUT = 10',
        '[oauth2]',
        'ENABLED = false',
        '[actions]',
        'ENABLED = false',
        '[cron]',
        'ENABLED = false',
        '[log]',
        'MODE = console',
        'LEVEL = warn',
        '',
      ].join('\n'),
    );
    await gitea.cli('migrate');
    await gitea.cli(
      'admin',
      'user',
      'create',
      '--admin',
      '--username',
      gitea.user,
      '--password',
      'sless-test-password-1',
      '--email',
      'sless@example.com',
      '--must-change-password=false',
    );
    gitea.token = (
      await gitea.cli(
        'admin',
        'user',
        'generate-access-token',
        '--username',
        gitea.user,
        '--token-name',
        'tests',
        '--scopes',
        'all',
        '--raw',
      )
    ).trim();
    await gitea.up();
    return gitea;
  }

  private async cli(...args: string[]): Promise<string> {
    const { stdout } = await exec(GITEA_BIN, [...args, '--config', this.config], {
      cwd: this.dir,
      env: this.env,
    });
    return stdout;
  }

  /** Starts `gitea web` and waits until its API answers. */
  async up(): Promise<void> {
    const child = spawn(GITEA_BIN, ['web', '--config', this.config], {
      cwd: this.dir,
      env: this.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const keep = (chunk: Buffer) => {
      this.errors = (this.errors + chunk.toString()).slice(-4000);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    this.child = child;
    await pollUntil(
      'gitea answers /api/v1/version',
      async () => {
        if (child.exitCode !== null) throw new GiveUp(`gitea exited ${child.exitCode}: ${this.errors}`);
        return (await fetch(`${this.url}/api/v1/version`).catch(() => undefined))?.ok;
      },
      60_000,
      100,
    );
  }

  /** Kills `gitea web` at once (a host going down) and waits for it to be gone. */
  async down(): Promise<void> {
    const child = this.child;
    this.child = undefined;
    if (!child || child.exitCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
  }

  async api<T>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
    const response = await fetch(`${this.url}/api/v1${path}`, {
      method,
      headers: {
        authorization: `token ${this.token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    return { status: response.status, body: (text ? JSON.parse(text) : undefined) as T };
  }

  /** The clone URL with the token as the password, for `git push` over HTTP. */
  pushUrl(repo: string): string {
    return `http://${this.user}:${this.token}@127.0.0.1:${new URL(this.url).port}/${this.user}/${repo}.git`;
  }

  async close(): Promise<void> {
    await this.down();
    await rm(this.dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 });
  }
}
