import { z } from 'zod';
import { intField, loadEnv } from '../config/env-fields';

const shape = {
  /** How long a stored response (and its chain's items) is kept; retrieve, chaining and input_items 404 after. @default 30 */
  retentionDays: z.coerce.number().positive().default(30),
  /** How often each server deletes expired responses. @default 60000 */
  sweepIntervalMs: intField(10).default(60_000),
};

const names = { retentionDays: 'RESPONSES_RETENTION_DAYS', sweepIntervalMs: 'RESPONSES_SWEEP_INTERVAL_MS' } as const;

export type ResponsesConfig = ReturnType<typeof loadResponsesConfig>;

/** The Responses API's state settings (docs/api-contract.md#responses-api), validated at boot. */
export function loadResponsesConfig(env: NodeJS.ProcessEnv = process.env) {
  return loadEnv('responses', shape, names, env);
}
