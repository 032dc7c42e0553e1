import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

/** An ES module (.mts): Vite loads it natively, with no CommonJS shim and no warning at each build. */
const here = path.dirname(fileURLToPath(import.meta.url));

/** Built into dist/console and served by the gateway at /console (gateway/http/console.route.ts). */
export default defineConfig({
  root: here,
  base: '/console/',
  // JSX is compiled by Vite's own transform (tsconfig: react-jsx); @vitejs/plugin-react only adds
  // fast refresh for a dev server, and its peer dependencies conflict with jest's Babel 7.
  build: {
    outDir: path.resolve(here, '../dist/console'),
    emptyOutDir: true,
    // No source maps in what the gateway serves: they would publish the source tree's paths.
    sourcemap: false,
    chunkSizeWarningLimit: 1500,
    rollupOptions: {
      // react-router marks its modules "use client" (for React Server Components); meaningless in a browser bundle.
      onwarn(warning, warn) {
        if (warning.code !== 'MODULE_LEVEL_DIRECTIVE') warn(warning);
      },
    },
  },
});
