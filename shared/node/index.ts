// `@mutp/shared/node`: Node-only adapters of the shared core (never imported by browser code).
export * from './webrtc';
