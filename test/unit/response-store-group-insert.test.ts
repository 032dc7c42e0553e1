import type { DataSource } from 'typeorm';
import { ResponseRecord } from '../../control-plane/responses/response-record.entity';
import { ResponseStore } from '../../control-plane/responses/response-store';

function record(id: string): ResponseRecord {
  return Object.assign(new ResponseRecord(), {
    id, workspaceId: 'ws', deploymentId: 'dep', apiKeyId: 'key', model: 'm', status: 'completed', background: false, previousResponseId: null,
    settings: {}, history: [], input: [], output: [], usage: null, error: null, incompleteDetails: null,
    createdAt: new Date(0), completedAt: new Date(0), expiresAt: new Date(1),
  });
}

describe('ResponseStore inserts', () => {
  it('puts the inserts that arrive while one is in flight into one statement, and fails only that statement\'s callers', async () => {
    const statements: { rows: number; values: unknown[] }[] = [];
    let release: () => void = () => {};
    let fail = false;
    const dataSource = {
      getRepository: () => ({}),
      query: (sql: string, values: unknown[]) => {
        statements.push({ rows: (sql.match(/\(\$\d+/g) ?? []).length, values });
        if (fail) return Promise.reject(new Error('database down'));
        return new Promise<void>((resolve) => (release = resolve));
      },
    } as unknown as DataSource;
    const store = new ResponseStore(dataSource);
    const first = store.insert(record('resp_1'));
    const rest = [store.insert(record('resp_2')), store.insert(record('resp_3')), store.insert(record('resp_4'))];
    expect(statements.map((statement) => statement.rows)).toEqual([1]);
    release();
    await first;
    await new Promise((resolve) => setImmediate(resolve));
    expect(statements.map((statement) => statement.rows)).toEqual([1, 3]);
    expect(statements[1].values.filter((value) => typeof value === 'string' && value.startsWith('resp_'))).toEqual(['resp_2', 'resp_3', 'resp_4']);
    fail = true;
    release();
    await Promise.all(rest);
    await expect(store.insert(record('resp_5'))).rejects.toThrow('database down');
  });
});
