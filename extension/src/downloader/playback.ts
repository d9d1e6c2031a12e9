/**
 * The frame's playback session (the core's PlaybackSession): one per client, mode and N, made
 * again when any of them changes. It keeps one proxy set for the frame, downloads the staged
 * requests through it (GetOptions.use), hints upcoming segments to it as SoftStage's rule says,
 * and replaces proxies that failed only between two segments (chunk-aware handoff), in the
 * background: the page gets its bytes first.
 */
import type { Clock, GetOptions, GetResult, OrigoDown, StagerStats, StagingClient } from '@mutp/shared/client';
import { PlaybackClient, PlaybackSession } from '@mutp/shared/client';
import type { GetRequest } from '../common/messages';
import type { Settings } from '../common/settings';

/** The part of MutpClient the downloader uses. */
export interface ClientLike {
  get(url: string, options: GetOptions): Promise<GetResult>;
  close(): void;
  /** Set while origo is in its back-off period (MutpClient with a back-off policy). */
  origoDown?(): OrigoDown | undefined;
  /** Whether a `mode` download has open links to go through while origo is away (MutpClient). */
  hasOpenLinks?(mode: GetOptions['mode']): boolean;
  /** Opens the origo session ahead of the first request (MutpClient). */
  prepare?(timeoutMs: number): void;
  /** Staging (MutpClient): without these, segments are never staged. */
  chooseProxies?: StagingClient['chooseProxies'];
  stage?: StagingClient['stage'];
  /** While origo is away, handoffs wait for its return (MutpClient). */
  origoAway?: StagingClient['origoAway'];
  /** Proxies that said they are going away (MutpClient): replaced between segments. */
  leavingProxies?: StagingClient['leavingProxies'];
  onProxyLeaving?: StagingClient['onProxyLeaving'];
  /** Network changes the client has seen (MutpClient): the set is asked for again after one (locality). */
  networkChanges?: StagingClient['networkChanges'];
}

export class FramePlayback {
  private current?: { key: string; session: PlaybackSession };

  constructor(private readonly clock: Clock) {}

  /**
   * The session for this request's client (`clientKey` names it), mode and N (a new one when any
   * changed), or undefined when the request is not staged: staging off, Parallel HTTP, no
   * playlist position, or a client that cannot stage.
   */
  sessionFor(client: ClientLike, clientKey: string, req: GetRequest, settings: Settings): PlaybackSession | undefined {
    if (!settings.staging || req.mode === 'http' || req.track === undefined) return undefined;
    const { chooseProxies, stage, onProxyLeaving } = client;
    if (!chooseProxies || !stage) return undefined;
    const key = `${clientKey} ${req.mode} ${req.proxies}`;
    if (this.current?.key !== key) {
      this.current?.session.close();
      const playbackClient: PlaybackClient = {
        get: (url, o) => client.get(url, o),
        chooseProxies: (count, mode, o) => chooseProxies.call(client, count, mode, o),
        stage: (url, proxies, o) => stage.call(client, url, proxies, o),
        leavingProxies: () => client.leavingProxies?.() ?? [],
        origoAway: () => client.origoAway?.() ?? false,
        networkChanges: () => client.networkChanges?.() ?? 0,
        // A proxy going away mid-segment: the session begins its handoff at the next segment at once.
        ...(onProxyLeaving ? { onProxyLeaving: (listener) => onProxyLeaving.call(client, listener) } : {}),
      };
      // Every segment at the whole set: a player paced by its buffer gained nothing from the spread
      // rule in Chromium (no fewer stalls, lower segment goodput), and on a busy machine its staging
      // can look behind and cost the page sources (docs/testbed.md, "Mobility").
      const session = new PlaybackSession(playbackClient, this.clock, {
        mode: req.mode,
        proxies: req.proxies,
        staging: true,
        spread: req.proxies,
        handoff: 'background',
      });
      this.current = { key, session };
    }
    return this.current.session;
  }

  /** What staging did in this frame (undefined before the first staged request). */
  stats(): StagerStats | undefined {
    return this.current?.session.stats();
  }

  close(): void {
    this.current?.session.close();
    this.current = undefined;
  }
}
