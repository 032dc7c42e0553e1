import { useState } from 'react';
import { useMutation, useQuery } from 'urql';
import { graphql } from '../gql';
import { TableScroll } from '../components/TableScroll';
import { storedKey } from '../session';
import { ConfirmButton } from '../components/ConfirmButton';
import { CopyButton } from '../components/CopyButton';
import { Empty, ErrorView, fieldError, Loading } from '../components/states';
import { formatTime } from '../components/format';
import { Field, UnplacedError } from '../components/Field';

const API_KEYS = graphql(`
  query ApiKeys {
    apiKeys { id name displayPrefix rpmLimit tpdLimit createdAt regeneratedAt }
  }
`);

const CREATE_API_KEY = graphql(`
  mutation CreateApiKey($input: CreateApiKeyInput!) {
    createApiKey(input: $input) { plaintext apiKey { id name displayPrefix rpmLimit tpdLimit createdAt regeneratedAt } }
  }
`);

const REGENERATE_API_KEY = graphql(`
  mutation RegenerateApiKey($id: ID!) {
    regenerateApiKey(id: $id) { plaintext apiKey { id name displayPrefix rpmLimit tpdLimit createdAt regeneratedAt } }
  }
`);

const REVOKE_API_KEY = graphql(`
  mutation RevokeApiKey($id: ID!) {
    revokeApiKey(id: $id) { id }
  }
`);

const SET_API_KEY_LIMITS = graphql(`
  mutation SetApiKeyLimits($id: ID!, $limits: ApiKeyLimitsInput!) {
    setApiKeyLimits(id: $id, limits: $limits) { id rpmLimit tpdLimit }
  }
`);

interface Key { id: string; name: string; displayPrefix: string; rpmLimit: number; tpdLimit: number; createdAt: string; regeneratedAt?: string | null }

/**
 * Workspace keys. A plaintext lives only in this component's state, shown once after create or
 * regenerate: leaving the page drops it, and the API never returns it again.
 */
