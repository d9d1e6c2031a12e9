import { MAX_FEEDBACK_GENERATIONS } from './limits';
import { Mode } from './wire';

/**
 * How an object is cut into symbols and units. A unit is what the window and the feedback count:
 * one packet in uncoded mode, one generation of `generationSize` symbols in rlnc mode.
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
    this.symbolsPerUnit = mode === 'uncoded' ? 1 : generationSize;
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
   * Window in units for a window of `packets` packets (rlnc: whole generations, at least one, and
   * no more than one feedback can report).
   */
  windowUnits(packets: number): number {
    if (this.mode === 'uncoded') return packets;
    return Math.min(MAX_FEEDBACK_GENERATIONS, Math.max(1, Math.floor(packets / this.generationSize)));
  }

  get totalDof(): number {
    return this.symbolCount;
  }
}
