#!/usr/bin/env bash
# Generates the test streams into e2e/media/out (not committed): 40 s of a moving test pattern
# with a tone, H.264/AAC, as HLS with fMP4 segments, HLS with TS segments and DASH, at two
# bitrates: "low" (about 1 Mbit/s, what the playback tests stream) and "high" (about 3.5 Mbit/s:
# segments of 1-2 MB, the object sizes of the MUTP paper, used by the demo and benchmarks).
# The high content also comes addressed by byte range (issue 14):
#   high/dash-sb/   single-file DASH, SegmentBase: one fragmented MP4 per representation with a
#                   global `sidx`, `indexRange` in the MPD (shaka-player fetches ranges of it);
#   high/fmp4/      one muxed fragmented MP4 (4 s fragments, a `sidx` per track at the start),
#                   for the hand-written MSE range player.
# One stream runs longer: "long" is the high content for 120 s, for playbacks that must last
# (the lte-dublin 120 s playback target):
#   long/hls-ts/    HLS with 4 s TS segments like high/hls-ts: the high mezzanine looped three
#                   times with -c copy (a remux, no encode: about a second; the timestamps run on
#                   across the loop points), for `bench:browser --stream long/hls-ts/index.m3u8`.
# `--large` also makes large/stream.mp4: the high fMP4 looped with -c copy to about 2 GB (only
# the remux: about a minute), for bench:ranges --large.
#
# Idempotent: does nothing when the output is newer than this script. Otherwise each output
# directory is remade only when the commands that make it changed (a hash of them is kept in the
# directory), so editing one step does not pull the other streams from under a running test.
set -euo pipefail
cd "$(dirname "$0")"
out=out
stamp="$out/.generated"
large=false
[ "${1:-}" = "--large" ] && large=true
if [ -f "$stamp" ] && [ "$stamp" -nt generate.sh ] && { ! $large || [ -f "$out/large/.recipe" ]; }; then
  echo "[media] up to date: e2e/media/out"
  exit 0
fi
command -v ffmpeg >/dev/null || { echo "[media] ffmpeg not found (apt-get install ffmpeg)" >&2; exit 1; }
command -v node >/dev/null || { echo "[media] node not found" >&2; exit 1; }
mkdir -p "$out"

duration=40
src=(-f lavfi -i "testsrc2=size=1280x720:rate=30:duration=$duration" -f lavfi -i "sine=frequency=440:sample_rate=48000:duration=$duration")
# A keyframe every 2 s, so 4 s segments cut cleanly.
video() { echo -c:v libx264 -preset veryfast -profile:v main -pix_fmt yuv420p -b:v "$1" -maxrate "$1" -bufsize "$1" -g 60 -keyint_min 60 -sc_threshold 0; }
audio=(-c:a aac -b:a 96k -ac 2)
# Fragmented MP4 cut at keyframes into 4 s fragments, with a sidx per track before the first.
fragmented=(-movflags +frag_keyframe+empty_moov+default_base_moof+global_sidx -min_frag_duration 4000000)

# step <dir> <function> [args...]: runs `function dir args...` unless dir holds the same recipe.
step() {
  local dir="$out/$1" fn=$2
  shift 2
  local recipe
  # The commands, the settings they use, and the recipes of the files they read.
  recipe=$({
    declare -f "$fn" video
    declare -p src audio duration
    declare -f "$fn" | grep -q fragmented && declare -p fragmented
    echo "$*"
    for arg in "$@"; do [ -f "$arg" ] && cat "$(dirname "$arg")/.recipe" 2>/dev/null; done
    true
  } | sha256sum | cut -c1-64)
  if [ -f "$dir/.recipe" ] && [ "$(cat "$dir/.recipe")" = "$recipe" ]; then
    echo "[media] $dir: up to date"
    return
  fi
  # Streams made by the previous version of this script (no recipes yet, same commands): keep them.
  if [ ! -f "$dir/.recipe" ] && [ -f "$stamp" ] && [ "${ADOPT:-}" = 1 ] && [ -n "$(ls -A "$dir" 2>/dev/null)" ]; then
    echo "$recipe" >"$dir/.recipe"
    echo "[media] $dir: kept"
    return
  fi
  echo "[media] $dir: $fn $*"
  rm -rf "$dir"
  mkdir -p "$dir"
  "$fn" "$dir" "$@"
  echo "$recipe" >"$dir/.recipe"
}

hls_fmp4() {
  # shellcheck disable=SC2046
  ffmpeg -hide_banner -loglevel error -y "${src[@]}" $(video "$2") "${audio[@]}" \
    -f hls -hls_time 4 -hls_playlist_type vod -hls_segment_type fmp4 \
    -hls_fmp4_init_filename init.mp4 -hls_segment_filename "$1/seg-%03d.m4s" "$1/index.m3u8"
}

hls_ts() {
  # shellcheck disable=SC2046
  ffmpeg -hide_banner -loglevel error -y "${src[@]}" $(video "$2") "${audio[@]}" \
    -f hls -hls_time 4 -hls_playlist_type vod -hls_segment_type mpegts \
    -hls_segment_filename "$1/seg-%03d.ts" "$1/index.m3u8"
}

