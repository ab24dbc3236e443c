/**
 * What the Function finalizer cleans: the things owner references cannot reach. Build Jobs live in
 * the controller's namespace and cross-namespace owner references never fire (seeds lesson 4); build
 * contexts live in S3. The workload is deleted explicitly too, since GC only runs where a
 * controller-manager does.
 */
import { DeleteObjectsCommand, ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import type { AnyResource } from '../../core/resources.js';
import type { KubeHttp } from './http.js';
import { LABEL_FUNCTION, LABEL_FUNCTION_NAMESPACE } from './labels.js';
import { deleteObject, type KubeObject, listObjects } from './objects.js';
import { JOB } from './resource-types.js';
import type { KubeWorkloads } from './workloads.js';

export class FunctionCleanup {
  private readonly options: {
    http: KubeHttp;
    s3: S3Client;
    bucket: string;
    controllerNamespace: string;
    workloads: KubeWorkloads;
  };

  constructor(options: FunctionCleanup['options']) {
    this.options = options;
  }

  async run(fn: AnyResource): Promise<void> {
    const { namespace, name } = fn.metadata;
    await this.options.workloads.remove(namespace, name);
    const jobs = await listObjects<KubeObject>(this.options.http, JOB, {
      namespace: this.options.controllerNamespace,
      labels: { [LABEL_FUNCTION]: name, [LABEL_FUNCTION_NAMESPACE]: namespace },
    });
    for (const job of jobs.items)
      await deleteObject(this.options.http, JOB, this.options.controllerNamespace, job.metadata.name);
    const prefix = `contexts/${namespace}/${name}/`;
    let token: string | undefined;
    do {
      const page = await this.options.s3.send(
        new ListObjectsV2Command({ Bucket: this.options.bucket, Prefix: prefix, ContinuationToken: token }),
      );
      const keys = (page.Contents ?? []).flatMap((o) => (o.Key ? [{ Key: o.Key }] : []));
      if (keys.length > 0)
        await this.options.s3.send(
          new DeleteObjectsCommand({ Bucket: this.options.bucket, Delete: { Objects: keys } }),
        );
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
  }
}
