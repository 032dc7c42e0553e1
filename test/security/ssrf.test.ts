import { startTestServer, type TestServer, type TestWorkspace } from '../support/test-server';
import { call, graphqlAs, openAIError } from './support/security-client';

const IMAGE_MODEL = 'black-forest-labs/FLUX.1-schnell';
/** A public address (example.com's): accepted everywhere, never contacted by these tests. */
const PUBLIC = '93.184.215.14';

/**
 * [what, URL]: addresses the platform must never be made to call (its own host, private
 * networks, cloud metadata) in every spelling a URL parser accepts, plus URL tricks. All of
 * them are refused by every sink of a user-supplied URL with a 4xx naming the field; the
 * sandbox has no DNS, so only literals and names refused by name are used.
 */
const FORBIDDEN_URLS: Array<[string, string]> = [
  ['loopback 127.0.0.1', 'https://127.0.0.1/hook'],
  ['loopback 127.255.255.254', 'https://127.255.255.254/hook'],
  ['private 10/8', 'https://10.0.0.1/hook'],
  ['private 172.16/12 (low end)', 'https://172.16.0.1/hook'],
  ['private 172.16/12 (high end)', 'https://172.31.255.254/hook'],
  ['private 192.168/16', 'https://192.168.1.1/hook'],
  ['CGNAT 100.64/10', 'https://100.64.0.1/hook'],
  ['cloud metadata 169.254.169.254', 'https://169.254.169.254/latest/meta-data/'],
  ['unspecified 0.0.0.0', 'https://0.0.0.0/hook'],
  ['"0" (0.0.0.0)', 'https://0/hook'],
  ['multicast 224.0.0.1', 'https://224.0.0.1/hook'],
  ['broadcast 255.255.255.255', 'https://255.255.255.255/hook'],
  ['decimal IPv4 of 127.0.0.1', 'https://2130706433/hook'],
  ['decimal IPv4 of 169.254.169.254', 'https://2852039166/hook'],
  ['hex IPv4 0x7f.1', 'https://0x7f.1/hook'],
  ['hex IPv4 0x7f000001', 'https://0x7f000001/hook'],
  ['hex dotted metadata 0xa9.0xfe.0xa9.0xfe', 'https://0xa9.0xfe.0xa9.0xfe/hook'],
  ['octal IPv4 0177.0.0.1', 'https://0177.0.0.1/hook'],
  ['short IPv4 127.1', 'https://127.1/hook'],
  ['IPv6 loopback [::1]', 'https://[::1]/hook'],
  ['IPv6 loopback spelled out', 'https://[0:0:0:0:0:0:0:1]/hook'],
  ['IPv6 unspecified [::]', 'https://[::]/hook'],
  ['IPv4-mapped [::ffff:127.0.0.1]', 'https://[::ffff:127.0.0.1]/hook'],
  ['IPv4-mapped in hex [::ffff:7f00:1]', 'https://[::ffff:7f00:1]/hook'],
  ['IPv4-mapped metadata [::ffff:169.254.169.254]', 'https://[::ffff:169.254.169.254]/hook'],
  ['IPv4-translated [::ffff:0:7f00:1]', 'https://[::ffff:0:7f00:1]/hook'],
  ['IPv4-compatible [::127.0.0.1]', 'https://[::127.0.0.1]/hook'],
  ['NAT64 of metadata [64:ff9b::a9fe:a9fe]', 'https://[64:ff9b::a9fe:a9fe]/hook'],
  ['6to4 of loopback [2002:7f00:1::1]', 'https://[2002:7f00:1::1]/hook'],
  ['AWS IPv6 metadata [fd00:ec2::254]', 'https://[fd00:ec2::254]/hook'],
  ['IPv6 unique local [fc00::1]', 'https://[fc00::1]/hook'],
  ['IPv6 link-local [fe80::1]', 'https://[fe80::1]/hook'],
  // IPv6 is an allow-list (global unicast 2000::/3 minus special-purpose blocks): these passed a deny-list.
  ['::/8 outside every named form [::1:0:0:1]', 'https://[::1:0:0:1]/hook'],
  ['IPv4-mapped public address [::ffff:93.184.215.14]', `https://[::ffff:${PUBLIC}]/hook`],
  ['100::/8 outside discard-only [100:0:0:2::1]', 'https://[100:0:0:2::1]/hook'],
  ['reserved 4000::/3 [4000::1]', 'https://[4000::1]/hook'],
  ['SRv6 SIDs [5f00::1]', 'https://[5f00::1]/hook'],
  ['reserved fe00::/9 [fe00::1]', 'https://[fe00::1]/hook'],
  ['IPv6 site-local [fec0::1]', 'https://[fec0::1]/hook'],
  ['IPv6 multicast [ff02::1]', 'https://[ff02::1]/hook'],
  ['IPv6 documentation [2001:db8::1]', 'https://[2001:db8::1]/hook'],
  ['IPv6 documentation [3fff::1]', 'https://[3fff::1]/hook'],
  ['Teredo [2001:0:4136:e378:8000:63bf:3fff:fdd2]', 'https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/hook'],
  ['IPv6 benchmarking [2001:2::1]', 'https://[2001:2::1]/hook'],
  ['ORCHIDv2 [2001:20::1]', 'https://[2001:20::1]/hook'],
  ['AS112 direct delegation [2620:4f:8000::1]', 'https://[2620:4f:8000::1]/hook'],
  ['6to4 of a public address [2002:5db8:d70e::1]', 'https://[2002:5db8:d70e::1]/hook'],
  ['local-use NAT64 [64:ff9b:1::a9fe:a9fe]', 'https://[64:ff9b:1::a9fe:a9fe]/hook'],
  ['localhost', 'https://localhost/hook'],
  ['LOCALHOST', 'https://LOCALHOST/hook'],
  ['a subdomain of localhost', 'https://app.localhost/hook'],
  ['localhost with a trailing dot', 'https://localhost./hook'],
  ['127.0.0.1 with a trailing dot', 'https://127.0.0.1./hook'],
  ['metadata.google.internal with a trailing dot', 'https://metadata.google.internal./computeMetadata/v1/'],
  ['a .home.arpa name', 'https://router.home.arpa/hook'],
  ['a single-label name', 'https://intranet/hook'],
  ['fullwidth localhost (IDN-mapped)', 'https://ｌｏｃａｌｈｏｓｔ/hook'],
  ['circled digits ①②⑦.0.0.1 (IDN-mapped)', 'https://①②⑦.0.0.1/hook'],
  ['ideographic full stops 127。0。0。1', 'https://127。0。0。1/hook'],
  ['percent-encoded localhost', 'https://loc%61lhost/hook'],
  ['userinfo before a loopback host', 'https://good@127.0.0.1/hook'],
  ['userinfo that looks like a host', `https://${PUBLIC}:443@127.0.0.1/hook`],
  ['credentials before a public host', `https://user:pass@${PUBLIC}/hook`],
  ['a fragment hiding the real host', `https://127.0.0.1#@${PUBLIC}/hook`],
  ['http to loopback', 'http://127.0.0.1/hook'],
  ['http decimal loopback', 'http://2130706433/'],
  ['http to localhost', 'http://localhost:8080/hook'],
  ['file:', 'file:///etc/passwd'],
  ['ftp:', `ftp://${PUBLIC}/hook`],
  ['gopher:', `gopher://${PUBLIC}:70/_x`],
  ['not a URL', 'not a url'],
];