export function ApiKeys() {
  const [{ data, fetching, error }] = useQuery({ query: API_KEYS, context: KEY_CONTEXT });
  const [shown, setShown] = useState<{ name: string; plaintext: string; regenerated: boolean } | null>(null);
  const [editing, setEditing] = useState<Key | null>(null);
  const [revoked, revoke] = useMutation(REVOKE_API_KEY);
  const [regenerated, regenerate] = useMutation(REGENERATE_API_KEY);
  const signedInKey = storedKey();

  const onRegenerate = async (key: Key) => {
    const result = await regenerate({ id: key.id });
    if (result.data) setShown({ name: key.name, plaintext: result.data.regenerateApiKey.plaintext, regenerated: true });
  };

  return (
    <section>
      <header className="page-header"><h1>API keys</h1></header>
      <p className="muted">Keys call every deployment endpoint and the shared endpoint as <code>Authorization: Bearer mk-…</code>.</p>
      {shown && <NewSecret {...shown} onDone={() => setShown(null)} />}
      <CreateKeyForm onCreated={(name, plaintext) => setShown({ name, plaintext, regenerated: false })} />

      <h2>Keys</h2>
      {error && <ErrorView error={error} title="The keys could not be loaded" />}
      {revoked.error && <ErrorView error={revoked.error} title="The key was not revoked" />}
      {regenerated.error && <ErrorView error={regenerated.error} title="The key was not regenerated" />}
      {!data && fetching && <Loading what="API keys" />}
      {data && data.apiKeys.length === 0 && <Empty>No active keys. Create one above.</Empty>}
      {data && data.apiKeys.length > 0 && (
        <TableScroll><table>
          <thead><tr><th>Name</th><th>Key</th><th>RPM limit</th><th>TPD limit</th><th>Created</th><th><span className="muted">Actions</span></th></tr></thead>
          <tbody>
            {data.apiKeys.map((key) => {
              const isThisConsole = signedInKey !== null && signedInKey.startsWith(key.displayPrefix);
              return (
                <tr key={key.id}>
                  <td>{key.name}{isThisConsole && <> <span className="badge">this console</span></>}</td>
                  <td><code>{key.displayPrefix}…</code></td>
                  <td>{key.rpmLimit.toLocaleString()}</td>
                  <td>{key.tpdLimit.toLocaleString()}</td>
                  <td>{formatTime(key.createdAt)}{key.regeneratedAt && <><br /><span className="muted">regenerated {formatTime(key.regeneratedAt)}</span></>}</td>
                  <td>
                    <div className="actions" style={ACTIONS_STYLE}>
                      <button type="button" aria-label={`Edit limits of ${key.name}`} onClick={() => setEditing(key)}>Edit limits</button>
                      <ConfirmButton label={`Regenerate ${key.name}`} question={`Regenerate ${key.name}? Its current plaintext stops working at once.`} onConfirm={() => void onRegenerate(key)} />
                      <ConfirmButton label={`Revoke ${key.name}`} question={`Revoke ${key.name}? Calls with it fail at once${isThisConsole ? ', and this console signs out' : ''}.`} onConfirm={() => void revoke({ id: key.id })} />
                    </div>
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table></TableScroll>
      )}
      {editing && <LimitsForm key={editing.id} apiKey={editing} onClose={() => setEditing(null)} />}
    </section>
  );
}

/** Every key query re-reads after a key mutation. */
const KEY_CONTEXT = { additionalTypenames: ['ApiKey'] };
const ACTIONS_STYLE = { display: 'flex', flexWrap: 'wrap', gap: 6 } as const;

function NewSecret({ name, plaintext, regenerated, onDone }: { name: string; plaintext: string; regenerated: boolean; onDone: () => void }) {
  return (
    <div role="region" aria-labelledby="new-key-heading" className="new-secret" style={{ margin: '16px 0', padding: 16, background: '#fff', border: '1px solid #f0d98a', borderRadius: 8 }}>
      <h2 id="new-key-heading">{regenerated ? `New plaintext of ${name}` : `Your new key ${name}`}</h2>
      <p><strong>Copy it now: you will not see this key again.</strong> Only a short prefix is kept for display{regenerated ? '; the previous plaintext no longer works' : ''}.</p>
      <p className="secret" data-testid="new-key-plaintext">{plaintext}</p>
      <div style={ACTIONS_STYLE}>
        <CopyButton text={plaintext} label="Copy key" />
        <button type="button" onClick={onDone}>I have stored it</button>
      </div>
    </div>
  );
}

function CreateKeyForm({ onCreated }: { onCreated: (name: string, plaintext: string) => void }) {
  const [name, setName] = useState('');
  const { rpm, setRpm, tpd, setTpd, local, checkedLimits } = useLimitFields('', '');
  const [created, create] = useMutation(CREATE_API_KEY);

  const submit = async (event: React.FormEvent) => {
    event.preventDefault();
    const limits = checkedLimits();
    if (!limits) return;
    const result = await create({ input: { name: name.trim(), ...limits } });
    if (result.data) {
      onCreated(result.data.createApiKey.apiKey.name, result.data.createApiKey.plaintext);
      setName('');
      setRpm('');
      setTpd('');
    }
  };

  return (
    <form onSubmit={submit} aria-labelledby="create-key-heading">
      <h2 id="create-key-heading">Create a key</h2>
      <Field id="key-name" label="Name" value={name} onChange={setName} error={fieldError(created.error, 'name')} required />
      <Field id="key-rpm" label="Requests per minute (RPM) limit" hint="Optional; the workspace default when empty" value={rpm} onChange={setRpm} numeric
        error={local.rpmLimit ?? fieldError(created.error, 'rpmLimit')} />
      <Field id="key-tpd" label="Tokens per day (TPD) limit" hint="Optional; the workspace default when empty" value={tpd} onChange={setTpd} numeric
        error={local.tpdLimit ?? fieldError(created.error, 'tpdLimit')} />
      <p><button type="submit" disabled={!name.trim() || created.fetching}>{created.fetching ? 'Creating…' : 'Create key'}</button></p>
      <UnplacedError error={created.error} params={['name', 'rpmLimit', 'tpdLimit']} title="The key was not created" />
    </form>
  );
}

function LimitsForm({ apiKey, onClose }: { apiKey: Key; onClose: () => void }) {
  const { rpm, setRpm, tpd, setTpd, local, checkedLimits } = useLimitFields(String(apiKey.rpmLimit), String(apiKey.tpdLimit));
  const [saved, save] = useMutation(SET_API_KEY_LIMITS);

  const submit = async (event: React.FormEvent) => {
    event.preventDefault();
    const limits = checkedLimits();
    if (!limits) return;
    const result = await save({ id: apiKey.id, limits });
    if (result.data) onClose();
  };

  return (
    <form onSubmit={submit} aria-labelledby="limits-heading">
      <h2 id="limits-heading">Limits of {apiKey.name}</h2>
      <Field id="limits-rpm" label="Requests per minute (RPM) limit" value={rpm} onChange={setRpm} numeric error={local.rpmLimit ?? fieldError(saved.error, 'rpmLimit')} />
      <Field id="limits-tpd" label="Tokens per day (TPD) limit" value={tpd} onChange={setTpd} numeric error={local.tpdLimit ?? fieldError(saved.error, 'tpdLimit')} />
      <p style={ACTIONS_STYLE}>
        <button type="submit" disabled={saved.fetching}>{saved.fetching ? 'Saving…' : 'Save limits'}</button>
        <button type="button" onClick={onClose}>Close</button>
      </p>
      <UnplacedError error={saved.error} params={['rpmLimit', 'tpdLimit']} title="The limits were not saved" />
    </form>
  );
}

/**
 * The RPM and TPD fields of a key form: their text, the problems found in it, and
 * `checkedLimits()`, which parses them on submit, shows what is wrong, and gives the limits
 * (undefined when empty) or null when one is not a whole number.
 */
function useLimitFields(initialRpm: string, initialTpd: string) {
  const [rpm, setRpm] = useState(initialRpm);
  const [tpd, setTpd] = useState(initialTpd);
  const [local, setLocal] = useState<Record<string, string>>({});
  const checkedLimits = (): { rpmLimit?: number; tpdLimit?: number } | null => {
    const limits = parseLimits(rpm, tpd);
    setLocal(limits.problems);
    return limits.valid ? { rpmLimit: limits.rpmLimit, tpdLimit: limits.tpdLimit } : null;
  };
  return { rpm, setRpm, tpd, setTpd, local, checkedLimits };
}

/** Empty means "leave it to the server"; anything but a whole number is refused here (GraphQL's Int would refuse it without naming the field). */
/**
 * The RPM and TPD fields as numbers (undefined when empty: the workspace default). GraphQL's own
 * error for a non-integer Int does not name the field, so that one is caught here.
 */
function parseLimits(rpm: string, tpd: string): { valid: true; rpmLimit?: number; tpdLimit?: number; problems: Record<string, string> } | { valid: false; problems: Record<string, string> } {
  const rpmLimit = optionalInteger(rpm);
  const tpdLimit = optionalInteger(tpd);
  const problems: Record<string, string> = {};
  if (rpmLimit === 'invalid') problems.rpmLimit = 'RPM limit must be a whole number';
  if (tpdLimit === 'invalid') problems.tpdLimit = 'TPD limit must be a whole number';
  if (rpmLimit === 'invalid' || tpdLimit === 'invalid') return { valid: false, problems };
  return { valid: true, rpmLimit, tpdLimit, problems };
}

function optionalInteger(text: string): number | undefined | 'invalid' {
  const trimmed = text.trim().replace(/[,_\s]/g, '');
  if (trimmed === '') return undefined;
  return /^-?\d+$/.test(trimmed) && Number.isSafeInteger(Number(trimmed)) ? Number(trimmed) : 'invalid';
}

