/**
 * Local `$ref`s only: `#`, `#/$defs/X`, `#/definitions/X`, or any JSON pointer into the same
 * document (zod-to-json-schema points at `#/properties/a/items` for a schema it saw before).
 * A remote reference would make the gateway fetch a URL on a tenant's behalf: it is refused.
 */
export function resolveLocalRef(root: unknown, ref: string): unknown {
  if (ref !== '#' && !ref.startsWith('#/')) return undefined;
  let node: unknown = root;
  for (const raw of ref === '#' ? [] : ref.slice(2).split('/')) {
    const key = decodeURIComponent(raw).replaceAll('~1', '/').replaceAll('~0', '~');
    if (typeof node !== 'object' || node === null) return undefined;
    if (Array.isArray(node)) {
      if (!/^(0|[1-9]\d*)$/.test(key)) return undefined;
      node = node[Number(key)];
    } else {
      if (!Object.hasOwn(node, key)) return undefined;
      node = (node as Record<string, unknown>)[key];
    }
  }
  return node;
}
