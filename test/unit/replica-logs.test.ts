/** ReplicaLogs: each replica's recent agent and engine lines, scrubbed, bounded in lines, replicas and rate, and isolated by workspace. */
import { ControlPlaneEvents } from '../../control-plane/events/control-plane-events';
import { readAgentLogLine } from '../../control-plane/replicas/agent-log-record';
import { scrubLogText } from '../../control-plane/replicas/log-line-scrub';
import { ReplicaLogs, type ReplicaLogLine } from '../../control-plane/replicas/replica-logs';

const OWNER = { replicaId: 'rep_a', deploymentId: 'dep_1', workspaceId: 'ws_1' };
const record = (fields: Record<string, unknown>) => JSON.stringify({ level: 30, time: 1, pid: 7, hostname: 'host-9', name: 'worker-agent', agentId: 'agt_1', ...fields });

function logsAt(options: ConstructorParameters<typeof ReplicaLogs>[1] = {}) {
  const clock = { now: 1_000_000 };
  const events = new ControlPlaneEvents();
  const emitted: ReplicaLogLine[] = [];
  events.on('replicaLogLine', (line) => emitted.push(line));
  return { logs: new ReplicaLogs(events, options, () => clock.now), clock, emitted };
}

describe('reading an agent line', () => {
  test('a record: its level, its message, the allowed fields; the control-plane address, a model path and a stack are left out', () => {
    const line = readAgentLogLine(record({ msg: 'worker agent starting', controlPlane: '10.1.2.3:50051', engine: 'cpu', maxConcurrency: 4 }), 400);
    expect(line).toEqual({ level: 'info', source: 'agent', message: 'worker agent starting engine=cpu maxConcurrency=4' });
    const loaded = readAgentLogLine(record({ component: 'engine', msg: 'llama.cpp model loaded', modelPath: '/srv/models/secret-name.gguf', contextSize: 4096 }), 400);
    expect(loaded).toEqual({ level: 'info', source: 'engine', message: 'llama.cpp model loaded contextSize=4096' });
    const failed = readAgentLogLine(record({
      level: 50, msg: 'engine call failed unexpectedly', jobId: 'job_1',
      err: { type: 'Error', message: 'connect ECONNREFUSED 10.0.0.5:8000', stack: 'Error: x\n    at /opt/platform/dist/worker-agent/engines/openai-engine.js:10:5' },
    }), 400);
    expect(failed.level).toBe('error');
    expect(failed.message).toBe('engine call failed unexpectedly error: connect ECONNREFUSED <address> jobId=job_1');
  });

  test('plain lines: the agent\'s last words are the agent\'s, anything else (native output) the engine\'s', () => {
    expect(readAgentLogLine('worker agent: engine cpu failed to start: no such file /home/ops/models/m.gguf', 400))
      .toEqual({ level: 'warn', source: 'agent', message: 'worker agent: engine cpu failed to start: no such file …/m.gguf' });
    expect(readAgentLogLine('ggml_cuda_init: found 1 CUDA devices', 400)).toMatchObject({ source: 'engine', message: 'ggml_cuda_init: found 1 CUDA devices' });
  });

  test('scrubbing: URLs, addresses, paths, tokens and credentials go; times, counts and ids stay', () => {
    const text = 'dial http://engine.internal:8000/v1 from 192.168.1.4 and [::1]:50051 via cp.internal:50051 '
      + 'token=abc123 Authorization: Bearer xyz key mk-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA join jt-BBBBBBBBBBBBBBBBBBBB '
      + `blob ${'q'.repeat(40)} at 12:30 replica rep_0123456789abcdef01234567 file C:\\Users\\me\\model.gguf`;
    expect(scrubLogText(text, 1_000)).toBe('dial <url> from <address> and <address> via <address> token=<secret> Authorization: Bearer <secret> '
      + 'key <secret> join <secret> blob <redacted> at 12:30 replica rep_0123456789abcdef01234567 file …/model.gguf');
    expect(scrubLogText('a\u0000b\u001b[31mred\n next', 1_000)).toBe('a b [31mred next');
    expect(scrubLogText('x'.repeat(20) + ' ' + 'y'.repeat(20), 10)).toBe('xxxxxxxxx…');
  });
});

