import pino from 'pino';
import { UsageRecorder, type UsageInput } from '../../control-plane/usage/usage-recorder';
import { dataSourceForSuite } from '../support/test-database';

/**
 * A job's terminal event can come after the server began to stop (a canceled job the engine
 * ends late). Its usage record must still be written while the database is open, and must never
 * leave a retry timer behind that keeps the process alive (it did: jest could not exit).
 */
describe('usage records at shutdown', () => {
  const database = dataSourceForSuite();
  const logged: Array<{ msg: string; record?: UsageInput }> = [];
  const logger = pino({ level: 'error' }, { write: (line: string) => void logged.push(JSON.parse(line)) });

  const record = (deploymentId: string): UsageInput => ({
    workspaceId: 'ws_1', apiKeyId: 'key_1', deploymentId, replicaId: null, endpoint: 'chat.completions', status: 'succeeded', stream: false,
    promptTokens: 3, completionTokens: 4, totalTokens: 7, latencyMs: 12, createdAt: new Date(),
  });
  const written = async () => (await database.dataSource.query('SELECT deployment_id FROM usage_records ORDER BY id')).map((row: any) => row.deployment_id);

  it('writes what is pending at stop, and a record that arrives after stop at once, with no timer left', async () => {
    const recorder = new UsageRecorder(database.dataSource, 60_000, logger);
    recorder.record(record('dep_before'));
    await recorder.stop();
    expect(await written()).toEqual(['dep_before']);
    const timersBefore = process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;
    recorder.record(record('dep_late'));
    expect(process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length).toBe(timersBefore);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await written()).toEqual(['dep_before', 'dep_late']);
  });

  it('logs a record it can no longer write (the database is closed), and schedules nothing', async () => {
    const recorder = new UsageRecorder(database.dataSource, 10, logger);
    await recorder.stop();
    await database.dataSource.destroy();
    const timersBefore = process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;
    recorder.record(record('dep_after_close'));
    expect(process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length).toBe(timersBefore);
    expect(logged).toEqual([expect.objectContaining({ msg: 'usage record arrived after shutdown and could not be written', record: expect.objectContaining({ deploymentId: 'dep_after_close' }) })]);
  });
});
