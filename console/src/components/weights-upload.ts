import { useState } from 'react';
import { type CombinedError, useMutation } from 'urql';
import { graphql } from '../gql';

const CREATE_UPLOAD_LINK = graphql(`
  mutation CreateAdapterUploadLink($input: AdapterUploadLinkInput!) { createAdapterUploadLink(input: $input) { path fileId } }
`);

/** Where an upload stands: how much of the file went (0 to 1), or its failure in words. */
export interface UploadState {
  progress: number | null;
  /** The PUT's refusal (OpenAI's error body) or a broken connection, shown beside the file field. */
  error: string | undefined;
  /** The link mutation's refusal (BAD_USER_INPUT naming bytes, filename or deploymentId). */
  linkError: CombinedError | undefined;
}

/**
 * Uploads adapter weights from the browser: a one-time link from `createAdapterUploadLink`, then
 * a PUT of the raw bytes to its path on this origin (the page's CSP allows only `'self'`, and
 * the link's host name may not be the one the console was opened under). XMLHttpRequest, not
 * fetch: only it reports upload progress. Resolves to the new file's id, or null on failure.
 */
export function useWeightsUpload(): { state: UploadState; upload: (file: File, deploymentId: string) => Promise<string | null>; clear: () => void } {
  const [link, createLink] = useMutation(CREATE_UPLOAD_LINK);
  const [progress, setProgress] = useState<number | null>(null);
  const [error, setError] = useState<string | undefined>();
  const upload = async (file: File, deploymentId: string): Promise<string | null> => {
    setError(undefined);
    const answer = await createLink({ input: { filename: file.name, bytes: file.size, deploymentId } });
    if (!answer.data) return null;
    const { path, fileId } = answer.data.createAdapterUploadLink;
    setProgress(0);
    try {
      await put(path, file, setProgress);
      return fileId;
    } catch (failure) {
      setError(failure instanceof Error ? failure.message : String(failure));
      return null;
    } finally {
      setProgress(null);
    }
  };
  return { state: { progress, error, linkError: link.error }, upload, clear: () => setError(undefined) };
}

function put(path: string, file: File, onProgress: (fraction: number) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const request = new XMLHttpRequest();
    request.open('PUT', path);
    request.upload.onprogress = (event) => { if (event.lengthComputable) onProgress(event.loaded / event.total); };
    request.onload = () => {
      if (request.status >= 200 && request.status < 300) return resolve();
      reject(new Error(messageOf(request.responseText) ?? `the upload failed with HTTP ${request.status}`));
    };
    request.onerror = () => reject(new Error('the upload was cut off (the connection failed); try again'));
    request.send(file);
  });
}

function messageOf(text: string): string | undefined {
  try {
    const message = (JSON.parse(text) as { error?: { message?: unknown } }).error?.message;
    return typeof message === 'string' ? message : undefined;
  } catch {
    return undefined;
  }
}
