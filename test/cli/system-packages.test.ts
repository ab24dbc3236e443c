/**
 * test/system-packages.sh, the first step of `npm test`, on a machine that lacks a package: as root it
 * installs what is missing through apt-get (a stand-in that records its arguments), as another user it
 * stops with the exact command to run, and with everything present it asks apt-get nothing.
 */
import { execFile } from 'node:child_process';
import { chmod, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

const SCRIPT = resolve('test/system-packages.sh');
/** What the script itself runs, and every command it checks for. */
const TOOLS = ['bash', 'sort', 'id', 'mktemp', 'tail', 'rm', 'cat', 'touch', 'chmod'];
const CHECKED = [
  'git',
  'python3',
  'openssl',
  'pgrep',
  'bwrap',
  'slirp4netns',
  'setpriv',
  'unshare',
  'chromium',
  'firefox-esr',
  'rabbitmq-server',
];

interface Run {
  code: number;
  stderr: string;
}

const dirs: string[] = [];
afterEach(async () => {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

/** The real file behind a command: pyenv's python3 is a shim that needs pyenv on the PATH. */
function which(command: string): Promise<string> {
  const probe =
    command === 'python3' ? 'python3 -c "import sys; print(sys.executable)"' : `command -v ${command}`;
  return new Promise((done, fail) =>
    execFile('bash', ['-c', probe], (error, stdout) =>
      error ? fail(new Error(`${command} is not on this machine's PATH`)) : done(stdout.trim()),
    ),
  );
}

/** A PATH holding the real tools and the checked commands, less `without`; apt-get records its calls. */
async function fakeMachine(without: string[]): Promise<{ bin: string; aptLog: string }> {
  const root = await mkdtemp(join(tmpdir(), 'sless-syspkg-'));
  dirs.push(root);
  await chmod(root, 0o755);
  const bin = join(root, 'bin');
  const aptLog = join(root, 'apt-get.log');
  await mkdir(bin, { mode: 0o755 });
  for (const command of [...TOOLS, ...CHECKED]) {
    if (without.includes(command)) continue;
    await symlink(await which(command), join(bin, command));
  }
  // apt-get "installs" bubblewrap by putting a bwrap on the PATH, as the real package would.
  await writeFile(
    join(bin, 'apt-get'),
    [
      '#!/bin/bash',
      `echo "$*" >> ${aptLog}`,
      `if [[ " $* " == *" install "* && " $* " == *" bubblewrap "* ]]; then printf '#!/bin/bash\\n' > ${bin}/bwrap; chmod +x ${bin}/bwrap; fi`,
      '',
    ].join('\n'),
    { mode: 0o755 },
  );
  return { bin, aptLog };
}

function runScript(bin: string, asUser?: number): Promise<Run> {
  const [command, args] =
    asUser === undefined
      ? ['bash', [SCRIPT]]
      : ['setpriv', [`--reuid=${asUser}`, `--regid=${asUser}`, '--clear-groups', 'bash', SCRIPT]];
  return new Promise((done) =>
    execFile(
      command as string,
      args as string[],
      { env: { PATH: bin, HOME: tmpdir() }, timeout: 30_000 },
      (error, _stdout, stderr) => done({ code: error ? Number(error.code ?? -1) : 0, stderr }),
    ),
  );
}

async function aptCalls(aptLog: string): Promise<string[]> {
  const text = await readFile(aptLog, 'utf8').catch(() => '');
  return text.split('\n').filter(Boolean);
}

const isRoot = process.getuid?.() === 0;

describe('test/system-packages.sh', () => {
  it('asks apt-get nothing when every package is there', async () => {
    const { bin, aptLog } = await fakeMachine([]);
    const run = await runScript(bin);
    expect(run).toMatchObject({ code: 0 });
    expect(run.stderr).toContain('system packages: all present');
    expect(await aptCalls(aptLog)).toEqual([]);
  });

  it.runIf(isRoot)('as root, installs what is missing with a progress line, then finds it', async () => {
    const { bin, aptLog } = await fakeMachine(['bwrap', 'slirp4netns']);
    const run = await runScript(bin);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toContain('system packages: installing bubblewrap slirp4netns with apt-get');
    expect(run.stderr).toContain('system packages: installed bubblewrap slirp4netns');
    expect(await aptCalls(aptLog)).toEqual([
      '-o DPkg::Lock::Timeout=600 update -qq',
      '-o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends bubblewrap slirp4netns',
    ]);
    // The fake apt-get put a bwrap there: a second run finds it and installs nothing more.
    await writeFile(join(bin, 'slirp4netns'), '#!/bin/bash\n', { mode: 0o755 });
    const again = await runScript(bin);
    expect(again.stderr).toContain('system packages: all present');
    expect(await aptCalls(aptLog)).toHaveLength(2);
  });

  it.runIf(isRoot)('as another user, stops at once with the exact command to run', async () => {
    const { bin, aptLog } = await fakeMachine(['bwrap']);
    const run = await runScript(bin, 65534);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('system packages missing: bubblewrap');
    expect(run.stderr).toContain('apt-get update && apt-get install -y --no-install-recommends bubblewrap');
    expect(await aptCalls(aptLog)).toEqual([]);
  });

  it('.ci/run installs nothing itself: the system packages are npm test’s job', async () => {
    const ci = await readFile(resolve('.ci/run'), 'utf8');
    expect(ci).not.toMatch(/apt-get|bubblewrap|slirp4netns/);
    expect(await readFile(resolve('test/pretest.sh'), 'utf8')).toContain('bash test/system-packages.sh');
  });
});
