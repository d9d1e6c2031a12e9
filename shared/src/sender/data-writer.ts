/**
 * DATA datagrams: the header and the encoded payload of one unit, written in the host's datagram
 * buffer when it gives one. Fountain block ids are chosen here.
 */
import { Codec, UnitEncoder } from '../codec/types';
import { Layout } from '../layout';
import { Random } from '../random';
import {
  DATA_FOUNTAIN_HEADER_BYTES,
  DATA_RLNC_HEADER_BYTES,
  DATA_UNCODED_HEADER_BYTES,
  RequestMessage,
  writeDataFountainHeader,
  writeDataRlncHeader,
  writeDataUncodedHeader,
} from '../wire';

export class DataWriter {
  /** See Sender.datagramBuffer. */
  datagramBuffer?: Uint8Array;
  /** The last view of datagramBuffer handed out (most datagrams of a transfer have one length). */
  private datagramView?: Uint8Array;
  private datagramPayload?: Uint8Array;
  /** The payload part of the datagram datagramOf() returned last. */
  private payload: Uint8Array = new Uint8Array(0);
  private readonly encoder: UnitEncoder;
  private readonly transferId: number;
  private readonly sourceIndex: number;
  private readonly sourceCount: number;
  /** Fountain: how many block ids this source has used per source block (see write). */
  private readonly blockIdsUsed: Uint32Array;

  constructor(
    codec: Codec,
    object: Uint8Array,
    private readonly layout: Layout,
    request: RequestMessage,
    private readonly random: Random,
  ) {
    this.encoder = codec.createEncoder(object, layout);
    this.transferId = request.transferId;
    this.sourceIndex = request.sourceIndex;
    this.sourceCount = request.sourceCount;
    this.blockIdsUsed = new Uint32Array(layout.mode === 'fountain' ? layout.unitCount : 0);
  }

  /** Fountain block ids start at `round` (a resumed transfer: this source index sent those before). */
  skipBlockRounds(round: number): void {
    this.blockIdsUsed.fill(round);
  }

  /** DATA `seq` of `unit`, ready to send (a view of datagramBuffer, valid until the next write). */
  write(unit: number, seq: number): Uint8Array {
    const payloadLength = this.layout.payloadLength(unit);
    let datagram: Uint8Array;
    if (this.layout.mode === 'uncoded') {
      datagram = this.datagramOf(DATA_UNCODED_HEADER_BYTES, payloadLength);
      writeDataUncodedHeader(datagram, this.transferId, seq, unit);
      this.encoder.encodeInto(unit, 0, this.payload);
    } else if (this.layout.mode === 'rlnc') {
      const seed = this.random();
      datagram = this.datagramOf(DATA_RLNC_HEADER_BYTES, payloadLength);
      writeDataRlncHeader(datagram, this.transferId, seq, unit, seed);
      this.encoder.encodeInto(unit, seed, this.payload);
    } else {
      // Source i of N uses block ids i, i + N, i + 2N, ...: the sources never send the same block,
      // and together they start with the systematic ids (the cheapest to decode).
      let blockId = this.sourceIndex + this.sourceCount * this.blockIdsUsed[unit]++;
      while (this.encoder.usableKey && !this.encoder.usableKey(unit, blockId))
        blockId = this.sourceIndex + this.sourceCount * this.blockIdsUsed[unit]++;
      datagram = this.datagramOf(DATA_FOUNTAIN_HEADER_BYTES, payloadLength);
      writeDataFountainHeader(datagram, this.transferId, seq, unit, blockId);
      this.encoder.encodeInto(unit, blockId, this.payload);
    }
    return datagram;
  }

  /** The transfer is over: the encoder's memory goes back. */
  free(): void {
    this.encoder.free();
  }

  /**
   * A datagram to build DATA in, `headerBytes` + `payloadLength` long, and its payload part
   * (`this.payload`): views of datagramBuffer, or a new array.
   */
  private datagramOf(headerBytes: number, payloadLength: number): Uint8Array {
    const length = headerBytes + payloadLength;
    const buffer = this.datagramBuffer;
    if (!buffer || length > buffer.length) {
      const datagram = new Uint8Array(length);
      this.payload = datagram.subarray(headerBytes);
      return datagram;
    }
    let view = this.datagramView;
    if (!view || view.buffer !== buffer.buffer || view.byteOffset !== buffer.byteOffset || view.length !== length) {
      this.datagramView = view = buffer.subarray(0, length);
      this.datagramPayload = buffer.subarray(headerBytes, length);
    }
    this.payload = this.datagramPayload!;
    return view;
  }
}
