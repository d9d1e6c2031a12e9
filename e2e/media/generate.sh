#!/usr/bin/env bash
# Generates the test streams into e2e/media/out (not committed): 40 s of a moving test pattern
# with a tone, H.264/AAC, as HLS with fMP4 segments, HLS with TS segments and DASH, at two
# bitrates: "low" (about 1 Mbit/s, what the playback tests stream) and "high" (about 3.5 Mbit/s:
# segments of 1-2 MB, the object sizes of the MUTP paper, used by the demo and benchmarks).
# Idempotent: does nothing when the output is newer than this script.
set -euo pipefail
cd "$(dirname "$0")"
out=out
stamp="$out/.generated"
if [ -f "$stamp" ] && [ "$stamp" -nt generate.sh ]; then
  echo "[media] up to date: e2e/media/out"
  exit 0
fi
command -v ffmpeg >/dev/null || { echo "[media] ffmpeg not found (apt-get install ffmpeg)" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out"

duration=40
src=(-f lavfi -i "testsrc2=size=1280x720:rate=30:duration=$duration" -f lavfi -i "sine=frequency=440:sample_rate=48000:duration=$duration")
# A keyframe every 2 s, so 4 s segments cut cleanly.
video() { echo -c:v libx264 -preset veryfast -profile:v main -pix_fmt yuv420p -b:v "$1" -maxrate "$1" -bufsize "$1" -g 60 -keyint_min 60 -sc_threshold 0; }
audio=(-c:a aac -b:a 96k -ac 2)

for rendition in low:900k high:3500k; do
  name=${rendition%%:*}
  rate=${rendition#*:}
  echo "[media] $name ($rate): HLS fMP4, HLS TS, DASH"
  mkdir -p "$out/$name/hls-fmp4" "$out/$name/hls-ts" "$out/$name/dash"
  # shellcheck disable=SC2046
  ffmpeg -hide_banner -loglevel error -y "${src[@]}" $(video "$rate") "${audio[@]}" \
    -f hls -hls_time 4 -hls_playlist_type vod -hls_segment_type fmp4 \
    -hls_fmp4_init_filename init.mp4 -hls_segment_filename "$out/$name/hls-fmp4/seg-%03d.m4s" \
    "$out/$name/hls-fmp4/index.m3u8"
  # shellcheck disable=SC2046
  ffmpeg -hide_banner -loglevel error -y "${src[@]}" $(video "$rate") "${audio[@]}" \
    -f hls -hls_time 4 -hls_playlist_type vod -hls_segment_type mpegts \
    -hls_segment_filename "$out/$name/hls-ts/seg-%03d.ts" "$out/$name/hls-ts/index.m3u8"
  # shellcheck disable=SC2046
  ffmpeg -hide_banner -loglevel error -y "${src[@]}" $(video "$rate") "${audio[@]}" \
    -f dash -seg_duration 4 -use_template 1 -use_timeline 0 \
    -init_seg_name 'init-$RepresentationID$.m4s' -media_seg_name 'seg-$RepresentationID$-$Number%03d$.m4s' \
    "$out/$name/dash/manifest.mpd"
done
touch "$stamp"
echo "[media] done: $(du -sh "$out" | cut -f1) in e2e/media/out"
