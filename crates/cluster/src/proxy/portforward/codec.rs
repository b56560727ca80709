//! Framing of a single-port `v4.channel.k8s.io` port-forward WebSocket.
//!
//! Every binary message starts with a channel byte: 0 carries data, 1 carries
//! error text. The server's first message on each channel is the forwarded
//! port as a little-endian u16, which is not payload. There is no half-close:
//! the connection ends when the WebSocket closes or the error channel speaks.
use bytes::{Buf, Bytes};
use tokio_tungstenite::tungstenite::Message;

pub const DATA_CHANNEL: u8 = 0;
pub const ERROR_CHANNEL: u8 = 1;

/// What one received message means for the local end of the connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inbound {
    /// Bytes for the local end.
    Data(Bytes),
    /// Nothing for the local end: a port prefix, a control frame, an empty message.
    Nothing,
    /// The connection is unusable and must be closed.
    Dead(DeadReason),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeadReason {
    /// The kubelet reported a failure, e.g. "connection refused" while no
    /// agent listens on the port yet.
    #[error("error channel: {0}")]
    Remote(String),
    #[error("websocket closed by the server{}", .0.as_deref().map(|r| format!(": {r}")).unwrap_or_default())]
    Closed(Option<String>),
    #[error("port-forward protocol violation: {0}")]
    Protocol(String),
}

/// Decoder state of one connection.
#[derive(Debug, Clone)]
pub struct Codec {
    port: u16,
    data_prefix: Prefix,
    error_prefix: Prefix,
}

/// The 2-byte port prefix still to consume on one channel.
#[derive(Debug, Clone, Default)]
struct Prefix {
    got: [u8; 2],
    len: usize,
}

impl Prefix {
    fn done(&self) -> bool {
        self.len == 2
    }

    /// Consumes prefix bytes from `payload`; returns the port once complete.
    fn consume(&mut self, payload: &mut Bytes) -> Option<u16> {
        while self.len < 2 && payload.has_remaining() {
            self.got[self.len] = payload.get_u8();
            self.len += 1;
        }
        self.done().then(|| u16::from_le_bytes(self.got))
    }
}

impl Codec {
    pub fn new(port: u16) -> Self {
        Self {
            port,
            data_prefix: Prefix::default(),
            error_prefix: Prefix::default(),
        }
    }

    /// The message carrying `data` to the pod.
    pub fn encode(data: &[u8]) -> Message {
        let mut framed = Vec::with_capacity(data.len() + 1);
        framed.push(DATA_CHANNEL);
        framed.extend_from_slice(data);
        Message::binary(framed)
    }

