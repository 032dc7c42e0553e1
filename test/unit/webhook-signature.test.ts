import { createHmac } from 'node:crypto';
import { signWebhookPayload, verifyWebhookSignature } from '../../control-plane/webhooks/webhook-signature';

describe('webhook signatures', () => {
  const secret = 'whsec_test_secret';
  const body = '{"id":"evt_1","type":"request.completed","data":{"id":"req_1"}}';
  const now = 1_790_000_000;

  it('is the hex HMAC-SHA256 of "<t>." + raw body, as docs/api-contract.md defines it', () => {
    const expected = createHmac('sha256', secret).update(`${now}.${body}`).digest('hex');
    expect(signWebhookPayload([secret], body, now)).toBe(`t=${now},v1=${expected}`);
  });

  it('verifies the raw body and refuses any change to body, secret, timestamp or signature', () => {
    const header = signWebhookPayload([secret], body, now);
    expect(verifyWebhookSignature(secret, header, body, 300, now)).toBe(true);
    expect(verifyWebhookSignature(secret, header, Buffer.from(body), 300, now)).toBe(true);
    expect(verifyWebhookSignature(secret, header, body.replace('req_1', 'req_2'), 300, now)).toBe(false);
    expect(verifyWebhookSignature(secret, header, JSON.stringify(JSON.parse(body), null, 1), 300, now)).toBe(false);
    expect(verifyWebhookSignature('whsec_other', header, body, 300, now)).toBe(false);
    expect(verifyWebhookSignature(secret, header.replace(`t=${now}`, `t=${now + 1}`), body, 300, now)).toBe(false);
    expect(verifyWebhookSignature(secret, header.slice(0, -1) + (header.endsWith('0') ? '1' : '0'), body, 300, now)).toBe(false);
    expect(verifyWebhookSignature(secret, undefined, body, 300, now)).toBe(false);
    expect(verifyWebhookSignature(secret, 'v1=abc', body, 300, now)).toBe(false);
  });

  it('refuses timestamps outside the tolerance (replays)', () => {
    const header = signWebhookPayload([secret], body, now);
    expect(verifyWebhookSignature(secret, header, body, 300, now + 300)).toBe(true);
    expect(verifyWebhookSignature(secret, header, body, 300, now + 301)).toBe(false);
    expect(verifyWebhookSignature(secret, header, body, 300, now - 301)).toBe(false);
  });

  it('during a rotation carries one v1 per secret: receivers with either secret accept', () => {
    const header = signWebhookPayload(['whsec_new', 'whsec_old'], body, now);
    expect(header.split(',')).toHaveLength(3);
    expect(verifyWebhookSignature('whsec_new', header, body, 300, now)).toBe(true);
    expect(verifyWebhookSignature('whsec_old', header, body, 300, now)).toBe(true);
    expect(verifyWebhookSignature('whsec_neither', header, body, 300, now)).toBe(false);
  });
});
