import type { CodegenConfig } from '@graphql-codegen/cli';

/**
 * Operation types from the server's schema: an operation the schema no longer satisfies fails
 * `npm run build`, so a schema change that breaks the console cannot land unnoticed.
 */
const config: CodegenConfig = {
  schema: '../schema.graphql',
  documents: ['src/**/*.tsx', 'src/**/*.ts', '!src/gql/**/*'],
  ignoreNoDocuments: false,
  generates: {
    'src/gql/': {
      preset: 'client',
      config: {
        useTypeImports: true,
        enumsAsTypes: true,
        scalars: { SafeInt: 'number', DateTimeISO: 'string', Decimal: 'string', JSONObject: 'Record<string, unknown>' },
      },
      presetConfig: { fragmentMasking: false },
    },
  },
};

export default config;
