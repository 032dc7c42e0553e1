/**
 * A smooth animated plasma whose waves and palette come from one seed: it looks like a
 * picture, costs a few table lookups per pixel (1024x1024 in ~25 ms) and only uses
 * arithmetic that V8 evaluates identically everywhere, so renders are byte-repeatable.
 */
import { seededRandom } from '../../common/seeded-random';

const TAU = Math.PI * 2;
/**
 * Held locally because inside a vm context (jest runs every test file in one) each lookup of
 * the global `Math` goes through an interceptor: the per-pixel loop ran 15x slower there.
 */
const { sqrt } = Math;
/** A power of two so the palette index can wrap with a mask; 1024 steps show no banding. */
const PALETTE_SIZE = 1024;

interface Wave {
  /** Cycles across the image's longer side. */
  readonly cycles: number;
  readonly offset: number;
  /** Radians per second of animation. */
  readonly speed: number;
}

export class SeededPattern {
  private readonly palette = new Uint8Array(PALETTE_SIZE * 3);
  private readonly columnWave: Wave;
  private readonly rowWave: Wave;
  private readonly slantWave: Wave;
  private readonly slantAngle: number;
  private readonly ringWave: Wave;
  private readonly ringCentre: readonly [number, number];
  /** Palette periods spanned by the plasma's full range, and how fast the colours cycle. */
  private readonly paletteSpan: number;
  private readonly paletteCyclesPerSecond: number;

  constructor(seed: number) {
    const random = seededRandom(seed);
    const between = (low: number, high: number) => low + (high - low) * random();
    const wave = (): Wave => ({ cycles: between(0.6, 2.4), offset: between(0, TAU), speed: between(0.4, 1.6) * (random() < 0.5 ? -1 : 1) });
    this.columnWave = wave();
    this.rowWave = wave();
    this.slantWave = wave();
    this.slantAngle = between(0, TAU);
    this.ringWave = wave();
    this.ringCentre = [between(0.2, 0.8), between(0.2, 0.8)];
    this.paletteSpan = between(0.7, 1.5);
    this.paletteCyclesPerSecond = between(0.05, 0.2);
    this.fillPalette(random);
  }

  /** Raw RGB pixels (3 bytes each, row-major) at `time` seconds into the animation. */
  render(width: number, height: number, time = 0): Buffer {
    const longerSide = Math.max(width, height);
    const columns = this.waveTable(width, this.columnWave, longerSide, time);
    const rows = this.waveTable(height, this.rowWave, longerSide, time);
    // sin(a + b) = sin a cos b + cos a sin b keeps the slanted wave to four lookups per pixel.
    const slantX = this.slantTables(width, Math.cos(this.slantAngle), longerSide, time);
    const slantY = this.slantTables(height, Math.sin(this.slantAngle), longerSide, 0);
    const ring = this.ringTable(width, height, longerSide, time);
    const [centreX, centreY] = [this.ringCentre[0] * width, this.ringCentre[1] * height];
    const scale = (PALETTE_SIZE * this.paletteSpan) / 8;
    const shift = PALETTE_SIZE * (2 + this.paletteCyclesPerSecond * time);
    const pixels = Buffer.allocUnsafe(width * height * 3);
    let out = 0;
    for (let y = 0; y < height; y += 1) {
      const deltaY = y - centreY;
      const rowValue = rows[y];
      const sinY = slantY.sin[y];
      const cosY = slantY.cos[y];
      for (let x = 0; x < width; x += 1) {
        const deltaX = x - centreX;
        const radius = sqrt(deltaX * deltaX + deltaY * deltaY);
        const whole = radius | 0;
        const ringValue = ring[whole] + (ring[whole + 1] - ring[whole]) * (radius - whole);
        const slant = slantX.sin[x] * cosY + slantX.cos[x] * sinY;
        const sum = columns[x] + rowValue + slant + ringValue + 4;
        const entry = (((sum * scale + shift) | 0) & (PALETTE_SIZE - 1)) * 3;
        pixels[out] = this.palette[entry];
        pixels[out + 1] = this.palette[entry + 1];
        pixels[out + 2] = this.palette[entry + 2];
        out += 3;
      }
    }
    return pixels;
  }

  /** A cosine palette (a + b·cos 2π(t + d)) with whole periods, so indices wrap seamlessly. */
  private fillPalette(random: () => number): void {
    const amplitudes = [0, 1, 2].map(() => 0.3 + 0.2 * random());
    const phases = [0, 1, 2].map(() => random());
    const harmonic = 0.12 * random();
    for (let index = 0; index < PALETTE_SIZE; index += 1) {
      const t = index / PALETTE_SIZE;
      for (let channel = 0; channel < 3; channel += 1) {
        const angle = TAU * (t + phases[channel]);
        const value = 0.5 + amplitudes[channel] * Math.cos(angle) + harmonic * Math.cos(2 * angle);
        this.palette[index * 3 + channel] = Math.round(255 * Math.min(1, Math.max(0, value)));
      }
    }
  }

  private waveTable(length: number, wave: Wave, longerSide: number, time: number): Float64Array {
    const table = new Float64Array(length);
    const step = (TAU * wave.cycles) / longerSide;
    const start = wave.offset + wave.speed * time;
    for (let index = 0; index < length; index += 1) table[index] = Math.sin(start + step * index);
    return table;
  }

  private slantTables(length: number, direction: number, longerSide: number, time: number) {
    const sin = new Float64Array(length);
    const cos = new Float64Array(length);
    const step = (TAU * this.slantWave.cycles * direction) / longerSide;
    const start = this.slantWave.offset + this.slantWave.speed * time;
    for (let index = 0; index < length; index += 1) {
      sin[index] = Math.sin(start + step * index);
      cos[index] = Math.cos(start + step * index);
    }
    return { sin, cos };
  }

  /** The ring wave by whole-pixel radius; pixels interpolate between neighbouring entries. */
  private ringTable(width: number, height: number, longerSide: number, time: number): Float64Array {
    const length = Math.ceil(Math.hypot(width, height)) + 2;
    const table = new Float64Array(length);
    const step = (TAU * this.ringWave.cycles) / longerSide;
    const start = this.ringWave.offset - this.ringWave.speed * time;
    for (let radius = 0; radius < length; radius += 1) table[radius] = Math.sin(start + step * radius);
    return table;
  }
}
