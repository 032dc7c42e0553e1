import type { Logger } from 'pino';
import { parseAgentRecord } from '../replicas/agent-log-record';

/** pino's level numbers and the method that logs at each. */
const LEVELS: ReadonlyArray<[number, 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal']> = [
  [60, 'fatal'], [50, 'error'], [40, 'warn'], [30, 'info'], [20, 'debug'], [10, 'trace'],
];
/** Fields of the agent's own record the server's logger writes again for itself. */
const OWN_FIELDS = new Set(['level', 'time', 'pid', 'hostname', 'msg']);

/**
 * One line a local agent wrote, in the server's log: a JSON record of the agent's logger comes
 * out at its own level with its fields nested under `agent` (a log shipper reads them as fields,
 * not as JSON inside a string) and its message as the message; any other line (a crash's last
 * words, a native abort) is the message itself, at `warn`.
 */
export function relayAgentLine(log: Logger, text: string): void {
  const record = text.startsWith('{') ? parseAgentRecord(text) : null;
  if (!record) {
    log.warn({ source: 'agent' }, text);
    return;
  }
  const level = typeof record.level === 'number' ? record.level : 30;
  const method = LEVELS.find(([threshold]) => level >= threshold)?.[1] ?? 'info';
  const agent: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(record)) if (!OWN_FIELDS.has(name)) agent[name] = value;
  log[method]({ source: 'agent', agent }, typeof record.msg === 'string' ? record.msg : 'agent record');
}
