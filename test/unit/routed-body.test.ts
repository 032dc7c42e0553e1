import { IncomingMessage } from 'node:http';
import { Socket } from 'node:net';
import { readMultipart } from '../../gateway/http/multipart';
import { readBody, UNCOUNTED } from '../../gateway/http/read-body';
import { setRoutedBody } from '../../gateway/http/routed-body';

/** A request whose socket never sends: a read that went to the socket would never end. */
const request = () => new IncomingMessage(new Socket());

describe('bodies read before their handler (the workspace base URL)', () => {
  it('hands the read bytes to readBody once, and refuses them over the handler\'s own limit', async () => {
    const routed = request();
    setRoutedBody(routed, Buffer.from('{"model":"x"}'));
    await expect(readBody(routed, 1_000, UNCOUNTED)).resolves.toEqual(Buffer.from('{"model":"x"}'));
    const small = request();
    setRoutedBody(small, Buffer.alloc(100));
    await expect(readBody(small, 10, UNCOUNTED)).rejects.toMatchObject({ code: 'body_too_large' });
  });

  it('hands a read form to readMultipart, and keeps a form away from readBody', async () => {
    const routed = request();
    const form = { fields: { model: 'org/image' }, files: new Map() };
    setRoutedBody(routed, form);
    let settled = false;
    void readBody(routed, 1_000, UNCOUNTED).catch(() => undefined).finally(() => (settled = true));
    await new Promise((resolve) => setImmediate(resolve));
    expect(settled).toBe(false);
    await expect(readMultipart(routed, 1_000, UNCOUNTED)).resolves.toBe(form);
    routed.destroy();
  });
});
