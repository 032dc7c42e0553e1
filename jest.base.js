/** What every jest configuration here shares (jest.config.js's projects, the fault, console,
 *  unit and cluster suites). Tests run from TypeScript sources through swc (decorator metadata
 *  on, for type-graphql and TypeORM); processes that tests spawn (worker agents) run from
 *  `dist/`, which `npm test` builds first. */
module.exports = {
  testEnvironment: 'node',
  testMatch: ['**/*.test.ts'],
  testPathIgnorePatterns: ['/node_modules/'],
  // Some packages are ES modules only (@kubernetes/client-node and a few of its dependencies; the
  // AI SDK, ai and @ai-sdk/*, and what it imports, for the stock-client tests): Node 24 requires
  // them natively (the server in dist/), jest's module runtime only with --experimental-vm-modules,
  // so swc turns them into CommonJS for tests.
  // The OTLP exporters' transport loads node:http with a dynamic import() when it first sends,
  // which jest's module runtime refuses without --experimental-vm-modules: in tests alone, swc
  // turns those imports into require() (the server in dist/ runs them natively).
  transformIgnorePatterns: ['/node_modules/(?!(@kubernetes/client-node|openid-client|oauth4webapi|jose|socks-proxy-agent|agent-base|ai|@ai-sdk|@vercel|eventsource-parser|@standard-schema|zod|@workflow|@opentelemetry/otlp-exporter-base)/)'],
  transform: {
    '/node_modules/@opentelemetry/otlp-exporter-base/.+\\.cjs$': ['@swc/jest', { jsc: { target: 'es2022' }, module: { type: 'commonjs', ignoreDynamic: false } }],
    '/node_modules/.+\\.js$': ['@swc/jest', { jsc: { target: 'es2022' }, module: { type: 'commonjs', ignoreDynamic: true } }],
    '^.+\\.ts$': ['@swc/jest', {
      jsc: {
        parser: { syntax: 'typescript', decorators: true },
        transform: { legacyDecorator: true, decoratorMetadata: true, useDefineForClassFields: false },
        target: 'es2022',
      },
      module: { type: 'commonjs', ignoreDynamic: true },
    }],
  },
};
