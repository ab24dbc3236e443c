/**
 * The text the code security gate sends: a function's source files as the build would get them,
 * limited to the extensions that hold code or configuration, without binaries or node_modules.
 */
import type { BuildRequest } from '../core/interfaces.js';
import { isWithin } from '../core/paths.js';

export const CHECKED_EXTENSIONS = [
  '.py',
  '.js',
  '.ts',
  '.json',
  '.yaml',
  '.yml',
  '.txt',
  '.sh',
  '.sql',
  '.go',
];
/** Over this much text in all the check is skipped: such a prompt would be cut or cost too much. */
export const MAX_CHECKED_BYTES = 100 * 1024;

export interface CodeText {
  files: { path: string; text: string }[];
  bytes: number;
  /** Set when the text is over the limit; `files` is then empty. */
  overLimit: boolean;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Git's rule for binary files (a NUL byte near the start), plus anything that is not UTF-8. */
function asText(bytes: Uint8Array): string | undefined {
  if (bytes.subarray(0, 8000).includes(0)) return undefined;
  try {
    return utf8.decode(bytes);
  } catch {
    return undefined;
  }
}

function checked(path: string): boolean {
  if (/(^|\/)node_modules\//.test(path)) return false;
  const dot = path.lastIndexOf('.');
  return dot > path.lastIndexOf('/') && CHECKED_EXTENSIONS.includes(path.slice(dot).toLowerCase());
}

export async function collectCodeText(
  request: Pick<BuildRequest, 'snapshot' | 'codeDir' | 'excludedFiles'>,
): Promise<CodeText> {
  const prefix = request.codeDir === '' ? 0 : request.codeDir.length + 1;
  const candidates = (await request.snapshot.listFiles(request.codeDir)).filter(
    (f) =>
      isWithin(request.codeDir, f.path) &&
      f.mode !== '120000' &&
      !request.excludedFiles.has(f.path) &&
      checked(f.path),
  );
  const files: CodeText['files'] = [];
  let bytes = 0;
  for (const file of candidates) {
    const content = await request.snapshot.readFile(file.path);
    const text = asText(content);
    if (text === undefined) continue;
    bytes += content.byteLength;
    if (bytes > MAX_CHECKED_BYTES) return { files: [], bytes, overLimit: true };
    files.push({ path: file.path.slice(prefix), text });
  }
  return { files, bytes, overLimit: false };
}
