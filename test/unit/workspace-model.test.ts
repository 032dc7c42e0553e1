import type { Deployment } from '../../control-plane/deployments/deployment.entity';
import { AppError } from '../../control-plane/errors/app-error';
import { LISTED_CHOICES, pickDeployment } from '../../control-plane/deployments/workspace-model';
import { scanModel, withModel } from '../../gateway/v1/model-field';

const deployment = (slug: string, modelId: string) => ({ slug, modelId, id: `dep_${slug}` }) as Deployment;

describe('pickDeployment (the workspace base URL\'s model)', () => {
  const chatA = deployment('chat-a', 'org/chat');
  const chatB = deployment('chat-b', 'org/chat');
  const embed = deployment('embed-1', 'org/embed');

  it('takes a slug, or a catalog model id exactly one deployment serves', () => {
    expect(pickDeployment([chatA, chatB, embed], 'chat-b')).toBe(chatB);
    expect(pickDeployment([chatA, chatB, embed], 'org/embed')).toBe(embed);
  });

  it('prefers a slug over a model id spelled the same', () => {
    const odd = deployment('org-model', 'x/y');
    const named = deployment('other', 'org-model');
    expect(pickDeployment([named, odd], 'org-model')).toBe(odd);
  });

  const refusal = (deployments: Deployment[], model: unknown): AppError => {
    try {
      pickDeployment(deployments, model);
    } catch (error) {
      return error as AppError;
    }
    throw new Error('not refused');
  };

  it('refuses an ambiguous model with 400 naming the slugs', () => {
    const error = refusal([chatA, chatB, embed], 'org/chat');
    expect([error.code, error.param]).toEqual(['invalid_request', 'model']);
    expect(error.message).toContain('chat-a, chat-b');
  });

  it('refuses an unknown model with 404 and a bounded list of choices, the echo shortened', () => {
    const many = Array.from({ length: 25 }, (_, index) => deployment(`d-${index}`, `m/${index}`));
    const error = refusal(many, 'z'.repeat(10_000));
    expect([error.code, error.param]).toEqual(['model_not_found', 'model']);
    expect(error.message).toContain(`d-${LISTED_CHOICES - 1} (m/${LISTED_CHOICES - 1})`);
    expect(error.message).not.toContain(`d-${LISTED_CHOICES} `);
    expect(error.message).toContain('and 15 more');
    expect(error.message.length).toBeLessThan(1_000);
    expect(refusal([], 'a').message).toContain('no deployments');
  });

  it('refuses a missing or non-string model with 400 naming model', () => {
    for (const model of [undefined, null, 7, ['a']]) {
      expect(refusal([chatA], model)).toMatchObject({ code: 'invalid_request', param: 'model' });
    }
  });
});

describe('the model field of a raw JSON body', () => {
  it('is read by the scan and replaced in place, every other byte kept', () => {
    const raw = Buffer.from('{"messages":[{"role":"user","content":"\\"model\\": \\"no\\""}], "model" : "chat-a" ,"n":1}');
    const scanned = scanModel(raw);
    expect(scanned.model).toBe('chat-a');
    expect(withModel(raw, scanned, 'org/chat').toString()).toBe('{"messages":[{"role":"user","content":"\\"model\\": \\"no\\""}], "model" : "org/chat" ,"n":1}');
    expect(withModel(raw, { model: 'org/chat', span: scanned.span }, 'org/chat')).toBe(raw);
  });

  it('leaves a nested model to the parse, and a malformed body to its 400', () => {
    expect(scanModel(Buffer.from('{"model":{"a":1}}')).model).toEqual({ a: 1 });
    expect(() => scanModel(Buffer.from('{"model":'))).toThrow(AppError);
    expect(scanModel(Buffer.from('{"input":"x"}')).model).toBeUndefined();
  });
});
