import { waitFor } from '../../support/test-server';

/** Small HTTP helpers for the media endpoints of one deployment. */
export class MediaClient {
  constructor(readonly baseUrl: string, readonly apiKey: string) {}

  async post(path: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: any; headers: Headers }> {
    const response = await fetch(`${this.baseUrl}${path}`, {
      method: 'POST', headers: { authorization: `Bearer ${this.apiKey}`, 'content-type': 'application/json', ...headers }, body: JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : null, headers: response.headers };
  }

  async get(path: string): Promise<{ status: number; body: any; headers: Headers }> {
    const response = await fetch(`${this.baseUrl}${path}`, { headers: { authorization: `Bearer ${this.apiKey}` }, redirect: 'manual' });
    const text = await response.text();
    let body: unknown = null;
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      body = text;
    }
    return { status: response.status, body, headers: response.headers };
  }

  /** Polls the request record until `done` says so. */
  async waitForRecord(id: string, done: (record: any) => boolean = (record) => ['succeeded', 'failed', 'canceled'].includes(record.status), timeoutMs = 20_000): Promise<any> {
    let last: any;
    await waitFor(async () => {
      last = (await this.get(`/requests/${id}`)).body;
      return done(last);
    }, timeoutMs, `request ${id} to settle`);
    return last;
  }
}
