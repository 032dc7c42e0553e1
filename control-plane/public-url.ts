/**
 * The base URL clients (and agents) reach this server at. Known only once the gateway listens
 * (port 0 in tests), yet needed by control-plane parts built before it (signed file links).
 */
export class PublicUrl {
  private value: string | null = null;

  set(url: string): void {
    this.value = url.replace(/\/+$/, '');
  }

  get(): string {
    if (this.value === null) throw new Error('the public URL is not known before the gateway listens');
    return this.value;
  }
}
