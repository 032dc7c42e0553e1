/** A multipart/form-data body read into memory (multipart.ts). */
export interface UploadedFile {
  data: Buffer;
  filename: string;
  contentType: string;
}

export interface MultipartForm {
  fields: Record<string, string>;
  files: Map<string, UploadedFile[]>;
}
