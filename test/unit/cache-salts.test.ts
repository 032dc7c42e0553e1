/**
 * Prefix-cache salts (control-plane/dispatch/cache-salts.ts): one per workspace, 256 bits from
 * the cluster's key, the same on every server that reads that key; and the gateway's refusal of
 * a client's own `cache_salt` (control-plane/openai/cache-salt-field.ts).
 */
import { randomBytes } from 'node:crypto';
import { CACHE_SALT_KEY_SETTING, CacheSalts } from '../../control-plane/dispatch/cache-salts';
import { AppError } from '../../control-plane/errors/app-error';
import { parseEmbeddingsRequest } from '../../control-plane/openai/embeddings-request';
import { parseTextRequest } from '../../control-plane/openai/text-request';

/** `cluster_settings` as PostgreSQL keeps it: the first INSERT of a name wins. */
function settingsTable() {
  const rows = new Map<string, string>();
  return {
    rows,
    async query(sql: string, parameters: string[]) {
      if (sql.startsWith('INSERT')) {
        if (!rows.has(parameters[0])) rows.set(parameters[0], parameters[1]);
        return [];
      }
      return rows.has(parameters[0]) ? [{ value: rows.get(parameters[0]) }] : [];
    },
  };
}

describe('CacheSalts', () => {
  it('gives each workspace its own 43-character base64url salt (256 bits), the same every time', () => {
    const salts = new CacheSalts(randomBytes(32));
    const salt = salts.of('ws_a');
    expect(salt).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(salts.of('ws_a')).toBe(salt);
    expect(salts.of('ws_b')).not.toBe(salt);
  });

  it('depends on the cluster key: the same workspace id under another key shares nothing with it', () => {
    expect(new CacheSalts(randomBytes(32)).of('ws_a')).not.toBe(new CacheSalts(randomBytes(32)).of('ws_a'));
    const key = randomBytes(32);
    expect(new CacheSalts(key).of('ws_a')).toBe(new CacheSalts(Buffer.from(key)).of('ws_a'));
  });

  it('loads the key the first server wrote, so every server of a cluster derives the same salts', async () => {
    const table = settingsTable();
    const first = await CacheSalts.load(table);
    const second = await CacheSalts.load(table);
    expect(table.rows.size).toBe(1);
    expect(table.rows.get(CACHE_SALT_KEY_SETTING)).toMatch(/^[0-9a-f]{64}$/);
    expect(second.of('ws_a')).toBe(first.of('ws_a'));
    // Another cluster (database) has another key.
    expect((await CacheSalts.load(settingsTable())).of('ws_a')).not.toBe(first.of('ws_a'));
  });

  it('refuses a stored key that is not 32 bytes', async () => {
    const table = settingsTable();
    table.rows.set(CACHE_SALT_KEY_SETTING, 'short');
    await expect(CacheSalts.load(table)).rejects.toThrow(/prefix_cache_salt_key must be 32 bytes/);
  });
});

describe('a client\'s cache_salt', () => {
  const refusal = (parse: () => unknown) => {
    let error: unknown;
    try {
      parse();
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(AppError);
    expect(error).toMatchObject({ code: 'invalid_request', param: 'cache_salt' });
  };
  const body = (fields: Record<string, unknown>) => Buffer.from(JSON.stringify(fields));
  const limits = { dimensions: 8, maxInputTokens: 64, maxBatchInputs: 16 };

  it('is refused on chat, completions and embeddings bodies, whatever its value (null included)', () => {
    for (const value of ['tenant-b', '', null, 7, { nested: true }]) {
      refusal(() => parseTextRequest(body({ messages: [{ role: 'user', content: 'hi' }], cache_salt: value }), 'chat.completions'));
      refusal(() => parseTextRequest(body({ prompt: 'hi', cache_salt: value }), 'completions'));
      refusal(() => parseEmbeddingsRequest(body({ input: 'hi', cache_salt: value }), 'acme/embed', limits));
    }
  });

  it('leaves bodies without it as they were', () => {
    expect(parseTextRequest(body({ messages: [{ role: 'user', content: 'hi' }], vendor: 1 }), 'chat.completions').fields).toEqual({ messages: [{ role: 'user', content: 'hi' }], vendor: 1 });
    expect(parseEmbeddingsRequest(body({ input: 'hi' }), 'acme/embed', limits).inputs).toEqual(['hi']);
  });
});
