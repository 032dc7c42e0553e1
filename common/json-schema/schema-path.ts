/**
 * Where in a schema or an instance something is, as the `param` of an error names a request
 * field: `properties.items.items.minLength`, `anyOf[1].type`. A caller prefixes it with the
 * field that holds the schema (`response_format.json_schema.schema`).
 */
export type PathSegment = string | number;

export function formatPath(prefix: string, segments: readonly PathSegment[]): string {
  return segments.reduce<string>((path, segment) => {
    if (typeof segment === 'number') return `${path}[${segment}]`;
    return path === '' ? segment : `${path}.${segment}`;
  }, prefix);
}
