/** The request fields whose bytes the media renderers decode; named as clients send them. */
export type MediaInputField = 'image' | 'mask' | 'input_reference';

/**
 * Client-supplied media that cannot be used: undecodable bytes, an unsupported format, a mask
 * without alpha. Carries the field so the caller can answer 400 with `param` set to it,
 * instead of failing the job as if the engine had broken.
 */
export class MediaInputError extends Error {
  constructor(readonly field: MediaInputField, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'MediaInputError';
  }
}
