/**
 * The key the controller replicas sign their concurrency reports with: a Secret in the controller
 * namespace, which tenants cannot read. Whichever replica first finds it missing creates it with a
 * random key, by server-side apply under a field manager of its own and without force: RBAC can
 * limit an apply to the Secret's name (a plain create names nothing to limit), and of two replicas
 * racing, the second's apply conflicts with the first's key (409) and it reads the winner's.
 * It is read once and then kept; it is read again only when a signature did not verify (the Secret
 * may have been replaced) and at most once per `rereadMs`, so neither traffic nor a stranger's
 * forged reports turn into API requests.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { asError } from '../../core/errors.js';
import { APPLY_PATCH, isStatus, type KubeHttp } from './http.js';
import { getObject, type KubeObject } from './objects.js';
import { objectPath, SECRET } from './resource-types.js';

/** The Secret's data key, and the shortest key accepted (an HMAC-SHA256 key of 256 bits). */
export const REPLICA_KEY_FIELD = 'key';
const MIN_KEY_BYTES = 32;

export interface ReplicaKeyOptions {
  http: KubeHttp;
  logger: Logger;
  namespace: string;
  name: string;
  /** This replica's identity: its apply's field manager, so two replicas' keys conflict. */
  identity: string;
  /** The least time between two reads of the Secret (default 30 s). */
  rereadMs?: number;
}

export class ReplicaKey {
  private readonly options: ReplicaKeyOptions;
  private value: Buffer | undefined;
  private suspect = false;
  private lastRead = Number.NEGATIVE_INFINITY;
  private reading: Promise<void> | undefined;

  constructor(options: ReplicaKeyOptions) {
    this.options = options;
  }

  /** The key; undefined while it was never read (the Secret cannot be read or created). */
  async get(): Promise<Buffer | undefined> {
    const due = !this.value || this.suspect;
    if (due && Date.now() - this.lastRead >= (this.options.rereadMs ?? 30_000)) {
      this.reading ??= this.read().finally(() => {
        this.reading = undefined;
      });
    }
    await this.reading;
    return this.value;
  }

  /** A signature under the key did not verify: the next `get` may read the Secret again. */
  mismatch(): void {
    this.suspect = true;
  }

  private async read(): Promise<void> {
    this.lastRead = Date.now();
    try {
      const key = await this.readOrCreate();
      if (this.value && !this.value.equals(key))
        this.options.logger.info({ secret: this.options.name }, 'the replicas’ key changed');
      this.value = key;
      this.suspect = false;
    } catch (error) {
      this.options.logger.warn(
        { secret: `${this.options.namespace}/${this.options.name}`, err: asError(error).message },
        'cannot read the replicas’ key: concurrency reports between replicas stop until it can be read',
      );
    }
  }

  private async readOrCreate(): Promise<Buffer> {
    const { http, namespace, name } = this.options;
    const found = await getObject<KubeObject>(http, SECRET, namespace, name);
    if (found) return keyOf(found, name);
    // Field managers are at most 128 characters; pod names may be longer.
    const manager = `sless-replica-key-${createHash('sha256').update(this.options.identity).digest('hex').slice(0, 16)}`;
    try {
      const created = await http.request<KubeObject>('PATCH', objectPath(SECRET, namespace, name), {
        query: { fieldManager: manager, force: false },
        contentType: APPLY_PATCH,
        body: {
          apiVersion: 'v1',
          kind: 'Secret',
          metadata: { name, namespace, labels: { 'app.kubernetes.io/name': 'sless-controller' } },
          type: 'Opaque',
          data: { [REPLICA_KEY_FIELD]: randomBytes(MIN_KEY_BYTES).toString('base64') },
        },
      });
      this.options.logger.info({ secret: `${namespace}/${name}` }, 'created the replicas’ key');
      return keyOf(created, name);
    } catch (error) {
      // Another replica made it first: its key is the one.
      if (!isStatus(error, 409)) throw error;
      const winner = await getObject<KubeObject>(http, SECRET, namespace, name);
      if (!winner) throw new Error(`Secret ${name} was created and deleted at once`);
      return keyOf(winner, name);
    }
  }
}

function keyOf(secret: KubeObject, name: string): Buffer {
  const encoded = (secret as { data?: Record<string, string> }).data?.[REPLICA_KEY_FIELD] ?? '';
  const key = Buffer.from(encoded, 'base64');
  if (key.length < MIN_KEY_BYTES)
    throw new Error(`Secret ${name}: data.${REPLICA_KEY_FIELD} must hold at least ${MIN_KEY_BYTES} bytes`);
  return key;
}
