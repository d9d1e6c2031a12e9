/**
 * What selection (selection.ts, selection-index.ts) and its operator rule (operator-spread.ts)
 * know of a proxy and of a request: in a file of their own so the rules import them without
 * importing each other.
 */
export type SelectableMode = 'uncoded' | 'rlnc' | 'fountain';

/** What selection needs to know about a proxy. */
export interface ProxyLoad {
  proxyId: string;
  modes: ReadonlySet<SelectableMode>;
  capacityBps: number;
  /** Throughput clients measured (bytes/s), when enough of them reported. */
  measuredBps?: number;
  uploadBps: number;
  activeTransfers: number;
  maxTransfers: number;
  /** The proxy is shutting down (its heartbeat said so): never offered. */
  draining?: boolean;
  /**
   * Offers of this proxy since its last heartbeat, by every origo instance: counted like
   * transfers in the score (not in eligibility, as offers need not become transfers), so clients
   * asking between two heartbeats spread over near-equal proxies instead of piling onto one.
   */
  recentPicks?: number;
  /** Its region (register), when it declared one: locality. */
  region?: string;
  /** Client address prefixes (CIDR) its region serves, as declared at registration. */
  prefixes?: readonly string[];
  /** Who runs it, as origo's keys file names it (rule 7); none: its own operator. */
  operator?: string;
}

export interface SelectionRequest {
  count: number;
  mode?: SelectableMode;
  exclude?: readonly string[];
  /** The client's region (clientRegion): its proxies are preferred (rule 6). */
  region?: string;
  /**
   * The region the client says it is in: followed only without `region`, and only when at least
   * MIN_HINTED_REGION_PROXIES eligible proxies declared it, so that it narrows the client's own
   * offers but never to a proxy of its choosing.
   */
  regionHint?: string;
}
