import type { DataSource, EntityManager } from 'typeorm';

/** deadlock_detected and serialization_failure: PostgreSQL rolled the transaction back, so running it again is safe. */
const RETRYABLE = new Set(['40P01', '40001']);
const ATTEMPTS = 4;

/**
 * Runs `work` in a transaction and runs it again when PostgreSQL aborted it as a deadlock
 * victim. Money paths lock workspace rows in id order, but metering, settlement and top-ups
 * of several workspaces can still meet in an order the planner chose; losing such a race
 * must not fail a guest's request or a top-up.
 */
export async function retryTransaction<T>(dataSource: DataSource, work: (manager: EntityManager) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await dataSource.transaction(work);
    } catch (error) {
      const code = (error as { code?: unknown; driverError?: { code?: unknown } }).driverError?.code ?? (error as { code?: unknown }).code;
      if (attempt >= ATTEMPTS || typeof code !== 'string' || !RETRYABLE.has(code)) throw error;
      await new Promise((resolve) => setTimeout(resolve, 5 * attempt + Math.random() * 20));
    }
  }
}
