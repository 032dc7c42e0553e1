import { parseJsonText } from '../../common/json-nesting';
import { scrubLogText } from './log-line-scrub';

export type ReplicaLogLevel = 'debug' | 'info' | 'warn' | 'error';
/** `agent`: the worker agent's own records; `engine`: its engine's records and anything printed outside the agent's logger (native code). */
export type ReplicaLogSource = 'agent' | 'engine';

/** One line an agent printed, as a workspace may read it. */
export interface AgentLogRecord {
  readonly level: ReplicaLogLevel;
  readonly source: ReplicaLogSource;
  readonly message: string;
}

/**
 * Fields of an agent record shown after its message (`key=value`): counts, states and names of
 * things the workspace already sees. Everything else is left out, whatever its value: the
 * record's `controlPlane` address, a local model's `modelPath`, an error's stack, and fields a
 * later agent version adds, until someone decides they are safe to show.
 */
const SHOWN_FIELDS = [
  'engine', 'model', 'maxConcurrency', 'inFlight', 'queued', 'reason', 'detail', 'exitCode', 'signal', 'how', 'delayMs', 'code',
  'rejection', 'priorityScheduling', 'contextSize', 'parallel', 'cachedSequences', 'threads', 'chatFormat', 'loadMs', 'version',
  'jobId', 'errorName', 'guest', 'ours', 'theirs',
] as const;

/**
 * An agent's line (stdout or stderr of a local agent) read for its replica's log: a JSON record
 * of the agent's pino logger gives its level, message, allowed fields and, for an error, the
 * error's message (never its stack); its `component: "engine"` (the logger the agent gives its
 * engine) makes it an engine line. A plain line is the agent's when it says so ("worker agent…",
 * its last words before exiting), else the engine's (native code printing on its own). Either is
 * scrubbed (log-line-scrub.ts).
 */
export function readAgentLogLine(text: string, maxChars: number): AgentLogRecord {
  const record = text.startsWith('{') ? parseAgentRecord(text) : null;
  if (!record) {
    return { level: 'warn', source: /^worker[ -]agent\b/i.test(text) ? 'agent' : 'engine', message: scrubLogText(text, maxChars) };
  }
  const parts: string[] = [typeof record.msg === 'string' ? record.msg : 'agent record'];
  const error = record.err as { message?: unknown; type?: unknown } | undefined;
  if (error && typeof error === 'object' && typeof error.message === 'string') parts.push(`error: ${error.message}`);
  for (const name of SHOWN_FIELDS) {
    const value = record[name];
    if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') parts.push(`${name}=${value}`);
  }
  return { level: levelOf(record.level), source: record.component === 'engine' ? 'engine' : 'agent', message: scrubLogText(parts.join(' '), maxChars) };
}

function levelOf(level: unknown): ReplicaLogLevel {
  const number = typeof level === 'number' ? level : 30;
  return number >= 50 ? 'error' : number >= 40 ? 'warn' : number >= 30 ? 'info' : 'debug';
}

/** A line of the agent's output as its JSON log record (pino's), or null for a plain line. */
export function parseAgentRecord(text: string): Record<string, unknown> | null {
  try {
    const parsed = parseJsonText(text);
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? parsed as Record<string, unknown> : null;
  } catch {
    return null;
  }
}
