/**
 * What the dashboard knows of one namespace: the objects as the API last gave them (from a list,
 * then from change events), and each function's build history. Only shapes the page reads are
 * typed; everything else passes through untouched.
 */

export interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
}

export interface BuildRecord {
  buildKey: string;
  commit: string;
  result: 'Succeeded' | 'Failed' | 'Running';
  startedAt: string;
  finishedAt?: string;
  durationMs?: number;
  message?: string;
  logTail?: string;
}

export interface ApiObject {
  kind: 'GitSource' | 'Function' | 'Trigger' | 'FunctionJob';
  metadata: {
    name: string;
    namespace: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    resourceVersion?: string;
  };
  spec: Record<string, unknown>;
  status?: Record<string, unknown> & { conditions?: Condition[]; phase?: string };
}

export type Kind = ApiObject['kind'];

export const COLLECTION: Record<Kind, string> = {
  GitSource: 'sources',
  Function: 'functions',
  Trigger: 'triggers',
  FunctionJob: 'jobs',
};

export class NamespaceModel {
  readonly namespace: string;
  readonly objects: Record<Kind, Map<string, ApiObject>> = {
    GitSource: new Map(),
    Function: new Map(),
    Trigger: new Map(),
    FunctionJob: new Map(),
  };
  readonly builds = new Map<string, BuildRecord[]>();

  constructor(namespace: string) {
    this.namespace = namespace;
  }

  put(object: ApiObject): void {
    this.objects[object.kind]?.set(object.metadata.name, object);
  }

  remove(kind: Kind, name: string): void {
    this.objects[kind]?.delete(name);
    if (kind === 'Function') this.builds.delete(name);
  }

  sorted(kind: Kind): ApiObject[] {
    return [...this.objects[kind].values()].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
  }
}

export function condition(object: ApiObject, type: string): Condition | undefined {
  return object.status?.conditions?.find((c) => c.type === type);
}

export function text(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}
