export { createNodeHost } from './node-host';
export { formatSeries } from './format';
export { parsePlaylist, PlaylistError, MAX_PLAYLIST_SEGMENTS } from './playlist';
