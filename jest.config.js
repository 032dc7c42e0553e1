/** Tests run from TypeScript sources through swc (decorator metadata on, for type-graphql
 *  and TypeORM); processes that tests spawn (worker agents) run from `dist/`, which
 *  `npm test` builds first. */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test', '<rootDir>/common', '<rootDir>/control-plane', '<rootDir>/gateway', '<rootDir>/worker-agent'],
  testMatch: ['**/*.test.ts'],
  // The fault suite kills and partitions real processes: `npm run test:faults` (jest.faults.config.js).
  // The console suite needs Chromium: `npm run test:console` (jest.console.config.js); the real-cluster suite a KUBECONFIG: `npm run test:k8s`.
  testPathIgnorePatterns: ['/node_modules/', '<rootDir>/test/faults/', '<rootDir>/test/console/', '<rootDir>/test/kubernetes/cluster/'],
  // Some packages are ES modules only (@kubernetes/client-node and a few of its dependencies; the
  // AI SDK, ai and @ai-sdk/*, and what it imports, for the stock-client tests): Node 24 requires
  // them natively (the server in dist/), jest's module runtime only with --experimental-vm-modules,
  // so swc turns them into CommonJS for tests.
  transformIgnorePatterns: ['/node_modules/(?!(@kubernetes/client-node|openid-client|oauth4webapi|jose|socks-proxy-agent|agent-base|ai|@ai-sdk|@vercel|eventsource-parser|@standard-schema|zod|@workflow)/)'],
  transform: {
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
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  testTimeout: 60000,
  maxWorkers: 2,
};
