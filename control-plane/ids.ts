import { randomBytes } from 'node:crypto';

/** Prefixed random ids (`dep_…`, `rep_…`): readable in logs, unguessable across workspaces. */
export function newId(prefix: string, bytes = 12): string {
  return `${prefix}_${randomBytes(bytes).toString('hex')}`;
}