describe('ReplicaLogs', () => {
  test('keeps the newest lines per replica, emits each, and numbers them', () => {
    const { logs, clock, emitted } = logsAt({ linesPerReplica: 3, burstLines: 100 });
    for (let i = 1; i <= 5; i += 1) {
      clock.now += 1;
      logs.append(OWNER, record({ msg: `line ${i}` }));
    }
    expect(logs.recent('ws_1', 'dep_1', { limit: 10 }).map((line) => [line.seq, line.message])).toEqual([[3, 'line 3'], [4, 'line 4'], [5, 'line 5']]);
    expect(emitted.map((line) => line.seq)).toEqual([1, 2, 3, 4, 5]);
    expect(logs.recent('ws_1', 'dep_1', { limit: 2 }).map((line) => line.message)).toEqual(['line 4', 'line 5']);
  });

  test('another workspace, another deployment or another replica sees none of them', () => {
    const { logs } = logsAt();
    logs.append(OWNER, 'one');
    logs.append({ ...OWNER, replicaId: 'rep_b' }, 'two');
    expect(logs.recent('ws_2', 'dep_1', { limit: 10 })).toEqual([]);
    expect(logs.recent('ws_1', 'dep_2', { limit: 10 })).toEqual([]);
    expect(logs.recent('ws_1', 'dep_1', { replicaId: 'rep_b', limit: 10 }).map((line) => line.message)).toEqual(['two']);
    expect(logs.recent('ws_1', 'dep_1', { limit: 10 })).toHaveLength(2);
  });

  test('an agent printing in a loop is held to its rate; the lines it lost are counted in the next line kept', () => {
    const { logs, clock } = logsAt({ linesPerSecond: 10, burstLines: 5 });
    for (let i = 0; i < 20; i += 1) logs.append(OWNER, `spam ${i}`);
    expect(logs.recent('ws_1', 'dep_1', { limit: 100 }).map((line) => line.message)).toEqual(['spam 0', 'spam 1', 'spam 2', 'spam 3', 'spam 4']);
    clock.now += 1_000;
    logs.append(OWNER, 'after a second');
    const tail = logs.recent('ws_1', 'dep_1', { limit: 2 });
    expect(tail.map((line) => [line.level, line.message])).toEqual([
      ['warn', '15 line(s) not kept: the agent printed more than 10 a second'], ['warn', 'after a second'],
    ]);
  });

  test('keeps at most maxReplicas replicas, forgetting the one written to least recently', () => {
    const { logs } = logsAt({ maxReplicas: 2 });
    logs.append({ ...OWNER, replicaId: 'rep_1' }, 'a');
    logs.append({ ...OWNER, replicaId: 'rep_2' }, 'b');
    logs.append({ ...OWNER, replicaId: 'rep_1' }, 'c');
    logs.append({ ...OWNER, replicaId: 'rep_3' }, 'd');
    expect(logs.size).toBe(2);
    expect(logs.recent('ws_1', 'dep_1', { limit: 10 }).map((line) => line.replicaId).sort()).toEqual(['rep_1', 'rep_1', 'rep_3']);
  });

  test('a peer\'s line is kept and emitted as it came', () => {
    const { logs, emitted } = logsAt();
    const line: ReplicaLogLine = { ...OWNER, seq: 9, at: new Date(5), level: 'info', source: 'engine', message: 'from a peer' };
    logs.mirror(line);
    expect(emitted).toEqual([line]);
    expect(logs.recent('ws_1', 'dep_1', { limit: 10 })).toEqual([line]);
  });
});
