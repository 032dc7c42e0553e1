import { OpenAiEngine } from '../../worker-agent/engines/openai-engine';
import { JobCancellation } from '../../worker-agent/job-cancellation';
import { startEchoEngine, type EchoEngine } from './support/echo-engine';

/** A batch line on an `openai` engine: below guests where priorities are scheduled, its body untouched where they are not. */
describe('the openai engine and batch lines', () => {
  let echo: EchoEngine;
  const engines: OpenAiEngine[] = [];

  beforeAll(async () => {
    echo = await startEchoEngine();
  });

  afterAll(async () => {
    for (const engine of engines) await engine.close();
    await echo.close();
  });

  const run = async (priorityScheduling: boolean) => {
    const engine = new OpenAiEngine({ url: echo.url, connections: 2, connectTimeoutMs: 1_000, healthIntervalMs: 60_000, priorityScheduling });
    engines.push(engine);
    const body = Buffer.from(JSON.stringify({ messages: [{ role: 'user', content: 'a batch line' }], max_tokens: 3 }));
    await engine.run({ jobId: 'line', kind: 'JOB_KIND_CHAT_COMPLETION', body, stream: false, includeUsage: false, model: 'catalog/model', batch: true },
      { chunk: () => undefined, output: () => undefined }, new JobCancellation());
    return echo.requests[echo.requests.length - 1];
  };

  test('"priority": 20 on an engine that schedules by priority (guests get 10, owners 0)', async () => {
    expect((await run(true)).body.priority).toBe(20);
  });

  test('no priority field on a FCFS engine, which would refuse one', async () => {
    expect((await run(false)).body).not.toHaveProperty('priority');
  });
});