    pub fn decode(&mut self, message: Message) -> Inbound {
        let mut payload = match message {
            Message::Binary(b) => b,
            Message::Close(frame) => {
                return Inbound::Dead(DeadReason::Closed(
                    frame.map(|f| format!("{} {}", f.code, f.reason.as_str())),
                ));
            }
            Message::Text(_) => {
                return Inbound::Dead(DeadReason::Protocol(
                    "text message on a binary channel protocol".into(),
                ));
            }
            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => return Inbound::Nothing,
        };
        if payload.is_empty() {
            return Inbound::Nothing;
        }
        let channel = payload.get_u8();
        let port = self.port;
        let prefix = match channel {
            DATA_CHANNEL => &mut self.data_prefix,
            ERROR_CHANNEL => &mut self.error_prefix,
            other => {
                return Inbound::Dead(DeadReason::Protocol(format!(
                    "message on unknown channel {other}"
                )));
            }
        };
        if !prefix.done() {
            match prefix.consume(&mut payload) {
                Some(p) if p != port => {
                    return Inbound::Dead(DeadReason::Protocol(format!(
                        "channel {channel} announced port {p}, expected {port}"
                    )));
                }
                _ => {}
            }
        }
        if payload.is_empty() {
            return Inbound::Nothing;
        }
        if channel == ERROR_CHANNEL {
            return Inbound::Dead(DeadReason::Remote(
                String::from_utf8_lossy(&payload).into_owned(),
            ));
        }
        Inbound::Data(payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_tungstenite::tungstenite::protocol::CloseFrame;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

    fn bin(bytes: &[u8]) -> Message {
        Message::binary(bytes.to_vec())
    }

    /// 9001 = 0x2329, little-endian 0x29 0x23.
    const PREFIX: [u8; 2] = [0x29, 0x23];

    #[test]
    fn port_prefix_consumed_on_both_channels_then_data_flows() {
        let mut c = Codec::new(9001);
        assert_eq!(c.decode(bin(&[0, PREFIX[0], PREFIX[1]])), Inbound::Nothing);
        assert_eq!(c.decode(bin(&[1, PREFIX[0], PREFIX[1]])), Inbound::Nothing);
        assert_eq!(
            c.decode(bin(&[0, b'h', b'i'])),
            Inbound::Data(Bytes::from_static(b"hi"))
        );
        // Bytes equal to the prefix later on are payload, not a prefix.
        assert_eq!(
            c.decode(bin(&[0, PREFIX[0], PREFIX[1]])),
            Inbound::Data(Bytes::copy_from_slice(&PREFIX))
        );
    }

    #[test]
    fn prefix_split_or_joined_with_data() {
        let mut c = Codec::new(9001);
        assert_eq!(c.decode(bin(&[0, PREFIX[0]])), Inbound::Nothing);
        assert_eq!(
            c.decode(bin(&[0, PREFIX[1], b'x'])),
            Inbound::Data(Bytes::from_static(b"x"))
        );
    }

    #[test]
    fn error_channel_text_means_dead() {
        let mut c = Codec::new(9001);
        c.decode(bin(&[0, PREFIX[0], PREFIX[1]]));
        assert_eq!(c.decode(bin(&[1, PREFIX[0], PREFIX[1]])), Inbound::Nothing);
        let mut msg = vec![1];
        msg.extend_from_slice(b"dial tcp4 127.0.0.1:9001: connect: connection refused");
        assert_eq!(
            c.decode(bin(&msg)),
            Inbound::Dead(DeadReason::Remote(
                "dial tcp4 127.0.0.1:9001: connect: connection refused".into()
            ))
        );
        // Prefix and error text in one message.
        let mut c = Codec::new(9001);
        assert_eq!(
            c.decode(bin(&[1, PREFIX[0], PREFIX[1], b'e'])),
            Inbound::Dead(DeadReason::Remote("e".into()))
        );
    }

    #[test]
    fn wrong_port_or_channel_is_a_protocol_violation() {
        let mut c = Codec::new(9002);
        assert!(matches!(
            c.decode(bin(&[0, PREFIX[0], PREFIX[1]])),
            Inbound::Dead(DeadReason::Protocol(_))
        ));
        let mut c = Codec::new(9001);
        assert!(matches!(
            c.decode(bin(&[2, 0, 0])),
            Inbound::Dead(DeadReason::Protocol(_))
        ));
        assert!(matches!(
            c.decode(Message::text("x")),
            Inbound::Dead(DeadReason::Protocol(_))
        ));
    }

    #[test]
    fn close_and_control_frames() {
        let mut c = Codec::new(9001);
        assert_eq!(c.decode(Message::Ping(Bytes::new())), Inbound::Nothing);
        assert_eq!(c.decode(Message::Pong(Bytes::new())), Inbound::Nothing);
        assert_eq!(c.decode(bin(&[])), Inbound::Nothing);
        assert_eq!(
            c.decode(Message::Close(None)),
            Inbound::Dead(DeadReason::Closed(None))
        );
        let frame = CloseFrame {
            code: CloseCode::Normal,
            reason: "bye".into(),
        };
        assert_eq!(
            c.decode(Message::Close(Some(frame))),
            Inbound::Dead(DeadReason::Closed(Some("1000 bye".into())))
        );
    }

    #[test]
    fn encode_prefixes_channel_zero() {
        assert_eq!(Codec::encode(b"abc"), bin(&[0, b'a', b'b', b'c']));
        assert_eq!(Codec::encode(b""), bin(&[0]));
    }
}
