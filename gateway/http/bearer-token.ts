/** The token of an `Authorization: Bearer <token>` header; null when absent or malformed. */
export function bearerToken(header: string | undefined): string | null {
  return header ? /^Bearer\s+(\S+)\s*$/i.exec(header)?.[1] ?? null : null;
}
