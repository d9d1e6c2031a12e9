//! The clients' one datagram sink. Every client session of the process queues its datagrams in
//! one `DatagramQueue` and they reach JavaScript together, one batch (one call of the JS thread)
//! per hold, not one per session: the Node client downloads from several proxies at once, and on a
//! 2-core machine each call and wake-up of the JS thread costs more than handling a datagram
//! (issue 33). Client sessions get process-wide ids, by which JavaScript routes each datagram.

use crate::session::{event_to_js, DatagramQueue, Event, EventCarrier, EventSink, NativeEvent, WeakEventFn};
use napi::bindgen_prelude::Function;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, RwLock};

static SINK: RwLock<Option<Arc<EventSink>>> = RwLock::new(None);
static NEXT_SESSION_ID: AtomicU32 = AtomicU32::new(1);

/// Makes `callback` the receiver of every client session's datagrams from now on (sessions opened
/// before keep the sink they had). A new one replaces the old: a JS realm (a Jest test file) that
/// loaded the module again installs its own, and the old realm's may never run again. The
/// threadsafe function is weak: each client's own event function keeps the process alive.
pub fn install(callback: Function<NativeEvent, ()>) -> napi::Result<()> {
    let queue = Arc::new(Mutex::new(DatagramQueue::default()));
    let q = queue.clone();
    let tsfn: WeakEventFn = callback
        .build_threadsafe_function::<Event>()
        .callee_handled::<false>()
        .weak::<true>()
        .build_callback(move |ctx| Ok(event_to_js(ctx.value, &q)))?;
    let sink = Arc::new(EventSink::new(EventCarrier::Weak(tsfn), queue));
    if let Some(old) = SINK.write().unwrap().replace(sink) {
        old.shutdown();
    }
    Ok(())
}

/// The sink new client sessions push their datagrams to, if JavaScript installed one.
pub fn current() -> Option<Arc<EventSink>> {
    SINK.read().unwrap().clone()
}

/// A process-wide id for a new client session (0 is never given).
pub fn next_session_id() -> u32 {
    NEXT_SESSION_ID.fetch_add(1, Ordering::Relaxed).max(1)
}
