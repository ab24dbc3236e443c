/**
 * The dashboard's files at `/ui/`: the page, its stylesheet and its compiled scripts, read from the
 * directory `npm run build` fills (dist/ui). Only names of that shape are served, from that one
 * directory, so no path can reach elsewhere. The files hold no data: the page reads the `/v1` API
 * with the caller's own credentials, so they are public like /healthz. A strict Content Security
 * Policy keeps the page to its own scripts and origin, and out of other sites' frames.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import { NotFoundError } from '../../core/errors.js';

/** dist/ui beside src/ and dist/: this file is two levels below the package root either way. */
export const DEFAULT_UI_DIR = fileURLToPath(new URL('../../../dist/ui/', import.meta.url));

const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-cache',
} as const;

const TYPES: Record<string, string> = {
  html: 'text/html; charset=utf-8',
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
  svg: 'image/svg+xml',
};

const ASSET_NAME = /^[a-z0-9][a-z0-9-]*\.(js|css|svg)$/;

export async function uiRoutes(app: FastifyInstance, options: { dir?: string }): Promise<void> {
  const dir = options.dir ?? DEFAULT_UI_DIR;
  const serve = async (file: string, type: string) => {
    try {
      return await readFile(join(dir, file));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      throw new NotFoundError(
        file === 'index.html'
          ? 'the dashboard is not built: run `npm run build`'
          : `no dashboard file ${file} (${type})`,
      );
    }
  };

  app.get(
    '/ui/',
    { schema: { summary: 'The dashboard (a page that reads this API)', tags: ['ui'] } },
    async (_request, reply) => {
      const page = await serve('index.html', 'html');
      return reply
        .headers(SECURITY_HEADERS)
        .type(TYPES.html as string)
        .send(page);
    },
  );
  app.get<{ Params: { file: string } }>(
    '/ui/:file',
    { schema: { summary: 'A dashboard script or stylesheet', tags: ['ui'] } },
    async (request, reply) => {
      const { file } = request.params;
      const match = ASSET_NAME.exec(file);
      if (!match?.[1]) throw new NotFoundError(`no dashboard file ${file}`);
      const body = await serve(file, match[1]);
      return reply
        .headers(SECURITY_HEADERS)
        .type(TYPES[match[1]] as string)
        .send(body);
    },
  );
}
