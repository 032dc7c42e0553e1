import fs from 'node:fs';
import path from 'node:path';
import { buildSchema, parse, validate } from 'graphql';
import { OPERATIONS } from '../../cli/operations';
import { cell, fields, table } from '../../cli/output';

const schema = buildSchema(fs.readFileSync(path.join(__dirname, '..', '..', 'schema.graphql'), 'utf8'));

/** The CLI's GraphQL documents against the emitted schema: a renamed field fails here, not for a user. */
describe('the CLI\'s GraphQL operations', () => {
  it.each(Object.entries(OPERATIONS))('%s is valid against schema.graphql', (_name, document) => {
    expect(validate(schema, parse(document)).map((error) => error.message)).toEqual([]);
  });
});

describe('the CLI\'s human output', () => {
  it('pads table columns to their widest cell, capitalizes headers and prints null as -', () => {
    const rows = [{ id: 'dep_1', status: 'Running', reason: null }, { id: 'dep_22', status: 'Paused', reason: 'by user' }];
    expect(table(rows, [
      { header: 'id', value: (row) => row.id }, { header: 'status', value: (row) => row.status }, { header: 'reason', value: (row) => row.reason },
    ])).toBe('ID      STATUS   REASON\ndep_1   Running  -\ndep_22  Paused   by user\n');
    expect(table([], [{ header: 'id', value: () => 1 }])).toBe('ID\n');
  });

  it('aligns key: value lines', () => {
    expect(fields([['id', 'x'], ['base url', 'http://h/v1'], ['reason', undefined]])).toBe('id:       x\nbase url: http://h/v1\nreason:   -\n');
    expect(cell({ a: 1 })).toBe('{"a":1}');
  });
});
