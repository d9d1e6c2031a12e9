export * from './types';
export { uncodedCodec } from './uncoded';
export { rlncCodec } from './rlnc';
