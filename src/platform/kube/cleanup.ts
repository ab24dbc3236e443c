/**
 * What a deleted Function leaves on kube beyond its workload (which the platform removes): the things
 * owner references cannot reach. Build Jobs live in the controller's namespace and the garbage
 * collector ignores owner references across namespaces; build contexts live in S3, images in the
 * registry. The Function reconciler runs this before it releases the finalizer.
 */
import { DeleteObjectsCommand, ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import type { FunctionLeftovers } from '../../core/interfaces.js';
import type { KubeBuildArchive } from './build/build-archive.js';

export class KubeFunctionLeftovers implements FunctionLeftovers {
  private readonly options: {
    s3: S3Client;
    bucket: string;
    /** Removes each build whole: Job, pods, context and (where enabled) registry image. */
    archive: KubeBuildArchive;
  };

  constructor(options: KubeFunctionLeftovers['options']) {
    this.options = options;
  }

  async remove(namespace: string, name: string): Promise<void> {
    const builds = await this.options.archive.list();
    const mine = (b: { namespace: string; name: string }) => b.namespace === namespace && b.name === name;
    const others = builds.filter((b) => !mine(b));
    for (const build of builds.filter(mine)) await this.options.archive.remove(build, others);
    // Contexts whose Job was never created (the controller stopped in between) have no build to list.
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
