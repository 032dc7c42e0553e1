import { useEffect, useState } from 'react';
import { useMutation } from 'urql';
import { graphql } from '../gql';
import { takeSignInToken } from '../session';
import { ErrorView } from '../components/states';

const REDEEM = graphql(`
  mutation RedeemSignInLink($token: String!) {
    redeemSignInLink(token: $token) { workspaceId apiKey }
  }
`);

const WHO_AM_I = `{ apiKeys { id } }`;

/** Paste a workspace key (checked against the API before it is kept), or follow the one-time link `npm start` printed. */
export function SignIn({ onSignedIn }: { onSignedIn: (apiKey: string) => void }) {
  const [key, setKey] = useState('');
  const [problem, setProblem] = useState<string | null>(null);
  const [checking, setChecking] = useState(false);
  const [redeemed, redeem] = useMutation(REDEEM);

  useEffect(() => {
    const token = takeSignInToken();
    if (!token) return;
    void redeem({ token }).then((result) => {
      if (result.data) onSignedIn(result.data.redeemSignInLink.apiKey);
    });
  }, []);

  const submit = async (event: React.FormEvent) => {
    event.preventDefault();
    setProblem(null);
    setChecking(true);
    try {
      const response = await fetch('/graphql', {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key.trim()}` },
        body: JSON.stringify({ query: WHO_AM_I }),
      });
      const body = (await response.json()) as { errors?: Array<{ message: string }> };
      if (body.errors?.length) setProblem(body.errors[0].message);
      else onSignedIn(key.trim());
    } catch (error) {
      setProblem(`The server could not be reached: ${(error as Error).message}`);
    } finally {
      setChecking(false);
    }
  };

  return (
    <main className="sign-in">
      <h1>Sign in</h1>
      {redeemed.fetching && <p aria-busy="true">Signing in with the link…</p>}
      {redeemed.error && <ErrorView error={redeemed.error} title="The sign-in link did not work" />}
      <form onSubmit={submit}>
        <label htmlFor="api-key">Workspace API key</label>
        <input id="api-key" type="password" autoComplete="off" placeholder="mk-…" value={key} onChange={(event) => setKey(event.target.value)} />
        <button type="submit" disabled={!key.trim() || checking}>{checking ? 'Checking…' : 'Sign in'}</button>
        {problem && <p role="alert" className="error">{problem}</p>}
      </form>
      <p className="muted">The key is kept in this tab only (session storage) and sent to this server's GraphQL API.</p>
    </main>
  );
}
