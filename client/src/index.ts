export { createNodeHost } from './node-host';
export { formatResult } from './format';