/** Webhooks only: S3-compatible endpoints may be plain HTTP on a public address. */
const WEBHOOK_ONLY: Array<[string, string]> = [
  ['plain http to a public address', `http://${PUBLIC}/hook`],
];

/**
 * Every sink of a user-supplied URL the platform will call: webhook endpoints (create and
 * update), a request's `webhook_url`, and storage credential endpoints. Each refuses every
 * forbidden form, naming its field, and stores nothing; a public HTTPS address is accepted
 * (the control). The operator switches (WEBHOOK_ALLOW_INSECURE_LOOPBACK,
 * STORAGE_ALLOW_PRIVATE_ENDPOINTS) are off, as in production.
 */
describe('SSRF: user-supplied URLs never point the platform at its own network', () => {
  let test: TestServer;
  let workspace: TestWorkspace;
  let image: { id: string; slug: string; baseUrl: string };
  let asWorkspace: ReturnType<typeof graphqlAs>;
  let controlEndpointId: string;
  let controlRequestId: string;

  const CREATE_ENDPOINT = 'mutation($url: String!) { createWebhookEndpoint(input: {url: $url}) { id url } }';
  const UPDATE_ENDPOINT = 'mutation($id: ID!, $url: String!) { updateWebhookEndpoint(id: $id, input: {url: $url}) { id url } }';
  const CREATE_CREDENTIAL = 'mutation($input: CreateStorageCredentialInput!) { createStorageCredential(input: $input) { id endpoint } }';
  const credential = (endpoint: string) => ({ name: 'bucket', endpoint, region: 'us-east-1', bucket: 'my-bucket', accessKeyId: 'AKIAEXAMPLE', secretAccessKey: 'secret-access-key-0123' });
  const submit = (webhookUrl: string) => call('POST', `${image.baseUrl}/images/generations?async=true`, `Bearer ${workspace.apiKey}`,
    { model: IMAGE_MODEL, prompt: 'ssrf', size: '512x512', webhook_url: webhookUrl });

  beforeAll(async () => {
    test = await startTestServer();
    expect(test.server.controlPlane.config.webhooks.allowInsecureLoopback).toBe(false);
    expect(test.server.controlPlane.config.storage.allowPrivateEndpoints).toBe(false);
    workspace = await test.createWorkspace();
    asWorkspace = graphqlAs(test.url, workspace.apiKey);
    // External: no agent, so an accepted request stays queued and no webhook is ever sent.
    image = await test.createDeployment(workspace, { modelId: IMAGE_MODEL, provider: 'external' });
  });

  afterAll(async () => {
    await test?.stop();
  });

  it('accepts a public HTTPS address in every sink (the control)', async () => {
    const created = await asWorkspace(CREATE_ENDPOINT, { url: `https://${PUBLIC}/hook` });
    expect(created.body.errors).toBeUndefined();
    controlEndpointId = created.body.data.createWebhookEndpoint.id;
    const updated = await asWorkspace(UPDATE_ENDPOINT, { id: controlEndpointId, url: `https://${PUBLIC}/hook/v2` });
    expect(updated.body.data.updateWebhookEndpoint.url).toBe(`https://${PUBLIC}/hook/v2`);
    const submitted = await submit(`https://${PUBLIC}/hook`);
    expect(submitted.status).toBe(202);
    controlRequestId = submitted.json.id;
    const stored = await asWorkspace(CREATE_CREDENTIAL, { input: credential(`https://${PUBLIC}`) });
    expect(stored.body.errors).toBeUndefined();
  });

  it('createWebhookEndpoint refuses every forbidden URL with BAD_USER_INPUT naming url', async () => {
    const cases = [...FORBIDDEN_URLS, ...WEBHOOK_ONLY];
    const outcomes = [];
    for (const [what, url] of cases) {
      const answer = await asWorkspace(CREATE_ENDPOINT, { url });
      const error = answer.body.errors?.[0];
      outcomes.push({ what, status: answer.status < 500, extensions: error?.extensions, namesField: error?.message.includes('url') ?? false, data: answer.body.data ?? null });
    }
    expect(outcomes).toEqual(cases.map(([what]) => ({ what, status: true, extensions: { code: 'BAD_USER_INPUT', param: 'url' }, namesField: true, data: null })));
  });

  it('updateWebhookEndpoint refuses every forbidden URL and keeps the endpoint\'s URL', async () => {
    const cases = [...FORBIDDEN_URLS, ...WEBHOOK_ONLY];
    const outcomes = [];
    for (const [what, url] of cases) {
      const answer = await asWorkspace(UPDATE_ENDPOINT, { id: controlEndpointId, url });
      outcomes.push({ what, extensions: answer.body.errors?.[0]?.extensions, data: answer.body.data ?? null });
    }
    expect(outcomes).toEqual(cases.map(([what]) => ({ what, extensions: { code: 'BAD_USER_INPUT', param: 'url' }, data: null })));
    const endpoints = (await asWorkspace('{ webhookEndpoints { id url } }')).body.data.webhookEndpoints;
    expect(endpoints).toEqual([{ id: controlEndpointId, url: `https://${PUBLIC}/hook/v2` }]);
  });

  it('a request\'s webhook_url refuses every forbidden URL with 422 invalid_webhook_url, and no record is made', async () => {
    const cases = [...FORBIDDEN_URLS, ...WEBHOOK_ONLY];
    const outcomes = [];
    for (const [what, url] of cases) {
      const answer = await submit(url);
      outcomes.push({ what, error: openAIError(answer), namesField: answer.json?.error?.message.includes('webhook_url') ?? false });
    }
    expect(outcomes).toEqual(cases.map(([what]) => ({
      what, error: { status: 422, type: 'invalid_request_error', code: 'invalid_webhook_url', param: 'webhook_url' }, namesField: true,
    })));
    const records = await call('GET', `${image.baseUrl}/requests?limit=200`, `Bearer ${workspace.apiKey}`);
    expect(records.json.data.map((record: { id: string }) => record.id)).toEqual([controlRequestId]);
  });

  it('createStorageCredential refuses every forbidden endpoint with BAD_USER_INPUT naming endpoint, and stores none', async () => {
    const outcomes = [];
    for (const [what, url] of FORBIDDEN_URLS) {
      // An S3 endpoint is a base URL: the same host without the path.
      const endpoint = url.replace(/\/(hook|latest\/meta-data|computeMetadata\/v1)\/?$/, '');
      const answer = await asWorkspace(CREATE_CREDENTIAL, { input: credential(endpoint) });
      const error = answer.body.errors?.[0];
      outcomes.push({ what, extensions: error?.extensions, namesField: error?.message.includes('endpoint') ?? false, data: answer.body.data ?? null });
    }
    expect(outcomes).toEqual(FORBIDDEN_URLS.map(([what]) => ({ what, extensions: { code: 'BAD_USER_INPUT', param: 'endpoint' }, namesField: true, data: null })));
    const stored = (await asWorkspace('{ storageCredentials { endpoint } }')).body.data.storageCredentials;
    expect(stored).toEqual([{ endpoint: `https://${PUBLIC}` }]);
  });
});
