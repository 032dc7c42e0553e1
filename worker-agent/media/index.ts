/** Deterministic media for the CPU engine, plus the small readers callers and tests need. */
export { renderImage, type RenderImageOptions } from './render-image';
export { editImage, type EditImageOptions } from './edit-image';
export { renderVideo, VIDEO_FPS_RANGE, type RenderVideoOptions } from './render-video';
export { readMp4Info, type Mp4Info } from './mp4-info';
export { readMp4Samples } from './mp4-samples';
export { Mp4FormatError } from './mp4-box-reader';
export { pngSize } from './png-size';
export { MediaInputError, type MediaInputField } from './media-input-error';
export { MAX_MEDIA_DIMENSION } from './media-dimensions';
