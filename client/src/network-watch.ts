/**
 * Network changes in Node, for ClientHost.onNetworkChange: the host's external addresses are
 * read every few seconds (Node has no event for it), and listeners are told when an address the
 * host had is gone, which is when connections bound to it are dead. An address that only appears
 * (a second interface, a VPN) changes nothing for them.
 */
import { networkInterfaces } from 'node:os';

type Interfaces = ReturnType<typeof networkInterfaces>;

/** Addresses a peer connection may be bound to: not loopback, not IPv6 link-local. */
export function externalAddresses(interfaces: Interfaces): Set<string> {
  const out = new Set<string>();
  for (const entries of Object.values(interfaces)) {
    for (const e of entries ?? []) {
      if (e.internal || (e.family === 'IPv6' && e.address.toLowerCase().startsWith('fe80:'))) continue;
      out.add(e.address);
    }
  }
  return out;
}

/** Compares each reading with the last: `lost()` is true when an address of the last one is gone. */
export class AddressBook {
  private known: Set<string>;

  constructor(private readonly read: () => Interfaces = networkInterfaces) {
    this.known = externalAddresses(read());
  }

  /** Reads the addresses again; whether one that was there is gone. */
  lost(): boolean {
    const now = externalAddresses(this.read());
    const gone = [...this.known].some((a) => !now.has(a));
    this.known = now;
    return gone;
  }
}

export const NETWORK_POLL_MS = 2000;

/**
 * ClientHost.onNetworkChange for Node: polls while anyone listens (an unref'd timer, so it never
 * keeps the process alive) and stops with the last listener.
 */
export function nodeNetworkWatch(
  read: () => Interfaces = networkInterfaces,
  pollMs = NETWORK_POLL_MS,
): (listener: () => void) => () => void {
  const listeners = new Set<() => void>();
  let timer: NodeJS.Timeout | undefined;
  let book: AddressBook | undefined;
  return (listener) => {
    listeners.add(listener);
    if (timer === undefined) {
      book = new AddressBook(read);
      timer = setInterval(() => {
        if (book!.lost()) for (const l of [...listeners]) l();
      }, pollMs);
      timer.unref();
    }
    return () => {
      listeners.delete(listener);
      if (listeners.size === 0 && timer !== undefined) {
        clearInterval(timer);
        timer = undefined;
      }
    };
  };
}
