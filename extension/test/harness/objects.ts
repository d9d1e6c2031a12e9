/**
 * The objects of the browser tests, the same whether the test server sends them (the network,
 * after a fallback) or the fake downloader does (MUTP): tests compare bytes, and tell the two
 * paths apart by the server's `x-from: network` header.
 */
export interface TestObject {
  bytes: Uint8Array;
  contentType: string;
}

export function binaryObject(length: number, seed: number): Uint8Array {
  const out = new Uint8Array(length);
  for (let i = 0; i < length; i++) out[i] = (i * 31 + seed * 7 + (i >> 8)) & 0xff;
  return out;
}

export const HLS_PLAYLIST = `#EXTM3U
#EXT-X-VERSION:7
#EXT-X-TARGETDURATION:2
#EXT-X-MAP:URI="../seg/init.mp4"
#EXTINF:2.0,
../seg/0.m4s
#EXTINF:2.0,
../seg/1.m4s
#EXTINF:2.0,
#EXT-X-BYTERANGE:500@0
../seg/all.mp4
#EXT-X-ENDLIST
`;

export const DASH_MPD = `<?xml version="1.0" encoding="UTF-8"?>
<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT4S" minBufferTime="PT2S">
  <Period id="0">
    <AdaptationSet mimeType="video/mp4">
      <SegmentTemplate timescale="1" duration="2" initialization="../dseg/init-$RepresentationID$.mp4" media="../dseg/$RepresentationID$-$Number$.m4s" startNumber="1"/>
      <Representation id="v" bandwidth="100000" width="320" height="180" codecs="avc1.64000d"/>
    </AdaptationSet>
  </Period>
</MPD>`;

const text = (s: string) => new TextEncoder().encode(s);

/** The object at `path`, or undefined (404). */
export function objectFor(path: string): TestObject | undefined {
  let m: RegExpExecArray | null;
  if ((m = /^\/obj\/(\d{1,8})$/.exec(path))) return { bytes: binaryObject(Number(m[1]), 1), contentType: 'video/mp4' };
  if ((m = /^\/text\/(\w+)$/.exec(path)))
    return { bytes: text(`héllo ${m[1]} ✓`), contentType: 'text/plain; charset=utf-8' };
  if ((m = /^\/json\/(\w+)$/.exec(path)))
    return { bytes: text(JSON.stringify({ word: m[1], n: [1, 2, 3] })), contentType: 'application/json' };
  if ((m = /^\/seg\/(\d+)\.m4s$/.exec(path)))
    return { bytes: binaryObject(1000 + Number(m[1]), 2), contentType: 'video/iso.segment' };
  if (path === '/seg/init.mp4') return { bytes: binaryObject(300, 3), contentType: 'video/mp4' };
  if (path === '/seg/all.mp4') return { bytes: binaryObject(2000, 4), contentType: 'video/mp4' };
  if ((m = /^\/dseg\/([\w-]+)\.(mp4|m4s)$/.exec(path)))
    return { bytes: binaryObject(700, m[1].length), contentType: 'video/mp4' };
  if (path === '/hls/index.m3u8') return { bytes: text(HLS_PLAYLIST), contentType: 'application/vnd.apple.mpegurl' };
  if (path === '/dash/stream.mpd') return { bytes: text(DASH_MPD), contentType: 'application/dash+xml' };
  return undefined;
}
