/**
 * The control plane's half of per-job flow control: what a job's consumer reports consumed
 * goes back to the agent as Credit, coalesced to one frame per half window (a short answer
 * costs no extra frame), only for streamed jobs of agents that said `flow_control`, and never
 * after the job ended or was canceled.
 */
import type { ControlFrame } from '../../proto/worker/v1';
import { AgentConnection, type ConnectionOwner } from '../../control-plane/dispatch/agent-connection';
import { deliverJobEvent } from '../../control-plane/dispatch/job-event-delivery';
import { Job, type DispatchRequest, type JobListener } from '../../control-plane/dispatch/job';

const WINDOW = 1024;

const listener: JobListener = { onChunk: () => {}, onOutput: () => {}, onCompleted: () => {}, onFailed: () => {} };
const owner: ConnectionOwner = { retry: () => {}, released: () => {} };

function request(overrides: Partial<DispatchRequest> = {}): DispatchRequest {
  return {
    deploymentId: 'dep', kind: 'JOB_KIND_CHAT_COMPLETION', body: Buffer.from('{}'), stream: true, includeUsage: false,
    model: 'm', deadlineUnixMs: 0, streamWindowBytes: WINDOW, ...overrides,
  };
}

/** An agent connection over a stream that records what it is sent; Assigns are flushed at once. */
function connection(flowControl: boolean): { connection: AgentConnection; frames: ControlFrame[] } {
  const frames: ControlFrame[] = [];
  const stream = { write: (frame: ControlFrame) => frames.push(frame) } as unknown as ConstructorParameters<typeof AgentConnection>[0];
  return { connection: new AgentConnection(stream, 'agt', 'rep', 'dep', 8, owner, 'ws', false, 'cpu', flowControl), frames };
}

function assignOf(frames: ControlFrame[]) {
  return frames.find((frame) => frame.frame === 'assign')!.assign!;
}

/** Assigns leave at the end of the event-loop turn (coalesced). */
const turn = () => new Promise((resolve) => setImmediate(resolve));

const credits = (frames: ControlFrame[]) => frames.filter((frame) => frame.frame === 'credit').map((frame) => frame.credit);

describe('job credit', () => {
  test('an agent with flow control gets the window in its Assign and one Credit per half window consumed', async () => {
    const { connection: agent, frames } = connection(true);
    const job = new Job('job_1', request(), listener, agent);
    agent.assign(job);
    await turn();
    job.consumed(100);
    expect(assignOf(frames).streamWindowBytes).toBe(WINDOW);
    job.consumed(300);
    expect(credits(frames)).toEqual([]);
    job.consumed(200);
    job.consumed(300);
    job.consumed(300);
    job.consumed(100);
    expect(credits(frames)).toEqual([{ jobId: 'job_1', bytes: 600 }, { jobId: 'job_1', bytes: 600 }]);
  });

  test('a response under half a window costs no Credit, and nothing is credited after the end or a cancel', async () => {
    const { connection: agent, frames } = connection(true);
    const short = new Job('short', request(), listener, agent);
    agent.assign(short);
    await turn();
    short.consumed(WINDOW / 2 - 1);
    deliverJobEvent(short, { jobId: 'short', event: 'completed', completed: { finishReason: 'stop' } });
    short.consumed(WINDOW);
    const canceled = new Job('canceled', request(), listener, agent);
    agent.assign(canceled);
    await turn();
    canceled.cancel('client_stalled');
    canceled.consumed(WINDOW);
    expect(frames.map((frame) => frame.frame)).toEqual(['assign', 'assign', 'cancel']);
  });

  test('an agent older than flow control gets no window and no Credit; non-streamed jobs get no window', async () => {
    const old = connection(false);
    const job = new Job('job_old', request(), listener, old.connection);
    old.connection.assign(job);
    await turn();
    job.consumed(WINDOW * 4);
    expect(assignOf(old.frames).streamWindowBytes).toBe(0);
    expect(credits(old.frames)).toEqual([]);

    const current = connection(true);
    const plain = new Job('job_plain', request({ stream: false }), listener, current.connection);
    current.connection.assign(plain);
    await turn();
    expect(assignOf(current.frames).streamWindowBytes).toBe(0);
  });

  test('a job without a window never credits; a relayed credit passes through as it came', async () => {
    const { connection: agent, frames } = connection(true);
    const unlimited = new Job('unlimited', request({ streamWindowBytes: 0 }), listener, agent);
    const relayed = new Job('relayed', request(), listener, agent);
    agent.assign(unlimited);
    agent.assign(relayed);
    await turn();
    unlimited.consumed(WINDOW * 10);
    relayed.credit(7);
    expect(credits(frames)).toEqual([{ jobId: 'relayed', bytes: 7 }]);
  });
});
