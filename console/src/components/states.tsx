import type { CombinedError } from 'urql';

/** An error as the API words it (message and code), or the network's own words when the server was not reached. */
export function ErrorView({ error, title = 'Something went wrong' }: { error: CombinedError | Error; title?: string }) {
  const graphQLErrors = 'graphQLErrors' in error ? error.graphQLErrors : [];
  return (
    <div role="alert" className="error">
      <strong>{title}</strong>
      {graphQLErrors.length > 0
        ? graphQLErrors.map((item, index) => <p key={index}>{item.message} <code>{String(item.extensions?.code ?? '')}</code></p>)
        : <p>{'networkError' in error && error.networkError ? `The server could not be reached: ${error.networkError.message}` : error.message}</p>}
    </div>
  );
}

export function Loading({ what }: { what: string }) {
  return <p className="muted" aria-busy="true">Loading {what}…</p>;
}

export function Empty({ children }: { children: React.ReactNode }) {
  return <div className="empty">{children}</div>;
}

/** The message a field's own API error carries (`extensions.param` names it), shown beside that field. */
export function fieldError(error: CombinedError | undefined, param: string): string | undefined {
  return error?.graphQLErrors.find((item) => item.extensions?.param === param)?.message;
}
