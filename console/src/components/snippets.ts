/** What a deployment's snippets need to know of its model (the catalog's fields). */
export interface SnippetModel {
  readonly id: string;
  readonly task: string;
  readonly sizes: readonly string[];
  readonly videoSpec?: { readonly durationSeconds: number; readonly fps: number } | null;
}

export interface Snippets {
  /** A curl command that works as shown once `API_KEY` is set (image edits: with an `input.png` beside it). */
  readonly curl: string;
  /** The same call with the official OpenAI Python SDK. */
  readonly sdk: string;
  /** What to do after the curl, when the answer is not the result (a video job). */
  readonly after?: string;
}

const HEADER = '-H "Authorization: Bearer $API_KEY"';

/**
 * The curl and SDK calls of a deployment, one per catalog task, each as the platform answers it
 * (docs/api-contract.md): chat and completions, embeddings, image generation and edits (a size
 * the model offers), video (multipart `POST /videos` with a size, a duration and, for a model
 * with a pinned clip, its native duration and fps, which the defaults would be refused for).
 * Every curl here is run against a real server by test/console/snippets.test.ts.
 */
export function snippetsFor(baseUrl: string, model: SnippetModel): Snippets {
  const sdkHead = `import os\nfrom openai import OpenAI\n\nclient = OpenAI(base_url="${baseUrl}", api_key=os.environ["API_KEY"])\n`;
  const json = (path: string, body: Record<string, unknown>) => `curl ${baseUrl}/${path} \\\n  ${HEADER} \\\n  -H "Content-Type: application/json" \\\n  -d '${JSON.stringify(body)}'`;
  const id = model.id;
  switch (model.task) {
    case 'completion':
      return {
        curl: json('completions', { model: id, prompt: 'Once upon a time', max_tokens: 32 }),
        sdk: `${sdkHead}result = client.completions.create(model="${id}", prompt="Once upon a time", max_tokens=32)\nprint(result.choices[0].text)`,
      };
    case 'embedding':
      return {
        curl: json('embeddings', { model: id, input: 'The food was delicious and the waiter was kind.' }),
        sdk: `${sdkHead}result = client.embeddings.create(model="${id}", input="The food was delicious and the waiter was kind.")\nprint(len(result.data[0].embedding), result.data[0].embedding[:4])`,
      };
    case 'image-generation': {
      const size = imageSize(model);
      return {
        curl: json('images/generations', { model: id, prompt: 'a lighthouse at dusk', size }),
        sdk: `${sdkHead}result = client.images.generate(model="${id}", prompt="a lighthouse at dusk", size="${size}")\nprint(result.data[0].url)`,
      };
    }
    case 'image-edit': {
      const size = imageSize(model);
      return {
        curl: `curl ${baseUrl}/images/edits \\\n  ${HEADER} \\\n  -F model="${id}" \\\n  -F image=@input.png \\\n  -F prompt="make it dusk" \\\n  -F size=${size}`,
        sdk: `${sdkHead}with open("input.png", "rb") as image:\n    result = client.images.edit(model="${id}", image=image, prompt="make it dusk", size="${size}")\nprint(result.data[0].url)`,
      };
    }
    case 'video-generation': {
      const size = model.sizes[0] ?? '1280x720';
      const seconds = String(model.videoSpec?.durationSeconds ?? 4);
      const fps = model.videoSpec ? ` \\\n  -F fps=${model.videoSpec.fps}` : '';
      const extra = model.videoSpec ? `, extra_body={"fps": ${model.videoSpec.fps}}` : '';
      return {
        curl: `curl ${baseUrl}/videos \\\n  ${HEADER} \\\n  -F model="${id}" \\\n  -F prompt="waves on a beach" \\\n  -F size=${size} \\\n  -F seconds=${seconds}${fps}`,
        sdk: `${sdkHead}import time\n\nvideo = client.videos.create(model="${id}", prompt="waves on a beach", size="${size}", seconds="${seconds}"${extra})\n`
          + 'while video.status in ("queued", "in_progress"):\n    time.sleep(2)\n    video = client.videos.retrieve(video.id)\n'
          + 'client.videos.download_content(video.id).write_to_file("video.mp4")',
        after: `The answer is the video job (202). Poll GET ${baseUrl}/videos/<id> until its status is completed, then GET ${baseUrl}/videos/<id>/content.`,
      };
    }
    default:
      return {
        curl: json('chat/completions', { model: id, messages: [{ role: 'user', content: 'Hello' }] }),
        sdk: `${sdkHead}result = client.chat.completions.create(\n    model="${id}",\n    messages=[{"role": "user", "content": "Hello"}],\n)\nprint(result.choices[0].message.content)`,
      };
  }
}

/** 1024x1024 when the model offers it (the API's own default), else its first size. */
function imageSize(model: SnippetModel): string {
  return model.sizes.includes('1024x1024') ? '1024x1024' : model.sizes[0] ?? '1024x1024';
}
