//! `session_payload`: what the receive loop keeps of a datagram read from quinn directly.

use super::session_payload;
use wtransport::proto::datagram::Datagram as H3Datagram;
use wtransport::proto::ids::QStreamId;
use wtransport::{SessionId, StreamId, VarInt};

fn session(stream: u32) -> SessionId {
    SessionId::try_from_session_stream(StreamId::new(VarInt::from_u32(stream))).unwrap()
}

/// The HTTP/3 datagram wtransport's sender builds: the quarter stream id, then the payload.
fn h3_datagram(session_id: SessionId, payload: &[u8]) -> Vec<u8> {
    let d = H3Datagram::new(QStreamId::from_session_id(session_id), payload);
    let mut out = vec![0; d.write_size()];
    let n = d.write(&mut out).unwrap();
    out.truncate(n);
    out
}

#[test]
fn the_sessions_payload_byte_exact() {
    // Stream 0 (a one-byte quarter id) and a later CONNECT stream whose quarter id takes two bytes.
    for stream in [0, 4 * 100] {
        let payload: Vec<u8> = (0..1200u32).map(|i| (i * 7 + stream) as u8).collect();
        let quic = h3_datagram(session(stream), &payload);
        assert!(quic.len() > payload.len());
        assert_eq!(session_payload(&quic, session(stream)), Some(&payload[..]));
        assert_eq!(
            session_payload(&h3_datagram(session(stream), &[]), session(stream)),
            Some(&[][..])
        );
    }
}

#[test]
fn another_sessions_or_malformed_datagrams_are_dropped() {
    let quic = h3_datagram(session(4), b"theirs");
    assert_eq!(session_payload(&quic, session(0)), None);
    // Empty, or a varint cut short (0x40: a two-byte varint with one byte).
    assert_eq!(session_payload(&[], session(0)), None);
    assert_eq!(session_payload(&[0x40], session(0)), None);
}
