/**
 * Branch previews, as both platforms see them: which branches a GitSource previews, the label a
 * branch is served under (`/fn/{ns}/{name}@{label}`), the name of a preview's Function object, and
 * the labels that tell a preview's objects from the main branch's. Pure, so the controller that makes
 * the objects and the routers that find them derive the same names.
 */
import { sha256Hex } from './hash.js';
import { DNS_LABEL_MAX } from './naming.js';

/** The preview label (normalised branch) an object belongs to; absent on the main branch's objects. */
export const LABEL_PREVIEW = 'sless.dev/preview';
/** The Function a preview Function is a preview of: its builds are shared under that name. */
export const LABEL_PREVIEW_OF = 'sless.dev/preview-of';
/** The branch as git names it (labels cannot hold `/`). */
export const ANNOTATION_PREVIEW_BRANCH = 'sless.dev/preview-branch';

/** How long a branch label may be: room for the function's name beside it in one DNS label. */
export const BRANCH_LABEL_MAX = 30;
/** A preview at rest after this long without a request, unless spec.previews.idleSeconds says. */
export const DEFAULT_PREVIEW_IDLE_SECONDS = 300;

const HEX_SHA = /^(?:[0-9a-f]{12}|[0-9a-f]{40})$/;

/**
 * The label a branch is served under: lower case, every run of other characters than `a-z0-9` one
 * `-`, no `-` at either end. Longer than BRANCH_LABEL_MAX: cut, then `-` and 6 hex digits of the
 * whole branch name, so two long branches that share a prefix still differ. A label that would read
 * as a commit (12 or 40 hex digits) gets `-b`: `@{12 or 40 hex}` always means a commit. Deterministic;
 * different branches may still meet (`Feature/A` and `feature-a`), which `selectPreviews` reports.
 */
export function branchLabel(branch: string): string {
  let label = branch
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '');
  if (label === '') label = `b-${sha256Hex(branch).slice(0, 6)}`;
  if (label.length > BRANCH_LABEL_MAX) {
    const digest = sha256Hex(branch).slice(0, 6);
    label = `${label.slice(0, BRANCH_LABEL_MAX - digest.length - 1).replace(/-+$/, '')}-${digest}`;
  }
  if (HEX_SHA.test(label)) label = `${label}-b`;
  return label;
}

/**
 * The preview Function's object name: `{function}--{label}`. A label never holds `--`, so the split is
 * at the last `--`; past 63 characters the function's part is cut and a hash of both parts added.
 * A repository Function that happens to bear such a name is refused by the apply's ownership check,
 * never overwritten.
 */
export function previewFunctionName(functionName: string, label: string): string {
  const full = `${functionName}--${label}`;
  if (full.length <= DNS_LABEL_MAX) return full;
  const digest = sha256Hex(`${functionName}\0${label}`).slice(0, 6);
  const room = DNS_LABEL_MAX - label.length - digest.length - 3;
  return `${functionName.slice(0, room).replace(/-+$/, '')}-${digest}--${label}`;
}

/** `*` matches within one path segment, `**` across segments, `?` one character other than `/`. */
export function branchMatches(branch: string, patterns: readonly string[]): boolean {
  return patterns.some((pattern) => globRegExp(pattern).test(branch));
}

function globRegExp(pattern: string): RegExp {
  let source = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i] as string;
    if (c === '*' && pattern[i + 1] === '*') {
      source += '.*';
      i++;
    } else if (c === '*') source += '[^/]*';
    else if (c === '?') source += '[^/]';
    else source += c.replace(/[.+^${}()|[\]\\]/g, '\\$&');
  }
  return new RegExp(`^${source}$`);
}

export interface PreviewTarget {
  branch: string;
  label: string;
  commit: string;
}

export interface PreviewSelection {
  previews: PreviewTarget[];
  /** Branches that share a label: none of them is previewed, and status names them all. */
  collisions: { label: string; branches: string[] }[];
}

/**
 * The previews a source has: every branch matching a pattern except the source's own, by label.
 * Branches whose labels meet are all left out (not the first one found): which one would win could
 * change with the server's ref order, and a preview URL must never switch branches silently.
 */
export function selectPreviews(
  branches: readonly { branch: string; commit: string }[],
  patterns: readonly string[],
  mainBranch: string,
): PreviewSelection {
  const byLabel = new Map<string, { branch: string; commit: string }[]>();
  for (const b of branches) {
    if (b.branch === mainBranch || !branchMatches(b.branch, patterns)) continue;
    const label = branchLabel(b.branch);
    byLabel.set(label, [...(byLabel.get(label) ?? []), b]);
  }
  const previews: PreviewTarget[] = [];
  const collisions: PreviewSelection['collisions'] = [];
  for (const [label, found] of [...byLabel].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    if (found.length === 1) previews.push({ label, ...(found[0] as { branch: string; commit: string }) });
    else collisions.push({ label, branches: found.map((b) => b.branch).sort() });
  }
  return { previews, collisions };
}

/** The name a Function's builds are kept under: a preview's are its main Function's. */
export function buildOwnerName(fn: { metadata: { name: string; labels?: Record<string, string> } }): string {
  return fn.metadata.labels?.[LABEL_PREVIEW_OF] ?? fn.metadata.name;
}

/** True when `fn` is the preview of the Function `name` for the branch label `label`. */
export function isPreviewOf(
  fn: { metadata: { labels?: Record<string, string> } } | undefined,
  name: string,
  label: string,
): boolean {
  return fn?.metadata.labels?.[LABEL_PREVIEW_OF] === name && fn.metadata.labels?.[LABEL_PREVIEW] === label;
}

/** What `/fn/{ns}/{name}@{label}` answers when no such preview exists but the Function does. */
export function noPreviewMessage(namespace: string, name: string, label: string): string {
  return `function ${namespace}/${name} has no branch preview "${label}": no branch matching spec.previews normalises to it`;
}

/**
 * The Function as builders see it: a preview's builds are made, found and kept as its main
 * Function's, so code that is the same on both is built once, whichever branch has it first.
 */
export function buildOwnerOf<F extends { metadata: { name: string; labels?: Record<string, string> } }>(
  fn: F,
): F {
  const owner = buildOwnerName(fn);
  return owner === fn.metadata.name ? fn : { ...fn, metadata: { ...fn.metadata, name: owner } };
}
