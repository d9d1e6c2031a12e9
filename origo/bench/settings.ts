/** What a load run is asked to do (the flags of bench:origo). */
export interface LoadSettings {
  clients: number;
  proxies: number;
  /** Fraction of the clients that make offers during the run (the rest only hold a session). */
  activeFraction: number;
  /** Offers per second, all active clients together. */
  offerRate: number;
  requestCount: number;
  heartbeatIntervalMs: number;
  warmupMs: number;
  steadyMs: number;
  handshakeConcurrency: number;
  clientsPerAddress: number;
  answerTimeoutMs: number;
  connectTimeoutMs: number;
  sdpBytes: number;
  /** More flags for every origo instance (experiments, e.g. --cluster-refresh-ms 2000). */
  origoArgs: string[];
  /** Flags for the node running each instance (profiling, e.g. --cpu-prof --cpu-prof-dir=/tmp/p). */
  origoNodeArgs: string[];
}
