import { randomUUID } from 'node:crypto';

/**
 * Ids of responses and their items (`resp_…`, `msg_…`, `fc_…`): 32 random hex digits (122 bits)
 * from randomUUID, which draws from a cached entropy pool; ids.ts's randomBytes is a call into
 * the system per id, and a turn makes several (0.8 % of the gateway's CPU under load).
 */
export function itemId(prefix: string): string {
  return `${prefix}_${randomUUID().replace(/-/g, '')}`;
}
