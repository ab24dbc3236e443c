/** Reading batch/v1 Job status, for build Jobs and run Jobs alike. */
import type { KubeObject } from './objects.js';

export interface JobCondition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
}

export interface JobStatus {
  startTime?: string;
  completionTime?: string;
  succeeded?: number;
  failed?: number;
  conditions?: JobCondition[];
}

export function jobStatus(job: KubeObject): JobStatus {
  return (job.status as JobStatus | undefined) ?? {};
}

export function jobCondition(job: KubeObject, type: 'Complete' | 'Failed'): JobCondition | undefined {
  return jobStatus(job).conditions?.find((c) => c.type === type && c.status === 'True');
}

export function jobSucceeded(job: KubeObject): boolean {
  return jobCondition(job, 'Complete') !== undefined || (jobStatus(job).succeeded ?? 0) > 0;
}

export function jobFailed(job: KubeObject): boolean {
  return jobCondition(job, 'Failed') !== undefined || (jobStatus(job).failed ?? 0) > 0;
}
