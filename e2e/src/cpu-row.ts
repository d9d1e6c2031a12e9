/** bench:cpu's rows, shared by its Node part (bench-cpu.ts) and its Chromium part (cpu-chromium.ts). */

export const SIDES = ['client', 'proxy', 'emulator'] as const;
export type Side = (typeof SIDES)[number];
export const CODED_MODES = ['uncoded', 'rlnc', 'fountain'] as const;
export type CpuMode = (typeof CODED_MODES)[number];
export const TRANSPORTS = ['webrtc', 'quic'] as const;
export type Transport = (typeof TRANSPORTS)[number];
export const RUNTIMES = ['node', 'chromium'] as const;
export type Runtime = (typeof RUNTIMES)[number];

export interface CpuRow {
  runtime: Runtime;
  side: Side;
  mode: CpuMode | 'udp';
  transport: Transport | 'tun';
  bytes: number;
  packets: number;
  cpuMs: number;
  cpuMsPerMiB: number;
  usPerPacket: number;
  /** Client rows: the share of the CPU spent on the JavaScript thread. */
  mainThreadShare?: number;
}

export const MIB = 1 << 20;
export const round = (x: number, d = 2) => Math.round(x * 10 ** d) / 10 ** d;
