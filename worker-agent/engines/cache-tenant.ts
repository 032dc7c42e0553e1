import type { EngineJob } from './engine';

/**
 * Whose prefix cache a job may read and extend: its salt (`Assign.cache_salt`, one per
 * workspace). Jobs of different tenants never reuse each other's cached prefix, so neither
 * `cached_tokens` nor the time to first token tells one tenant what another sent.
 *
 * A guest's job without a salt (from a control plane older than the field) is a tenant of its
 * own: it reuses nothing and leaves nothing another job can reuse. Other unsalted jobs share the
 * tenant '' (as every job did before salts; no salted job is ever in it).
 */
export function cacheTenantOf(job: Pick<EngineJob, 'cacheSalt' | 'guest' | 'jobId'>): string {
  if (job.cacheSalt) return job.cacheSalt;
  return job.guest ? `job:${job.jobId}` : '';
}
