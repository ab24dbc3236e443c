/**
 * A kube build in two steps, so that tenant code never runs where a credential is:
 *
 * 1. `install` (an init container, the runtime's own base image): fetches the build context through a
 *    presigned URL good for that one object, unpacks it and runs the dependency install (npm ci, pip
 *    install --target, go build), i.e. the tenant's code. It holds no secret, no service-account token
 *    and no registry or S3 credential.
 * 2. kaniko (which holds the registry push secret): builds a Dockerfile that only copies the prepared
 *    files onto the pinned base image. The Dockerfile comes from the pod's own annotation through a
 *    downward-API volume, which the install step cannot write, so no tenant-chosen RUN ever executes
 *    next to the push credentials.
 */
import { RUNTIME_INFO, type RuntimeFamily } from '../core/runtimes.js';
import type { RuntimeName } from '../core/schemas.js';

/** Base images, pinned by version; the install step runs in the same image the function runs on. */
export const INSTALL_IMAGES: Readonly<Record<RuntimeName, string>> = {
  nodejs20: 'node:20.20.2-bookworm-slim',
  'python3.11': 'python:3.11.13-slim-bookworm',
  'go1.21': 'golang:1.21.13-bookworm',
  nodejs22: RUNTIME_INFO.nodejs22.baseImage,
  nodejs24: RUNTIME_INFO.nodejs24.baseImage,
  'python3.12': RUNTIME_INFO['python3.12'].baseImage,
  'python3.13': RUNTIME_INFO['python3.13'].baseImage,
  'go1.25': RUNTIME_INFO['go1.25'].baseImage,
  'go1.26': RUNTIME_INFO['go1.26'].baseImage,
  'go1.27': RUNTIME_INFO['go1.27'].baseImage,
};

/** How each base image downloads the context: with what it already has (no extra packages). */
const DOWNLOAD: Readonly<Record<RuntimeFamily, string>> = {
  node: 'node -e \'fetch(process.env.SLESS_CONTEXT_URL).then(async (r) => { if (!r.ok) throw new Error("context download: HTTP " + r.status); require("fs").writeFileSync("/tmp/context.tar.gz", Buffer.from(await r.arrayBuffer())); })\'',
  python:
    'python -c \'import os, urllib.request; urllib.request.urlretrieve(os.environ["SLESS_CONTEXT_URL"], "/tmp/context.tar.gz")\'',
  go: 'curl -fsS -o /tmp/context.tar.gz "$SLESS_CONTEXT_URL"',
};

/** The dependency install of each runtime: the only place a kube build runs the tenant's code. */
const INSTALL: Readonly<Record<RuntimeFamily, string>> = {
  node: [
    'cd /workspace/code',
    // No update check: HOME is fresh in every build pod, so npm would ask the registry for its own
    // latest version each time and wait for the answer before it exits (about 10 s where egress is
    // slow or closed), after the install itself took half a second.
    'if [ -f package.json ]; then if [ -f package-lock.json ] || [ -f npm-shrinkwrap.json ]; then npm ci --omit=dev --no-audit --no-fund --no-update-notifier; else npm install --omit=dev --no-audit --no-fund --no-update-notifier; fi; fi',
    // The installed packages become a layer of their own, below the code: a commit that changes only
    // code keeps that layer (see finalDockerfile).
    'mkdir -p /workspace/deps',
    'if [ -f package.json ] && [ -d node_modules ]; then mv node_modules /workspace/deps/node_modules; fi',
  ].join('\n'),
  python: [
    'mkdir -p /workspace/deps',
    'if [ -f /workspace/code/requirements.txt ]; then pip install --no-cache-dir --disable-pip-version-check --target /workspace/deps -r /workspace/code/requirements.txt; fi',
  ].join('\n'),
  go: 'bash /workspace/build.sh /workspace/code /workspace/out/function "$SLESS_ENTRYPOINT"',
};

export const WORKSPACE = '/workspace';

/**
 * The unprivileged uid (and gid) the install step runs as. The files it unpacks are its own, in a
 * workspace whose fsGroup makes directories setgid, and kaniko's COPY keeps both: a kaniko image's
 * code is owned by this uid, its directories mode 2755, and the code-layer path writes the same.
 */
export const INSTALL_UID = 10001;

/** The install container's script: download, unpack, install. */
export function installScript(runtime: RuntimeName): string {
  return [
    'set -eu',
    DOWNLOAD[RUNTIME_INFO[runtime].family],
    `tar -xzf /tmp/context.tar.gz -C ${WORKSPACE}`,
    'rm -f /tmp/context.tar.gz',
    INSTALL[RUNTIME_INFO[runtime].family],
  ].join('\n');
}

/**
 * Run after the install, by sless and not the tenant: removes every symlink that leads out of the
 * workspace, so that kaniko's COPY cannot be pointed at files of its own container (the push secret).
 * Links inside the workspace (node_modules/.bin) stay.
 */
export function sanitizeScript(): string {
  return [
    'set -eu',
    `find ${WORKSPACE} -type l -exec sh -c 'for link; do case "$(readlink -f "$link" || true)" in ${WORKSPACE}|${WORKSPACE}/*) ;; *) rm -f "$link"; echo "sless: removed $link, a link out of the build";; esac; done' sh {} +`,
  ].join('\n');
}

/**
 * What kaniko builds: the prepared files copied onto the base image, and nothing run. The function's
 * code is always the last layer and nothing after it adds files, so that an image whose dependency
 * inputs are unchanged can take a new commit's code by replacing that layer alone (code-layer.ts);
 * IMAGE_LAYOUT_VERSION changes with this layout.
 */
export function finalDockerfile(runtime: RuntimeName): string {
  switch (RUNTIME_INFO[runtime].family) {
    case 'node':
      return [
        `FROM ${INSTALL_IMAGES[runtime]}`,
        'ENV NODE_ENV=production SLESS_CODE_DIR=/sless/code PORT=8080',
        'WORKDIR /sless/code',
        'COPY server.js /sless/server.js',
        'COPY deps/ /sless/code/',
        'COPY code/ /sless/code/',
        'USER node',
        'EXPOSE 8080',
        'CMD ["node", "/sless/server.js"]',
        '',
      ].join('\n');
    case 'python':
      return [
        `FROM ${INSTALL_IMAGES[runtime]}`,
        'ENV PYTHONPATH=/sless/deps PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 SLESS_CODE_DIR=/sless/code PORT=8080',
        'COPY deps/ /sless/deps/',
        'COPY server.py /sless/server.py',
        'WORKDIR /sless/code',
        'COPY code/ /sless/code/',
        'USER 10001',
        'EXPOSE 8080',
        'CMD ["python", "/sless/server.py"]',
        '',
      ].join('\n');
    case 'go':
      return [
        // distroless static: CA certificates and tzdata, no shell; :nonroot runs as uid 65532.
        'FROM gcr.io/distroless/static-debian12:nonroot',
        'ARG SLESS_ENTRYPOINT=handler.Handle',
        'ENV PORT=8080 SLESS_ENTRYPOINT=$SLESS_ENTRYPOINT',
        'COPY out/function /sless/function',
        'USER nonroot:nonroot',
        'EXPOSE 8080',
        'ENTRYPOINT ["/sless/function"]',
        '',
      ].join('\n');
  }
}

/** Dockerfile instructions that execute nothing at build time. */
export const NON_EXECUTING_INSTRUCTIONS = [
  'FROM',
  'ARG',
  'ENV',
  'WORKDIR',
  'COPY',
  'USER',
  'EXPOSE',
  'CMD',
  'ENTRYPOINT',
];