dash() {
  # shellcheck disable=SC2046
  ffmpeg -hide_banner -loglevel error -y "${src[@]}" $(video "$2") "${audio[@]}" \
    -f dash -seg_duration 4 -use_template 1 -use_timeline 0 \
    -init_seg_name 'init-$RepresentationID$.m4s' -media_seg_name 'seg-$RepresentationID$-$Number%03d$.m4s' \
    "$1/manifest.mpd"
}

# The range outputs are remuxes (-c copy) of one encode, so both carry the same bytes of media.
mezzanine() {
  # shellcheck disable=SC2046
  ffmpeg -hide_banner -loglevel error -y "${src[@]}" $(video "$2") "${audio[@]}" "$1/source.mp4"
}

# ffmpeg's dash muxer writes single files with a global sidx but lists them as a SegmentList of
# byte ranges; a SegmentBase MPD (init range + indexRange, the player reads the sidx) is what
# single-file DASH in the wild looks like, so the MPD is rewritten from the files' top-level boxes.
dash_segment_base() {
  ffmpeg -hide_banner -loglevel error -y -i "$2" -c copy -f dash -single_file 1 -global_sidx 1 -seg_duration 4 \
    -single_file_name 'stream-$RepresentationID$.mp4' "$1/manifest.mpd"
  node - "$1" <<'EOF'
const fs = require('fs');
const path = require('path');
const dir = process.argv[2];
const mpdFile = path.join(dir, 'manifest.mpd');
// Offset and size of the first top-level sidx box.
function sidxOf(file) {
  const b = fs.readFileSync(file);
  for (let off = 0; off + 8 <= b.length; ) {
    const size = b.readUInt32BE(off);
    if (b.toString('latin1', off + 4, off + 8) === 'sidx') return { start: off, end: off + size - 1 };
    if (size < 8) break;
    off += size;
  }
  throw new Error(`${file}: no sidx`);
}
const mpd = fs.readFileSync(mpdFile, 'utf8').replace(
  /<BaseURL>([^<]+)<\/BaseURL>\s*<SegmentList[^>]*>[\s\S]*?<\/SegmentList>/g,
  (_m, base) => {
    const s = sidxOf(path.join(dir, base));
    return `<BaseURL>${base}</BaseURL>\n\t\t\t\t<SegmentBase indexRange="${s.start}-${s.end}">\n` +
      `\t\t\t\t\t<Initialization range="0-${s.start - 1}" />\n\t\t\t\t</SegmentBase>`;
  },
);
if (/SegmentList/.test(mpd)) throw new Error('SegmentList left in the MPD');
fs.writeFileSync(mpdFile, mpd);
EOF
}

fmp4() {
  ffmpeg -hide_banner -loglevel error -y -i "$2" -c copy "${fragmented[@]}" "$1/stream.mp4"
}

# 120 s of high in 4 s TS segments: the 40 s mezzanine played $3 + 1 times in a row, remuxed.
# ffmpeg offsets each loop by the input's duration, so PTS keep increasing (no discontinuity);
# only the AAC priming frame (hidden by the MP4's edit list) overlaps the previous loop's last
# frame by one frame (21 ms), which hls.js drops (mp4-remuxer: overlap >= maxAudioFramesDrift).
long_hls_ts() {
  ffmpeg -hide_banner -loglevel error -y -stream_loop "$3" -i "$2" -c copy \
    -f hls -hls_time 4 -hls_playlist_type vod -hls_segment_type mpegts \
    -hls_segment_filename "$1/seg-%03d.ts" "$1/index.m3u8"
}

# About 2 GB: the 40 s high fMP4 (~17.5 MB) played $2 + 1 times in a row.
large_fmp4() {
  ffmpeg -hide_banner -loglevel error -y -stream_loop "$3" -i "$2" -c copy "${fragmented[@]}" "$1/stream.mp4"
}

# Streams from before the recipes existed were made by exactly these commands.
[ -f "$stamp" ] && [ ! -f "$out/low/hls-fmp4/.recipe" ] && export ADOPT=1
for rendition in low:900k high:3500k; do
  name=${rendition%%:*}
  rate=${rendition#*:}
  step "$name/hls-fmp4" hls_fmp4 "$rate"
  step "$name/hls-ts" hls_ts "$rate"
  step "$name/dash" dash "$rate"
done
unset ADOPT
step high/mezzanine mezzanine 3500k
step high/dash-sb dash_segment_base "$out/high/mezzanine/source.mp4"
step high/fmp4 fmp4 "$out/high/mezzanine/source.mp4"
step long/hls-ts long_hls_ts "$out/high/mezzanine/source.mp4" 2
if $large; then
  step large large_fmp4 "$out/high/fmp4/stream.mp4" 115
fi
touch "$stamp"
echo "[media] done: $(du -sh "$out" | cut -f1) in e2e/media/out"
