import type { Deployment } from '../../control-plane/deployments/deployment.entity';
import { firstRunBanner } from '../../gateway/first-run-banner';

const deployment = (id: string, modelId: string) => ({ id, modelId, slug: `${id}-slug`, status: 'Running' } as Deployment);
const chat = deployment('dep_cpu', 'meta-llama/Llama-3.1-8B-Instruct');
const gguf = deployment('dep_gguf', 'local/qwen2.5-0.5b-instruct-q4_k_m');
const baseUrl = (slug: string) => `http://localhost:8080/d/${slug}/v1`;
const standIn = (deployment: Deployment) => deployment.id === 'dep_cpu';
const COMMAND = 'LOCAL_MODEL_PATH=/path/to/model.gguf npm start';

describe('first-run banner', () => {
  it('first start on the CPU stand-in: says the answers are placeholder words and shows the line to real ones', () => {
    const banner = firstRunBanner({ created: true, apiKey: 'mk-test', deployment: chat }, baseUrl, 'http://localhost:8080/graphql', standIn);
    expect(banner).toContain('Model:     meta-llama/Llama-3.1-8B-Instruct');
    expect(banner).toMatch(/stand-in: the built-in CPU engine has no model weights and answers with\s+placeholder words, not meta-llama\/Llama-3\.1-8B-Instruct's/);
    expect(banner).toContain(`\n  ${COMMAND}\n`);
    // The examples keep the real model id.
    expect(banner).toContain("model: 'meta-llama/Llama-3.1-8B-Instruct'");
  });

  it('first start on a real engine: no stand-in words', () => {
    const banner = firstRunBanner({ created: true, apiKey: 'mk-test', deployment: gguf }, baseUrl, 'http://localhost:8080/graphql', standIn);
    expect(banner).not.toMatch(/stand-in|placeholder|LOCAL_MODEL_PATH/);
    expect(banner).toContain("model: 'local/qwen2.5-0.5b-instruct-q4_k_m'");
  });

  it('later starts mark the stand-in deployments and show the line once; with none, say nothing of it', () => {
    const banner = firstRunBanner({ created: false, deployments: [chat, gguf] }, baseUrl, 'http://localhost:8080/graphql', standIn);
    expect(banner).toContain(`meta-llama/Llama-3.1-8B-Instruct  Running   ${baseUrl('dep_cpu-slug')}  (built-in CPU stand-in)`);
    expect(banner).toContain(`local/qwen2.5-0.5b-instruct-q4_k_m  Running   ${baseUrl('dep_gguf-slug')}\n`);
    expect(banner).toContain('answer with placeholder words');
    expect(banner.split(COMMAND)).toHaveLength(2);
    const real = firstRunBanner({ created: false, deployments: [gguf] }, baseUrl, 'http://localhost:8080/graphql', standIn);
    expect(real).not.toMatch(/stand-in|placeholder|LOCAL_MODEL_PATH/);
  });

  it('prints the console URL, and the one-time sign-in link with its lifetime when there is one', () => {
    const expiresAt = new Date(Date.now() + 10 * 60_000);
    const link = 'http://localhost:8080/console/#sign-in=csl-abc';
    const withLink = firstRunBanner({ created: true, apiKey: 'mk-test', deployment: chat }, baseUrl, 'http://localhost:8080/graphql', standIn,
      { url: 'http://localhost:8080/console/', signInLink: { url: link, expiresAt } });
    expect(withLink).toContain('Console:   http://localhost:8080/console/\n');
    expect(withLink).toContain(`\n  ${link}\n`);
    expect(withLink).toMatch(/works once, for 10 minutes/);
    const withoutLink = firstRunBanner({ created: false, deployments: [chat] }, baseUrl, 'http://localhost:8080/graphql', standIn, { url: 'http://localhost:8080/console/' });
    expect(withoutLink).toContain('Console:   http://localhost:8080/console/ (sign in with a workspace API key)');
    expect(withoutLink).not.toContain('sign-in=');
  });
});
