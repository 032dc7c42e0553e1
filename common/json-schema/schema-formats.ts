/**
 * The `format`s both checked (validate-instance.ts) and produced (generate-instance.ts); any
 * other format is an annotation, as JSON Schema 2020-12 treats formats by default.
 */
const FORMAT_PATTERNS: Readonly<Record<string, RegExp>> = {
  'date-time': /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[Tt]([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$/,
  date: /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$/,
  time: /^([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)?$/,
  email: /^[^\s@]+@[^\s@]+\.[^\s@]+$/,
  uuid: /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/,
  ipv4: /^((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/,
  uri: /^[a-zA-Z][a-zA-Z0-9+.-]*:[^\s]*$/,
  hostname: /^(?=.{1,253}$)[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(\.[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*$/,
};

/** Values that satisfy each checked format (and the patterns zod pairs with them). */
export const FORMAT_SAMPLES: Readonly<Record<string, readonly string[]>> = {
  'date-time': ['2024-05-17T09:30:00Z', '2025-01-02T12:00:00.000Z'],
  date: ['2024-05-17', '2025-01-02'],
  time: ['09:30:00', '12:00:00Z'],
  email: ['user@example.com', 'agent@example.org'],
  uuid: ['3f2b8c1e-9a4d-4e2f-8b7a-1c2d3e4f5a6b', '00000000-0000-0000-0000-000000000000'],
  ipv4: ['192.0.2.1', '10.0.0.1'],
  uri: ['https://example.com/', 'https://example.org/a'],
  hostname: ['example.com', 'api.example.org'],
};

export function matchesFormat(format: string, value: string): boolean {
  const pattern = FORMAT_PATTERNS[format];
  return pattern === undefined || pattern.test(value);
}
