/**
 * Feeds a PageConnectGate from the document, in the isolated content script (document_start, so
 * before any page script: page scripts cannot replace these observers or the objects they use,
 * which belong to this world).
 *
 * - meta CSP: a MutationObserver sees every element as it is inserted. It was made before any page
 *   script, so its records come first, and the parser runs a microtask checkpoint before each
 *   script it runs: a page script cannot take a parser-inserted meta out before it is read.
 * - violations: trusted `securitypolicyviolation` events only (a page can dispatch look-alikes).
 * - the origins the page reached: a buffered PerformanceObserver for resource entries, and on a
 *   miss a look at the timeline itself (the observer's callback comes a task later than the entry).
 */
import { CspVerdict, PageConnectGate } from './csp-gate';

/** Most timeline entries read on one miss (the page sets the buffer size). */
const MAX_ENTRIES_PER_CATCH_UP = 1000;

export interface PageCspWatch {
  /** The gate's verdict, after a look at the timeline when the URL's origin was not seen yet. */
  verdict(url: string): CspVerdict;
}

function isCspMeta(el: Element): boolean {
  return (el.getAttribute('http-equiv') ?? '').trim().toLowerCase() === 'content-security-policy';
}

export function watchPageCsp(doc: Document, self: URL, pageOrigin: string): PageCspWatch {
  const gate = new PageConnectGate(self, pageOrigin);
  const readMeta = (el: Element) => {
    if (!isCspMeta(el)) return;
    const content = el.getAttribute('content');
    if (content) gate.addMetaPolicy(content);
  };
  const readTree = (node: Node) => {
    if (!(node instanceof Element)) return;
    if (node.localName === 'meta') readMeta(node);
    else for (const meta of Array.from(node.getElementsByTagName('meta'))) readMeta(meta);
  };
  new MutationObserver((records) => {
    for (const record of records) for (const node of Array.from(record.addedNodes)) readTree(node);
  }).observe(doc, { childList: true, subtree: true });
  if (doc.documentElement) readTree(doc.documentElement);

  // On the window, capturing, registered before any page script: the first listener on the
  // event's path, so no page listener can stop it before it is read.
  doc.defaultView?.addEventListener(
    'securitypolicyviolation',
    (event) => {
      if (event.isTrusted) gate.noteViolation(event);
    },
    true,
  );

  const timeline = doc.defaultView?.performance;
  const noteEntries = (entries: PerformanceEntryList) => {
    for (const entry of entries.slice(-MAX_ENTRIES_PER_CATCH_UP)) {
      gate.noteReached(entry.name, (entry as PerformanceResourceTiming).initiatorType);
    }
  };
  try {
    new PerformanceObserver((list) => noteEntries(list.getEntries())).observe({ type: 'resource', buffered: true });
  } catch {
    // no resource timing: cross-origin URLs stay on the network
  }
  return {
    verdict: (url) => {
      const first = gate.verdict(url);
      if (first.ok || first.reason !== 'csp-unseen' || !timeline) return first;
      noteEntries(timeline.getEntriesByType('resource'));
      return gate.verdict(url);
    },
  };
}
