/**
 * Admission of one source (proxy): transfer slots in total, per client and per client network,
 * and a memory budget in bytes that every transfer's state (sender bookkeeping, codec copies,
 * objects the cache does not hold) is charged to before it is allocated. One Admission serves
 * every client of a proxy, MUTP and Parallel HTTP alike; the simulator runs the same one per
 * source.
 *
 * Client ids are free, so a per-client limit alone lets one attacker with many ids hold the
 * whole proxy (issue 31, attack 2: two ids with 16 REQUESTs each filled the memory budget and
 * honest clients got Overloaded). A network (IPv4 /24, IPv6 /48, as origo vouches for it) may
 * hold at most 1/minNetworks of the transfer slots and of the memory budget.
 */

export interface AdmissionLimits {
  maxTransfers: number;
  maxPerClient: number;
  /** Bytes of transfer state (beyond the object cache) the proxy may hold at once. */
  memoryBytes: number;
  /** The fewest client networks that can fill the proxy (each holds at most 1/n); default 1. */
  minNetworks?: number;
}

/** A network's share of `total` when at least `minNetworks` networks must be able to fill it. */
export function networkShare(total: number, minNetworks: number): number {
  return Math.max(1, Math.floor(total / Math.max(1, minNetworks)));
}

/** A granted slot. Releasing twice is harmless; charges grow the slot's share of the memory budget. */
export interface Grant {
  /** Adds `bytes` to this slot's charge; false (and nothing charged) when the budget cannot take them. */
  charge(bytes: number): boolean;
  /** Bytes this slot holds now. */
  readonly charged: number;
  release(): void;
}

export type AdmissionResult = { ok: true; grant: Grant } | { ok: false; reason: string };

/** A pool of bytes; charges are refused, never overdrawn. */
export class MemoryBudget {
  private usedBytes = 0;
  private peakBytes = 0;
  private reclaimer?: (bytes: number) => void;

  constructor(readonly limitBytes: number) {}

  /**
   * Memory held only to save work later (idle encoders) is given back through `reclaim` when a
   * charge would not fit otherwise: it asks for at least `bytes`. One reclaimer per budget.
   */
  setReclaimer(reclaim: (bytes: number) => void): void {
    if (this.reclaimer) throw new Error('this memory budget already has a reclaimer');
    this.reclaimer = reclaim;
  }

  tryTake(bytes: number): boolean {
    if (!(bytes >= 0)) throw new RangeError(`cannot charge ${bytes} bytes`);
    if (this.usedBytes + bytes > this.limitBytes && this.reclaimer)
      this.reclaimer(this.usedBytes + bytes - this.limitBytes);
    if (this.usedBytes + bytes > this.limitBytes) return false;
    this.usedBytes += bytes;
    if (this.usedBytes > this.peakBytes) this.peakBytes = this.usedBytes;
    return true;
  }

  /** Charges bytes that are already spent, even past the limit (later tryTake calls then fail). */
  takeAnyway(bytes: number): void {
    this.usedBytes += bytes;
    if (this.usedBytes > this.peakBytes) this.peakBytes = this.usedBytes;
  }

  give(bytes: number): void {
    this.usedBytes = Math.max(0, this.usedBytes - bytes);
  }

  get used(): number {
    return this.usedBytes;
  }

  get peak(): number {
    return this.peakBytes;
  }
}

interface NetworkUse {
  transfers: number;
  bytes: number;
}

export class Admission {
  readonly memory: MemoryBudget;
  private active = 0;
  private readonly perClient = new Map<string, number>();
  private readonly perNetwork = new Map<string, NetworkUse>();
  private readonly networkTransfers: number;
  private readonly networkBytes: number;

  constructor(private readonly limits: AdmissionLimits) {
    this.memory = new MemoryBudget(limits.memoryBytes);
    const minNetworks = limits.minNetworks ?? 1;
    this.networkTransfers = networkShare(limits.maxTransfers, minNetworks);
    this.networkBytes = minNetworks <= 1 ? Infinity : networkShare(limits.memoryBytes, minNetworks);
  }

  /**
   * A slot charged with `bytes`, or why not (the proxy, this client or its network at its limit,
   * memory full). `networkKey` is the client's network; a client with none is its own network.
   */
  tryAcquire(clientKey: string, bytes = 0, networkKey = clientKey): AdmissionResult {
    if (this.active >= this.limits.maxTransfers)
      return { ok: false, reason: `proxy at its limit of ${this.limits.maxTransfers} transfers` };
    const mine = this.perClient.get(clientKey) ?? 0;
    if (mine >= this.limits.maxPerClient)
      return { ok: false, reason: `client at its limit of ${this.limits.maxPerClient} transfers` };
    const network = this.perNetwork.get(networkKey) ?? { transfers: 0, bytes: 0 };
    if (network.transfers >= this.networkTransfers)
      return { ok: false, reason: `client network at its share of ${this.networkTransfers} transfers` };
    if (network.bytes + bytes > this.networkBytes)
      return { ok: false, reason: 'client network at its share of the memory budget' };
    if (!this.memory.tryTake(bytes)) return { ok: false, reason: 'proxy memory budget for transfers is full' };
    this.active++;
    this.perClient.set(clientKey, mine + 1);
    network.transfers++;
    network.bytes += bytes;
    this.perNetwork.set(networkKey, network);
    return { ok: true, grant: this.grant(clientKey, network, networkKey, bytes) };
  }

  private grant(clientKey: string, network: NetworkUse, networkKey: string, initial: number): Grant {
    const memory = this.memory;
    const networkBytes = this.networkBytes;
    let charged = initial;
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      memory.give(charged);
      network.bytes -= charged;
      network.transfers--;
      if (network.transfers === 0) this.perNetwork.delete(networkKey);
      charged = 0;
      this.active--;
      const left = (this.perClient.get(clientKey) ?? 1) - 1;
      if (left > 0) this.perClient.set(clientKey, left);
      else this.perClient.delete(clientKey);
    };
    return {
      charge: (bytes) => {
        if (released || network.bytes + bytes > networkBytes || !memory.tryTake(bytes)) return false;
        charged += bytes;
        network.bytes += bytes;
        return true;
      },
      get charged() {
        return charged;
      },
      release,
    };
  }

  get activeTransfers(): number {
    return this.active;
  }

  get maxTransfers(): number {
    return this.limits.maxTransfers;
  }
}
