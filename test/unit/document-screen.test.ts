import { buildGatewaySchema } from '../../gateway/graphql/build-schema';
import { DocumentScreen } from '../../gateway/graphql/document-screen';
import { DEFAULT_QUERY_LIMITS } from '../../gateway/graphql/query-limits';

describe('DocumentScreen', () => {
  const schema = buildGatewaySchema();
  const screen = new DocumentScreen(schema, DEFAULT_QUERY_LIMITS, 10_000);
  const usage = (aliases: number) => Array.from({ length: aliases }, (_, index) => `u${index}: usage(from: $from, to: $to) { key requests }`).join(' ');

  it('refuses a document over the database cost before graphql-js validates it, naming the cost, and remembers it', () => {
    const query = `query($from: DateTimeISO!, $to: DateTimeISO!) { ${usage(450)} }`;
    const refusal = screen.refusal(query);
    expect(refusal?.extensions.code).toBe('QUERY_TOO_COMPLEX');
    expect(refusal?.message).toMatch(/query database cost 11250 is over the limit of 200/);
    expect(screen.refusal(query)).toBe(refusal);
  });

  it('counts every operation of a document, the one the client would not pick included', () => {
    const query = `query Small { catalog { id } } query Heavy($from: DateTimeISO!, $to: DateTimeISO!) { ${usage(20)} }`;
    expect(screen.refusal(query)?.extensions.code).toBe('QUERY_TOO_COMPLEX');
  });

  it("lets a document within the limits, or one that does not parse, through to the server's own checks", () => {
    expect(screen.refusal(`query($from: DateTimeISO!, $to: DateTimeISO!) { ${usage(8)} }`)).toBeNull();
    expect(screen.refusal('{ catalog { id ')).toBeNull();
    expect(screen.refusal(undefined)).toBeNull();
  });
});
