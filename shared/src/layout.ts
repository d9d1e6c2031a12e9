import { FOUNTAIN_BLOCK_SYMBOLS, MAX_FEEDBACK_BLOCKS, MAX_FEEDBACK_GENERATIONS } from './limits';
import { Mode } from './wire';

/**
 * How an object is cut into symbols and units. A unit is what the window and the feedback count:
 * one packet in uncoded mode, one generation of `generationSize` symbols in rlnc mode, one source
 * block of FOUNTAIN_BLOCK_SYMBOLS symbols in fountain mode (generationSize is unused there).
 */
export class Layout {
  readonly symbolCount: number;
  readonly symbolsPerUnit: number;
  readonly unitCount: number;

  constructor(
    readonly mode: Mode,
    readonly objectLength: number,
    readonly symbolSize: number,
    readonly generationSize: number,
  ) {
    this.symbolCount = Math.ceil(objectLength / symbolSize);
    this.symbolsPerUnit = mode === 'uncoded' ? 1 : mode === 'rlnc' ? generationSize : FOUNTAIN_BLOCK_SYMBOLS;
    this.unitCount = Math.ceil(this.symbolCount / this.symbolsPerUnit);
  }

  /** Symbols (degrees of freedom) in unit u; only the last unit can be short. */
  unitSize(unit: number): number {
    return Math.min(this.symbolsPerUnit, this.symbolCount - unit * this.symbolsPerUnit);
  }

  /** Payload bytes of a data packet for this unit. Coded payloads always carry a full symbol. */
  payloadLength(unit: number): number {
    if (this.mode !== 'uncoded') return this.symbolSize;
    return Math.min(this.symbolSize, this.objectLength - unit * this.symbolSize);
  }

  /**
   * Window in units for a window of `packets` packets (coded: whole units, at least one, and no
   * more than one feedback can report). A fountain block is far larger than any window, so the
   * window there is one block: the sources move to the next only once the client decoded one.
   */
  windowUnits(packets: number): number {
    if (this.mode === 'uncoded') return packets;
    if (this.mode === 'fountain')
      return Math.min(MAX_FEEDBACK_BLOCKS, Math.max(1, Math.floor(packets / this.symbolsPerUnit)));
    return Math.min(MAX_FEEDBACK_GENERATIONS, Math.max(1, Math.floor(packets / this.generationSize)));
  }

  get totalDof(): number {
    return this.symbolCount;
  }
}
