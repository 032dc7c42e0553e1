import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { linkSignature } from '../../control-plane/storage/link-signature';
import { LocalObjectStore } from '../../control-plane/storage/local-object-store';
import { startTestServer, type TestServer } from '../support/test-server';
import { verbatim } from './support/security-client';

const BUCKET = 'outputs';

/**
 * The local store's signed links on the whole server (`/files/<bucket>/<key>?expires&method&signature`):
 * the HMAC is the only authorization, so any change to the signature, expiry, method, bucket or
 * key is refused, and no path (traversal, encodings, absolute paths, backslashes), not even one
 * carrying a valid signature, reaches a file outside the bucket.
 */
describe('signed file links', () => {
  let test: TestServer;
  let store: LocalObjectStore;
  let signingKey: Buffer;
  /** Files outside the bucket that no link may ever serve; name → content. */
  const sentinels = new Map<string, string>();
  const objects = {} as { mine: string; mineOther: string; theirs: string };
  const bytes = { mine: `mine-${randomBytes(8).toString('hex')}`, mineOther: `mine-other-${randomBytes(8).toString('hex')}`, theirs: `theirs-${randomBytes(8).toString('hex')}` };

  /** A link as path + query, the way it reaches the server. */
  const relative = (link: string) => {
    const url = new URL(link);
    return `${url.pathname}${url.search}`;
  };
  const query = (link: string) => new URL(link).search;
  const get = (pathAndQuery: string, method = 'GET', body?: Buffer) => verbatim(test.url, method, pathAndQuery, body);
  /** Every sentinel and every object's content that shows up in `text`. */
  const exposed = (text: string, allowed: string[] = []) => [...sentinels.values(), ...Object.values(bytes)].filter((value) => !allowed.includes(value) && text.includes(value));
  const tree = (directory: string): string[] => fs.readdirSync(directory, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(directory, entry.name);
    return entry.isDirectory() ? [`${full}/`, ...tree(full)] : [`${full}:${fs.readFileSync(full).toString('base64')}`];
  }).sort();

  beforeAll(async () => {
    test = await startTestServer();
    store = test.server.controlPlane.managedStore as LocalObjectStore;
    expect(store).toBeInstanceOf(LocalObjectStore);
    signingKey = Buffer.from(fs.readFileSync(path.join(test.dataDir, 'storage-signing.key'), 'utf8').trim(), 'hex');
    const mine = await test.createWorkspace();
    const theirs = await test.createWorkspace();
    objects.mine = `${mine.workspaceId}/req_${'a'.repeat(24)}/0.png`;
    objects.mineOther = `${mine.workspaceId}/req_${'a'.repeat(24)}/1.png`;
    objects.theirs = `${theirs.workspaceId}/req_${'b'.repeat(24)}/0.png`;
    for (const name of ['mine', 'mineOther', 'theirs'] as const) await store.put(objects[name], Buffer.from(bytes[name]), 'image/png');

    // Secrets and files beside the bucket: the server's own keys, the objects root, the content-type sidecars.
    for (const file of ['storage-signing.key', 'secrets-encryption.key']) sentinels.set(file, fs.readFileSync(path.join(test.dataDir, file), 'utf8').trim());
    const plant = (relativePath: string) => {
      const content = `sentinel ${relativePath} ${randomBytes(8).toString('hex')}`;
      fs.mkdirSync(path.dirname(path.join(test.dataDir, relativePath)), { recursive: true });
      fs.writeFileSync(path.join(test.dataDir, relativePath), content);
      sentinels.set(relativePath, content);
    };
    plant('outside.txt');
    plant('objects/root.txt');
    plant('objects/other-bucket/file.txt');
  });

  afterAll(async () => {
    await test?.stop();
  });

  it('a valid link serves its object, GET and HEAD (the control)', async () => {
    const answer = await get(relative(await store.presignGet(objects.mine, 60)));
    expect(answer).toEqual({ status: 200, body: bytes.mine });
    const head = await get(relative(await store.presignGet(objects.mine, 60)), 'HEAD');
    expect(head.status).toBe(200);
  });

  /** [what, path and query to send]: each 403 permission_denied, serving nothing. */
  const tampered = async (): Promise<Array<[string, string]>> => {
    const link = await store.presignGet(objects.mine, 600);
    const url = new URL(link);
    const signature = url.searchParams.get('signature')!;
    const expires = Number(url.searchParams.get('expires'));
    const withParams = (changes: Record<string, string | null>, pathname = url.pathname) => {
      const params = new URLSearchParams(url.search);
      for (const [name, value] of Object.entries(changes)) {
        if (value === null) params.delete(name);
        else params.set(name, value);
      }
      return `${pathname}?${params}`;
    };
    const expiredStore = new LocalObjectStore({ rootDir: path.join(test.dataDir, 'objects'), bucket: BUCKET, publicUrl: () => test.url, signingKey, now: () => Date.now() - 7_200_000 });
    const foreignStore = new LocalObjectStore({ rootDir: path.join(test.dataDir, 'objects'), bucket: BUCKET, publicUrl: () => test.url, signingKey: randomBytes(32) });
    const theirLink = await store.presignGet(objects.theirs, 600);
    const flipped = signature.slice(0, -1) + (signature.endsWith('0') ? '1' : '0');
    return [
      ['signature with one hex digit changed', withParams({ signature: flipped })],
      ['signature removed', withParams({ signature: null })],
      ['signature empty', withParams({ signature: '' })],
      ['signature truncated', withParams({ signature: signature.slice(0, 32) })],
      ['signature in upper case and one digit changed', withParams({ signature: flipped.toUpperCase() })],
      ['signature given twice', `${relative(link)}&signature=${signature}`],
      ['the signature of another object\'s link', withParams({ signature: new URL(theirLink).searchParams.get('signature')! })],
      ['expiry one second later', withParams({ expires: String(expires + 1) })],
      ['expiry far in the future', withParams({ expires: '9999999999' })],
      ['expiry removed', withParams({ expires: null })],
      ['expiry not a number', withParams({ expires: `${expires}.0` })],
      ['expiry negative', withParams({ expires: '-1' })],
      ['expiry given twice', `${relative(link)}&expires=${expires}`],
      ['a validly signed link that has expired', relative(await expiredStore.presignGet(objects.mine, 60))],
      ['a link signed with another key', relative(await foreignStore.presignGet(objects.mine, 60))],
      ['method changed to PUT', withParams({ method: 'PUT' })],
      ['method removed', withParams({ method: null })],
      ['a PUT link used to read', relative((await store.presignPut(objects.mine, 'image/png', 600)).url)],
      ['key changed to another object of the same request', `${url.pathname.replace('/0.png', '/1.png')}${url.search}`],
      ['key changed to another workspace\'s object', `/files/${BUCKET}/${objects.theirs}${url.search}`],
      ['key with another workspace\'s id, same request path', `${url.pathname.replace(objects.mine.split('/')[0], objects.theirs.split('/')[0])}${url.search}`],
      ['key with a character appended', `${url.pathname}x${url.search}`],
      ['bucket changed', `${url.pathname.replace(`/files/${BUCKET}/`, '/files/other-bucket/')}${url.search}`],
      ['the content-type sidecars (_meta)', `/files/_meta/${BUCKET}/${objects.mine}.json${url.search}`],
      ['the staging directory (_tmp)', `/files/_tmp/x${url.search}`],
    ];
  };

  it('refuses every change to the signature, expiry, method, bucket or key with 403, serving nothing', async () => {
    const cases = await tampered();
    const outcomes = [];
    for (const [what, pathAndQuery] of cases) {
      for (const method of ['GET', 'HEAD']) {
        const answer = await get(pathAndQuery, method);
        outcomes.push({ what, method, status: answer.status, code: answer.body ? JSON.parse(answer.body).error.code : 'permission_denied', exposed: exposed(answer.body) });
      }
    }
    expect(outcomes).toEqual(cases.flatMap(([what]) => ['GET', 'HEAD'].map((method) => ({ what, method, status: 403, code: 'permission_denied', exposed: [] }))));
  });

  /** Paths that try to leave the bucket, with my link's (valid for another key) query. */
  const traversals = (search: string): Array<[string, string]> => {
    const [workspace, request] = objects.mine.split('/');
    const their = objects.theirs;
    return [
      ['.. into another workspace', `/files/${BUCKET}/${workspace}/../${their}`],
      ['%2e%2e into another workspace', `/files/${BUCKET}/${workspace}/%2e%2e/${their}`],
      ['%2E%2E upper-case encoding', `/files/${BUCKET}/${workspace}/%2E%2E/${their}`],
      ['.%2e mixed', `/files/${BUCKET}/${workspace}/.%2e/${their}`],
      ['%2e%2e%2f with an encoded slash', `/files/${BUCKET}/${workspace}/${request}/%2e%2e%2f%2e%2e%2f${their}`],
      ['%252e%252e double encoding', `/files/${BUCKET}/${workspace}/%252e%252e/${their}`],
      ['.. out of the bucket to the objects root', `/files/${BUCKET}/../root.txt`],
      ['.. out of the data directory\'s objects', `/files/${BUCKET}/../../outside.txt`],
      ['.. to the server\'s signing key', `/files/${BUCKET}/../../storage-signing.key`],
      ['%2e%2e to the server\'s encryption key', `/files/${BUCKET}/%2e%2e/%2e%2e/secrets-encryption.key`],
      ['.. as the bucket', '/files/../outside.txt'],
      ['%2e%2e as the bucket', '/files/%2e%2e/outside.txt'],
      ['%2e%2e%2f in the bucket segment', '/files/%2e%2e%2f%2e%2e%2foutside.txt/x'],
      ['an absolute key (double slash)', `/files/${BUCKET}//etc/passwd`],
      ['an absolute key (%2F)', `/files/${BUCKET}/%2Fetc%2Fpasswd`],
      ['an absolute key to the data directory', `/files/${BUCKET}/${encodeURIComponent(path.join(test.dataDir, 'outside.txt'))}`],
      ['backslashes (%5C)', `/files/${BUCKET}/${workspace}%5C..%5C..%5C..%5Coutside.txt`],
      ['backslashes (raw)', `/files/${BUCKET}/${workspace}\\..\\..\\..\\outside.txt`],
      ['a NUL in the key', `/files/${BUCKET}/${workspace}/x%00/../../outside.txt`],
      ['a "." segment', `/files/${BUCKET}/${workspace}/./${request}/0.png`],
      ['an empty segment', `/files/${BUCKET}/${workspace}//${request}/0.png`],
      ['an overlong UTF-8 dot pair', `/files/${BUCKET}/${workspace}/%c0%ae%c0%ae/${their}`],
    ].map(([what, pathname]) => [what, `${pathname}${search}`]);
  };

  it('never serves a file outside the bucket, whatever the path, with my link\'s query', async () => {
    const search = query(await store.presignGet(objects.mine, 600));
    const outcomes = [];
    for (const [what, pathAndQuery] of traversals(search)) {
      const answer = await get(pathAndQuery);
      outcomes.push({ what, refused: [400, 403, 404].includes(answer.status), exposed: exposed(answer.body) });
    }
    expect(outcomes).toEqual(traversals(search).map(([what]) => ({ what, refused: true, exposed: [] })));
  });

  it('refuses traversal keys even when the signature is valid for them (a leaked or mis-issued signature is not a way out)', async () => {
    const expires = Math.floor(Date.now() / 1000) + 600;
    const keys = ['../../outside.txt', '../../storage-signing.key', `${objects.mine.split('/')[0]}/../${objects.theirs}`, '/etc/passwd', 'a\\..\\..\\outside.txt', '../root.txt'];
    const outcomes = [];
    for (const key of keys) {
      const signature = linkSignature(signingKey, 'GET', BUCKET, key, expires);
      const encoded = key.split('/').map(encodeURIComponent).join('/');
      const answer = await get(`/files/${BUCKET}/${encoded}?expires=${expires}&method=GET&signature=${signature}`);
      outcomes.push({ key, status: answer.status, exposed: exposed(answer.body) });
    }
    expect(outcomes).toEqual(keys.map((key) => ({ key, status: 400, exposed: [] })));
  });

  it('writes nothing through a tampered or traversing PUT, and leaves the other workspace\'s object and every file outside the bucket unchanged', async () => {
    const before = tree(test.dataDir);
    const upload = await store.presignPut(objects.mine, 'image/png', 600);
    const url = new URL(upload.url);
    const expires = Math.floor(Date.now() / 1000) + 600;
    const signedPut = (key: string) => `/files/${BUCKET}/${key.split('/').map(encodeURIComponent).join('/')}?expires=${expires}&method=PUT&signature=${linkSignature(signingKey, 'PUT', BUCKET, key, expires)}`;
    const attempts: Array<[string, string]> = [
      ['a GET link used to write', relative(await store.presignGet(objects.mine, 600))],
      ['a GET link with method=PUT', relative(await store.presignGet(objects.mine, 600)).replace('method=GET', 'method=PUT')],
      ['my PUT link aimed at another workspace\'s object', `/files/${BUCKET}/${objects.theirs}${url.search}`],
      ['my PUT link with its expiry moved', `${url.pathname}${url.search.replace(/expires=\d+/, `expires=${expires + 3600}`)}`],
      ['my PUT link with .. into another workspace', `/files/${BUCKET}/${objects.mine.split('/')[0]}/../${objects.theirs}${url.search}`],
      ['my PUT link with %2e%2e out of the bucket', `/files/${BUCKET}/%2e%2e/%2e%2e/outside.txt${url.search}`],
      ['my PUT link to the signing key', `/files/${BUCKET}/../../storage-signing.key${url.search}`],
      ['a validly signed PUT to ../../outside.txt', signedPut('../../outside.txt')],
      ['a validly signed PUT to ../root.txt', signedPut('../root.txt')],
      ['a validly signed PUT to an absolute path', signedPut('/tmp/escaped-by-link.txt')],
      ['my PUT link to another bucket', `/files/other-bucket/file.txt${url.search}`],
    ];
    const outcomes = [];
    for (const [what, pathAndQuery] of attempts) {
      const answer = await get(pathAndQuery, 'PUT', Buffer.from('overwritten'));
      outcomes.push({ what, refused: [400, 403, 404].includes(answer.status) });
    }
    expect(outcomes).toEqual(attempts.map(([what]) => ({ what, refused: true })));
    expect(tree(test.dataDir)).toEqual(before);
    expect(fs.existsSync('/tmp/escaped-by-link.txt')).toBe(false);
    expect((await store.get(objects.theirs))?.data.toString()).toBe(bytes.theirs);
    expect((await store.get(objects.mine))?.data.toString()).toBe(bytes.mine);
  });

  it('methods other than GET, HEAD and PUT are refused on links', async () => {
    const link = relative(await store.presignGet(objects.mine, 600));
    for (const method of ['POST', 'DELETE', 'PATCH']) {
      const answer = await get(link, method, Buffer.from('x'));
      expect({ method, refused: answer.status >= 400 && answer.status < 500, exposed: exposed(answer.body) }).toEqual({ method, refused: true, exposed: [] });
    }
    expect((await store.get(objects.mine))?.data.toString()).toBe(bytes.mine);
  });
});
