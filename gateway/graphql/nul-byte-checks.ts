import {
  getOperationAST, GraphQLError, Kind, visit,
  type ASTNode, type DocumentNode, type ValidationContext, type ValueNode, type ASTVisitor,
} from 'graphql';
import { fieldPath, findNulByte, nulByteMessage, type NulBytePosition } from '../../control-plane/api/errors';
import { GRAPHQL_CODES } from './graphql-codes';

/**
 * Every String, ID and JSON value a client sends is checked for NUL (U+0000) before any
 * resolver runs, since PostgreSQL cannot store it: literals in the document by a validation
 * rule, variables once the operation is known. Both name the argument and the field path in it
 * (`input.name`, `offers[0].id`) and answer BAD_USER_INPUT, over HTTP and graphql-ws alike.
 */
export function nulByteRule(context: ValidationContext): ASTVisitor {
  return {
    Document(document) {
      const { literals } = walkArguments(document);
      for (const { node, base, position } of literals) context.reportError(nulByteError(base, position, node, false));
    },
  };
}

/** A NUL in the operation's variables, named by the argument each variable fills; null when there is none. */
export function nulByteInVariables(document: DocumentNode, operationName: string | null | undefined, variables: Record<string, unknown> | null | undefined): GraphQLError | null {
  const operation = getOperationAST(document, operationName);
  if (!operation || !variables) return null;
  const { uses } = walkArguments(document);
  for (const definition of operation.variableDefinitions ?? []) {
    const name = definition.variable.name.value;
    const position = findNulByte(variables[name]);
    if (position) return nulByteError(uses.get(name) ?? name, position, definition, true);
  }
  return null;
}

function nulByteError(base: string, position: NulBytePosition, node: ASTNode, fromVariables: boolean): GraphQLError {
  const { message, param } = nulByteMessage(base, position);
  return new GraphQLError(message, {
    nodes: [node],
    // A request error (nothing ran): 400, as for a variable of the wrong type.
    extensions: { code: GRAPHQL_CODES.invalid_request, param, ...(fromVariables ? { http: { status: 400 } } : {}) },
  });
}

interface Literal {
  node: ASTNode;
  base: string;
  position: NulBytePosition;
}

/**
 * The NUL-bearing string literals of every argument (field and directive arguments, and
 * variables' default values), and for each variable the argument path of its first use.
 */
function walkArguments(document: DocumentNode): { literals: Literal[]; uses: Map<string, string> } {
  const literals: Literal[] = [];
  const uses = new Map<string, string>();
  const walkValue = (value: ValueNode, path: Array<string | number>, base: string) => {
    switch (value.kind) {
      case Kind.STRING:
        if (value.value.includes('\0')) literals.push({ node: value, base, position: { path, inKey: false } });
        return;
      case Kind.LIST:
        value.values.forEach((item, index) => walkValue(item, [...path, index], base));
        return;
      case Kind.OBJECT:
        for (const field of value.fields) walkValue(field.value, [...path, field.name.value], base);
        return;
      case Kind.VARIABLE:
        if (!uses.has(value.name.value)) uses.set(value.name.value, fieldPath(base, path)!);
        return;
      default:
    }
  };
  const defaults: Literal[] = [];
  visit(document, {
    Argument(argument) {
      walkValue(argument.value, [], argument.name.value);
    },
    VariableDefinition(definition) {
      if (!definition.defaultValue) return;
      const found = literals.length;
      walkValue(definition.defaultValue, [], definition.variable.name.value);
      defaults.push(...literals.splice(found));
    },
  });
  // A default value is named by the argument its variable fills, known once the whole document is walked.
  for (const literal of defaults) literals.push({ ...literal, base: uses.get(literal.base) ?? literal.base });
  return { literals, uses };
}
