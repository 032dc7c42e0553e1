/**
 * The signed-in workspace key lives in this tab's session storage only: never in a URL, a
 * cookie, local storage or a log. Closing the tab signs out.
 */
const KEY = 'console.apiKey';

export function storedKey(): string | null {
  return sessionStorage.getItem(KEY);
}

export function storeKey(apiKey: string): void {
  sessionStorage.setItem(KEY, apiKey);
}

export function forgetKey(): void {
  sessionStorage.removeItem(KEY);
}

/** A one-time sign-in token from the link `npm start` prints (`#sign-in=csl-…`), removed from the address bar at once. */
export function takeSignInToken(): string | null {
  const match = /^#sign-in=(csl-[\w-]+)$/.exec(window.location.hash);
  if (!match) return null;
  history.replaceState(null, '', window.location.pathname + window.location.search);
  return match[1];
}
