/**
 * Socket budgets per path (proxy and client paths are counted apart, so a client flood cannot
 * lock proxies out): all open sockets, those still greeting (oldest first), and both per address.
 */
import { OrigoConfig } from '../config';
import { Kind } from './session';

/** What a budget needs to know of a socket. */
export interface Budgeted {
  readonly kind: Kind;
  readonly address: string;
}

type Limits = Pick<OrigoConfig, 'maxSocketsPerAddress' | 'maxPendingSockets' | 'maxPendingPerAddress'>;

interface AddressCount {
  open: number;
  pending: number;
}

export class SocketBudgets<S extends Budgeted> {
  private readonly open: Record<Kind, number> = { proxy: 0, client: 0 };
  private readonly pending: Record<Kind, Set<S>> = { proxy: new Set(), client: new Set() };
  private readonly perAddress: Record<Kind, Map<string, AddressCount>> = { proxy: new Map(), client: new Map() };

  constructor(private readonly config: Limits) {}

  /** Why a new socket on this path from this address is refused, if it is. */
  refusal(kind: Kind, address: string, maxGreeted: number): 'busy' | 'address-limit' | undefined {
    // Greeted sessions are capped by the broker (max proxies/clients); all sockets by this.
    if (this.open[kind] >= 2 * maxGreeted) return 'busy';
    const mine = this.perAddress[kind].get(address) ?? { open: 0, pending: 0 };
    if (mine.open >= this.config.maxSocketsPerAddress || mine.pending >= this.config.maxPendingPerAddress) {
      return 'address-limit';
    }
    return undefined;
  }

  /**
   * The socket to close to make room when the budget of sockets still greeting is full: they are
   * few and short-lived, so the oldest goes and a flood of silent sockets cannot keep a
   * re-registering proxy out.
   */
  evictable(kind: Kind): S | undefined {
    if (this.pending[kind].size < this.config.maxPendingSockets) return undefined;
    return this.pending[kind].values().next().value;
  }

  /** Counts a new socket, greeting until `greeted`. */
  admit(session: S): void {
    const { kind, address } = session;
    let mine = this.perAddress[kind].get(address);
    if (mine === undefined) {
      mine = { open: 0, pending: 0 };
      this.perAddress[kind].set(address, mine);
    }
    this.open[kind]++;
    mine.open++;
    mine.pending++;
    this.pending[kind].add(session);
  }

  /** The socket no longer counts as greeting (it sent its greeting, or is being closed). */
  greeted(session: S): void {
    if (!this.pending[session.kind].delete(session)) return;
    const mine = this.perAddress[session.kind].get(session.address);
    if (mine) mine.pending--;
  }

  /** The socket closed. */
  released(session: S): void {
    this.greeted(session);
    this.open[session.kind]--;
    const mine = this.perAddress[session.kind].get(session.address);
    if (mine && --mine.open === 0) this.perAddress[session.kind].delete(session.address);
  }
}
