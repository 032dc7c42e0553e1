/**
 * A stall of the server's own event loop (a long GC pause, a blocking call) must not be taken
 * for silent agents: their heartbeats arrived meanwhile and wait in the sockets. The server
 * runs in this process, so the test stalls it for longer than the silence limit
 * (3 heartbeat intervals: 3 s here) while a stream is in flight.
 */
import fs from 'node:fs';
import { deploymentForSuite } from '../support/test-server';

describe('a stalled server event loop', () => {
  const served = deploymentForSuite({ controlPlane: { localAgentEnv: { WORKER_CPU_TEST_CONTROLS: 'true' } } });

  it('keeps its agents: the stream in flight finishes whole on the same replica', async () => {
    const replicas = () => served.test.server.controlPlane.dataSource.query(
      `SELECT id, status FROM replicas WHERE deployment_id = $1 ORDER BY created_at`, [served.deployment.id]) as Promise<Array<{ id: string; status: string }>>;
    const before = await replicas();
    const response = await fetch(`${served.deployment.baseUrl}/chat/completions`, {
      method: 'POST', headers: { authorization: `Bearer ${served.workspace.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'slowly' }], max_tokens: 10, stream: true, cpu_engine: { tokens_per_second: 5 } }),
    });
    const reader = response.body!.getReader();
    let text = new TextDecoder().decode((await reader.read()).value);

    // In an I/O callback: after it the loop runs its overdue timers (the silence sweep) before
    // it polls the sockets again, where the heartbeats sent during the stall are waiting.
    await new Promise<void>((resolve) => fs.readFile(__filename, () => {
      const until = Date.now() + 3_500;
      while (Date.now() < until) { /* the stall */ }
      resolve();
    }));

    for (let part = await reader.read(); !part.done; part = await reader.read()) text += new TextDecoder().decode(part.value);
    expect(text).not.toContain('"error"');
    expect(text).toContain('"finish_reason":"length"');
    expect(text.trim().endsWith('data: [DONE]')).toBe(true);
    expect(await replicas()).toEqual(before);
  });
});
