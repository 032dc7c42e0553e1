/** relayAgentLine: an agent's JSON record becomes fields of the server's log line, at its level; a plain line is the message. */
import { Writable } from 'node:stream';
import pino from 'pino';
import { relayAgentLine } from '../../control-plane/providers/agent-log-line';

function capture() {
  const lines: Array<Record<string, unknown>> = [];
  const logger = pino({ level: 'trace', base: { replicaId: 'rep_1' } }, new Writable({
    write(chunk, _encoding, callback) {
      lines.push(JSON.parse(String(chunk)));
      callback();
    },
  }));
  return { logger, lines };
}

describe('relayAgentLine', () => {
  test('a JSON record: its level, its message, its fields nested under `agent` (not a string), without the agent\'s time and pid', () => {
    const { logger, lines } = capture();
    relayAgentLine(logger, JSON.stringify({ level: 40, time: 1, pid: 77, hostname: 'h', name: 'worker-agent', agentId: 'agt_1', msg: 'stream closed', code: 14 }));
    expect(lines).toEqual([expect.objectContaining({
      level: 40, msg: 'stream closed', replicaId: 'rep_1', source: 'agent', agent: { name: 'worker-agent', agentId: 'agt_1', code: 14 },
    })]);
  });

  test.each([[10, 10], [25, 20], [30, 30], [55, 50], [60, 60], ['x', 30]])('agent level %p is logged at %p', (agentLevel, level) => {
    const { logger, lines } = capture();
    relayAgentLine(logger, JSON.stringify({ level: agentLevel, msg: 'm' }));
    expect(lines[0].level).toBe(level);
  });

  test('a plain line (a crash\'s last words), a broken record, or JSON that is no object: the text is the message, at warn', () => {
    const { logger, lines } = capture();
    relayAgentLine(logger, 'Segmentation fault (core dumped)');
    relayAgentLine(logger, '{"level":30,"msg":"cut');
    relayAgentLine(logger, '{'.repeat(5_000));
    expect(lines.map((line) => [line.level, line.msg, line.source])).toEqual([
      [40, 'Segmentation fault (core dumped)', 'agent'], [40, '{"level":30,"msg":"cut', 'agent'], [40, '{'.repeat(5_000), 'agent'],
    ]);
  });
});
