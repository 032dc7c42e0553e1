/**
 * What `import sharp from 'sharp'` resolves to in the agent's bundle (build-agent.ts): sharp
 * is a native addon, so the single binary loads it from its embedded modules, and the npm
 * package from its own dependencies. Loaded on first use: an agent that never renders an image
 * never loads libvips. Only the call `sharp(input, options)` is offered, which is all the agent uses.
 */
import type SharpModule from 'sharp';
import { requireEmbedded, runningAsBinary } from './embedded-modules';

let loaded: typeof SharpModule | undefined;

function load(): typeof SharpModule {
  // A run-time require, resolved beside the bundle (the package's node_modules), never bundled.
  loaded ??= (runningAsBinary() ? requireEmbedded('sharp') : require('sharp')) as typeof SharpModule;
  return loaded;
}

const sharp = ((...args: Parameters<typeof SharpModule>) => load()(...args)) as typeof SharpModule;
export default sharp;
