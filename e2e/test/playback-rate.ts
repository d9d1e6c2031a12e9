/**
 * Faster-than-real-time playback for the browser suites' network-only plays (no extension, the
 * extension switched off, origo hung or refused): their media comes straight from the local
 * origin, so a play's wall time is only the media time it must reach. Played at
 * {@link NETWORK_PLAY_RATE}, a play reaches the same media time, so the player asks for the same
 * segments (players buffer by media time) and every assertion on counters, causes and bytes reads
 * the same requests; a play that must not stall is held to a tighter bound (its buffer drains
 * twice as fast). Plays served by MUTP keep real time: there the download rate is under test.
 */
import type { Page } from 'puppeteer-core';

/** The rate of the network-only plays (wall time = media time / rate). */
export const NETWORK_PLAY_RATE = 2;

interface MediaElement {
  defaultPlaybackRate: number;
  playbackRate: number;
}

type PageDocument = { document: { querySelectorAll(selectors: string): ArrayLike<MediaElement> } };

/**
 * Sets the rate of the page's media elements: the current one, and the default, which the media
 * element falls back to whenever the player gives it a new source (a MediaSource attached later).
 */
export async function setPlaybackRate(page: Page, rate: number): Promise<void> {
  const count = await page.evaluate((r) => {
    const media = Array.from((globalThis as unknown as PageDocument).document.querySelectorAll('video, audio'));
    for (const m of media) {
      m.defaultPlaybackRate = r;
      m.playbackRate = r;
    }
    return media.length;
  }, rate);
  if (count === 0) throw new Error('the page has no media element to set the playback rate of');
}

/** The rates the page's media elements play at (a check that the player kept the one set). */
export async function playbackRates(page: Page): Promise<number[]> {
  return page.evaluate(() =>
    Array.from((globalThis as unknown as PageDocument).document.querySelectorAll('video, audio')).map(
      (m) => m.playbackRate,
    ),
  );
}
