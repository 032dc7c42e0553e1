import { GraphQLError, GraphQLScalarType, Kind } from 'graphql';

/**
 * Money as an exact decimal string (`"12.5"`, `"0.00000018"`), never a float. Input may be a
 * string or a number literal (a number in JSON variables is read through its shortest form, so
 * `0.1` is `"0.1"`); the scalar passes the text on, and the operation that takes it checks
 * range and decimal places and names its own argument when it refuses (BAD_USER_INPUT).
 */
export const DecimalScalar = new GraphQLScalarType<string, string>({
  name: 'Decimal',
  description: 'An exact decimal number as a string, e.g. "12.5" or "0.00000018" (money is never a float). Accepted as a string or a number.',
  serialize(value) {
    if (typeof value !== 'string') throw new GraphQLError(`Decimal cannot represent ${typeof value} values`);
    return value;
  },
  parseValue(value) {
    if (typeof value === 'string') return value;
    if (typeof value === 'number') return String(value);
    throw new GraphQLError(`Decimal must be a string or a number, got ${value === null ? 'null' : typeof value}`);
  },
  parseLiteral(node) {
    if (node.kind === Kind.STRING || node.kind === Kind.INT || node.kind === Kind.FLOAT) return node.value;
    throw new GraphQLError(`Decimal must be a string or a number literal, got ${node.kind}`);
  },
});
