//! Rewrites the `:authority` of HTTP/2 requests on the wire, below h2.
//!
//! A kubelet dials a plugin's *registration* socket by bare path, and its
//! grpc-go client then sends the percent-encoded socket path as `:authority`
//! (`%2Fvar%2Flib%2Fkubelet%2Fplugins_registry%2F<driver>-reg.sock`). h2
//! parses request authorities with `http::uri::Authority`, which refuses `%`
//! in a host, and answers `RST_STREAM(PROTOCOL_ERROR)` before tonic sees the
//! request: the kubelet logs "failed to get plugin info using RPC GetInfo".
//! Upstream: <https://github.com/hyperium/http/issues/836> (percent-encoded
//! hosts rejected; fixes proposed in hyperium/http#528 and #861) and
//! <https://github.com/hyperium/h2/pull/487> (authority on unix sockets); both
//! open, and no h2/http release accepts such an authority. Neither crate has
//! a switch to relax the check, so the fix sits in front of h2 instead, and
//! keeps working whatever version of h2, hyper or tonic comes along: the
//! header blocks of the client→server direction are decoded here (following
//! the client's HPACK dynamic table), an authority that `http` cannot parse
//! is replaced with `localhost` (what grpc-go sends on `unix:` targets), and
//! the block is written out again as plain literals, so h2's decoder never
//! needs a table entry it did not see.
//!
//! The same machinery lets a Rust client send an authority hyper cannot put
//! in a `Uri`, which the simulated kubelet needs to dial as a real one does.
//!
//! Anything unexpected (not HTTP/2, a malformed frame or header block) turns
//! the rewriter into a plain pipe, so h2 sees the original bytes and reports
//! the error itself.
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tracing::debug;

use super::hpack::{self, Decoder, Field};

const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const FRAME_HEAD: usize = 9;
/// Frames written here never exceed the smallest `SETTINGS_MAX_FRAME_SIZE`
/// a peer may announce, so the peer's settings need not be followed.
const MAX_FRAME: usize = 16_384;
/// A header block larger than this is passed on untouched (h2's own limits
/// are far lower).
const MAX_BLOCK: usize = 1 << 20;
/// Largest dynamic table the client may switch to.
const MAX_TABLE: usize = 1 << 16;

const HEADERS: u8 = 0x1;
const PUSH_PROMISE: u8 = 0x5;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;

const AUTHORITY: &[u8] = b":authority";

/// What to do with the `:authority` of each request.
#[derive(Debug, Clone)]
pub(crate) enum Policy {
    /// Server side: an authority h2 would refuse becomes this one.
    ReplaceInvalid(Vec<u8>),
    /// Client side: every request carries this authority.
    Always(Vec<u8>),
}

impl Policy {
    fn apply(&self, value: &[u8]) -> Option<&[u8]> {
        match self {
            Self::ReplaceInvalid(with) => http::uri::Authority::try_from(value)
                .is_err()
                .then_some(with.as_slice()),
            Self::Always(with) => (value != with.as_slice()).then_some(with.as_slice()),
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct FrameHead {
    len: usize,
    ty: u8,
    flags: u8,
    stream: u32,
}

impl FrameHead {
    fn parse(b: &[u8; FRAME_HEAD]) -> Self {
        Self {
            len: usize::from(b[0]) << 16 | usize::from(b[1]) << 8 | usize::from(b[2]),
            ty: b[3],
            flags: b[4],
            stream: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & 0x7fff_ffff,
        }
    }

    fn write(len: usize, ty: u8, flags: u8, stream: u32, out: &mut Vec<u8>) {
        out.extend_from_slice(&(len as u32).to_be_bytes()[1..]);
        out.push(ty);
        out.push(flags);
        out.extend_from_slice(&stream.to_be_bytes());
    }
}

#[derive(Debug)]
enum State {
    Preface {
        matched: usize,
    },
    Head {
        buf: [u8; FRAME_HEAD],
        have: usize,
    },
    /// Streaming the payload of a frame that is passed on as is.
    Forward {
        remaining: usize,
    },
    /// Collecting the payload of a HEADERS or CONTINUATION frame.
    Collect {
        head: FrameHead,
        payload: Vec<u8>,
    },
    /// Given up: everything from here on is passed on as is.
    Pipe,
}

/// A header block being gathered from HEADERS + CONTINUATION frames.
#[derive(Debug)]
struct Block {
    stream: u32,
    end_stream: bool,
    priority: Option<[u8; 5]>,
    fragment: Vec<u8>,
    /// The frames as received, for giving up.
    original: Vec<u8>,
}

/// The sans-IO core: bytes of one direction in, rewritten bytes out.
#[derive(Debug)]
pub(crate) struct Rewriter {
    state: State,
    decoder: Decoder,
    policy: Policy,
    block: Option<Block>,
    /// Has already logged a replacement on this connection.
    reported: bool,
}

impl Rewriter {
    pub fn new(policy: Policy) -> Self {
        Self {
            state: State::Preface { matched: 0 },
            decoder: Decoder::new(MAX_TABLE, MAX_BLOCK),
            policy,
            block: None,
            reported: false,
        }
    }

    /// Takes the next bytes of the stream and appends what should be passed
    /// on to `out` (possibly nothing yet, while a header block is partial).
    pub fn feed(&mut self, mut input: &[u8], out: &mut Vec<u8>) {
        while !input.is_empty() {
            match &mut self.state {
                State::Pipe => {
                    out.extend_from_slice(input);
                    return;
                }
                State::Preface { matched } => {
                    let take = input.len().min(PREFACE.len() - *matched);
                    let (chunk, rest) = input.split_at(take);
                    input = rest;
                    out.extend_from_slice(chunk);
                    if chunk != &PREFACE[*matched..*matched + take] {
                        // Not HTTP/2 with prior knowledge: not ours to touch.
                        self.state = State::Pipe;
                    } else if *matched + take == PREFACE.len() {
                        self.state = State::Head {
                            buf: [0; FRAME_HEAD],
                            have: 0,
                        };
                    } else {
                        *matched += take;
                    }
                }
                State::Head { buf, have } => {
                    let take = input.len().min(FRAME_HEAD - *have);
                    buf[*have..*have + take].copy_from_slice(&input[..take]);
                    input = &input[take..];
                    *have += take;
                    if *have == FRAME_HEAD {
                        let raw = *buf;
                        self.on_head(raw, out);
                    }
                }
                State::Forward { remaining } => {
                    let take = input.len().min(*remaining);
                    out.extend_from_slice(&input[..take]);
                    input = &input[take..];
                    *remaining -= take;
                    if *remaining == 0 {
                        self.next_frame();
                    }
                }
                State::Collect { head, payload } => {
                    let take = input.len().min(head.len - payload.len());
                    payload.extend_from_slice(&input[..take]);
                    input = &input[take..];
                    if payload.len() == head.len {
                        let head = *head;
                        let payload = std::mem::take(payload);
                        self.next_frame();
                        self.on_block_frame(head, payload, out);
                    }
                }
            }
        }
    }

    /// The stream ended: whatever is held back goes out unchanged.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        let state = std::mem::replace(&mut self.state, State::Pipe);
        if let Some(block) = self.block.take() {
            out.extend_from_slice(&block.original);
        }
        match state {
            State::Head { buf, have } => out.extend_from_slice(&buf[..have]),
            State::Collect { head, payload } => {
                write_head(&head, out);
                out.extend_from_slice(&payload);
            }
            _ => {}
        }
    }

    fn next_frame(&mut self) {
        self.state = State::Head {
            buf: [0; FRAME_HEAD],
            have: 0,
        };
    }

    fn on_head(&mut self, raw: [u8; FRAME_HEAD], out: &mut Vec<u8>) {
        let head = FrameHead::parse(&raw);
        let expected = match &self.block {
            // Inside a header block only its CONTINUATION frames may come.
            Some(b) => head.ty == CONTINUATION && head.stream == b.stream,
            None => head.ty != CONTINUATION && head.ty != PUSH_PROMISE,
        };
        if !expected || (matches!(head.ty, HEADERS | CONTINUATION) && head.len > MAX_BLOCK) {
            self.give_up(out);
            out.extend_from_slice(&raw);
            return;
        }
        if matches!(head.ty, HEADERS | CONTINUATION) {
            self.state = State::Collect {
                head,
                payload: Vec::with_capacity(head.len),
            };
        } else {
            out.extend_from_slice(&raw);
            if head.len == 0 {
                self.next_frame();
            } else {
                self.state = State::Forward {
                    remaining: head.len,
                };
            }
        }
    }

    fn on_block_frame(&mut self, head: FrameHead, payload: Vec<u8>, out: &mut Vec<u8>) {
        let mut original = Vec::with_capacity(FRAME_HEAD + payload.len());
        write_head(&head, &mut original);
        original.extend_from_slice(&payload);
        if head.ty == HEADERS {
            let Some((priority, fragment)) = split_headers_payload(head.flags, &payload) else {
                out.extend_from_slice(&original);
                self.state = State::Pipe;
                return;
            };
            self.block = Some(Block {
                stream: head.stream,
                end_stream: head.flags & END_STREAM != 0,
                priority,
                fragment: fragment.to_vec(),
                original,
            });
        } else if let Some(block) = &mut self.block {
            block.fragment.extend_from_slice(&payload);
            block.original.extend_from_slice(&original);
            if block.original.len() > MAX_BLOCK {
                self.give_up(out);
                return;
            }
        }
        if head.flags & END_HEADERS != 0 {
            self.end_block(out);
        }
    }

    fn end_block(&mut self, out: &mut Vec<u8>) {
        let Some(block) = self.block.take() else {
            return;
        };
        let mut fields = match self.decoder.decode(&block.fragment) {
            Ok(fields) => fields,
            Err(e) => {
                debug!(error = %e, "undecodable HTTP/2 header block; passing the connection on untouched");
                self.block = Some(block);
                self.give_up(out);
                return;
            }
        };
        for field in fields.iter_mut().filter(|f| f.name == AUTHORITY) {
            if let Some(with) = self.policy.apply(&field.value) {
                if !self.reported && matches!(self.policy, Policy::ReplaceInvalid(_)) {
                    self.reported = true;
                    debug!(
                        sent = %String::from_utf8_lossy(&field.value),
                        served_as = %String::from_utf8_lossy(with),
                        "request authority h2 cannot parse (a kubelet dialling by socket path)"
                    );
                }
                field.value = with.to_vec();
            }
        }
        write_block(&block, &fields, out);
    }

    /// Passes on a pending block as received and pipes from here on.
    fn give_up(&mut self, out: &mut Vec<u8>) {
        if let Some(block) = self.block.take() {
            out.extend_from_slice(&block.original);
        }
        self.state = State::Pipe;
    }
}

fn write_head(head: &FrameHead, out: &mut Vec<u8>) {
    FrameHead::write(head.len, head.ty, head.flags, head.stream, out);
}

/// The priority fields and header block fragment of a HEADERS payload, or
/// `None` if its padding or priority fields do not fit.
fn split_headers_payload(flags: u8, payload: &[u8]) -> Option<(Option<[u8; 5]>, &[u8])> {
    let mut rest = payload;
    let mut pad = 0;
    if flags & PADDED != 0 {
        let (&p, r) = rest.split_first()?;
        pad = usize::from(p);
        rest = r;
    }
    let mut priority = None;
    if flags & PRIORITY != 0 {
        priority = Some(rest.get(..5)?.try_into().ok()?);
        rest = &rest[5..];
    }
    let end = rest.len().checked_sub(pad)?;
    Some((priority, &rest[..end]))
}

/// Writes `fields` as the header block of `block`'s stream: a HEADERS frame
/// and as many CONTINUATION frames as needed, without padding.
fn write_block(block: &Block, fields: &[Field], out: &mut Vec<u8>) {
    let mut encoded = Vec::new();
    hpack::encode_plain(fields, &mut encoded);
    let first_room = MAX_FRAME - if block.priority.is_some() { 5 } else { 0 };
    let (first, mut rest) = encoded.split_at(encoded.len().min(first_room));
    let mut flags = 0;
    if block.end_stream {
        flags |= END_STREAM;
    }
    if block.priority.is_some() {
        flags |= PRIORITY;
    }
    if rest.is_empty() {
        flags |= END_HEADERS;
    }
    let prio_len = block.priority.map_or(0, |p| p.len());
    FrameHead::write(first.len() + prio_len, HEADERS, flags, block.stream, out);
    if let Some(p) = block.priority {
        out.extend_from_slice(&p);
    }
    out.extend_from_slice(first);
    while !rest.is_empty() {
        let (chunk, r) = rest.split_at(rest.len().min(MAX_FRAME));
        rest = r;
        let flags = if rest.is_empty() { END_HEADERS } else { 0 };
        FrameHead::write(chunk.len(), CONTINUATION, flags, block.stream, out);
        out.extend_from_slice(chunk);
    }
}

/// Output held back from the reader or writer, with a read position.
#[derive(Debug, Default)]
struct Pending {
    buf: Vec<u8>,
    pos: usize,
}

impl Pending {
    fn is_empty(&self) -> bool {
        self.pos == self.buf.len()
    }

    fn consumed(&mut self, n: usize) {
        self.pos += n;
        if self.is_empty() {
            self.buf.clear();
            self.pos = 0;
        }
    }

    fn bytes(&self) -> &[u8] {
        &self.buf[self.pos..]
    }
}

/// Server side of a registration socket's connection (see
/// [`KubeletSocket::server_incoming`](crate::KubeletSocket::server_incoming)):
/// requests whose `:authority` h2 would refuse reach it with `localhost`
/// instead. Writes pass through.
#[derive(Debug)]
pub struct AcceptAnyAuthority<S> {
    io: S,
    rewriter: Rewriter,
    pending: Pending,
    eof: bool,
}

impl<S> AcceptAnyAuthority<S> {
    pub fn new(io: S) -> Self {
        Self {
            io,
            rewriter: Rewriter::new(Policy::ReplaceInvalid(b"localhost".to_vec())),
            pending: Pending::default(),
            eof: false,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for AcceptAnyAuthority<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if !this.pending.is_empty() {
                let n = this.pending.bytes().len().min(buf.remaining());
                buf.put_slice(&this.pending.bytes()[..n]);
                this.pending.consumed(n);
                return Poll::Ready(Ok(()));
            }
            if this.eof || buf.remaining() == 0 {
                return Poll::Ready(Ok(()));
            }
            let mut chunk = [0u8; 8192];
            let mut rb = ReadBuf::new(&mut chunk);
            ready!(Pin::new(&mut this.io).poll_read(cx, &mut rb))?;
            if rb.filled().is_empty() {
                this.eof = true;
                this.rewriter.finish(&mut this.pending.buf);
            } else {
                this.rewriter.feed(rb.filled(), &mut this.pending.buf);
            }
        }
    }
}

crate::pass_through_write!([S: AsyncWrite + Unpin] AcceptAnyAuthority<S>, io);

/// Client side of a connection: every request leaves with the given
/// `:authority`, whatever the HTTP client put in its URI. Reads pass
/// through.
#[derive(Debug)]
pub struct SendAuthority<S> {
    io: S,
    rewriter: Rewriter,
    pending: Pending,
}

impl<S> SendAuthority<S> {
    pub fn new(io: S, authority: impl Into<Vec<u8>>) -> Self {
        Self {
            io,
            rewriter: Rewriter::new(Policy::Always(authority.into())),
            pending: Pending::default(),
        }
    }
}

impl<S: AsyncWrite + Unpin> SendAuthority<S> {
    /// Writes out held-back bytes; ready once there are none.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.pending.is_empty() {
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, self.pending.bytes()))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.pending.consumed(n);
        }
        Poll::Ready(Ok(()))
    }
}

crate::pass_through_read!([S: AsyncRead + Unpin] SendAuthority<S>, io);

impl<S: AsyncWrite + Unpin> AsyncWrite for SendAuthority<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        // Back-pressure: nothing new is taken while old output waits.
        ready!(this.poll_drain(cx))?;
        this.rewriter.feed(buf, &mut this.pending.buf);
        // Start sending now; whatever does not fit goes on the next write
        // or flush.
        if let Poll::Ready(Err(e)) = this.poll_drain(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.pending.is_empty() {
            this.rewriter.finish(&mut this.pending.buf);
        }
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.io).poll_shutdown(cx)
    }
}

/// What the tests of this crate and of the simulated kubelet read back from
/// the wire (the `testing` feature).
#[cfg(any(test, feature = "testing"))]
// Only the wire reading is used outside this crate's tests.
#[cfg_attr(not(test), allow(dead_code))]
pub mod tests {
    use super::hpack::tests::huffman_literal;
    use super::*;

    /// Frames `block` as one HEADERS frame with the given flags.
    fn headers_frame(stream: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        FrameHead::write(payload.len(), HEADERS, flags, stream, &mut out);
        out.extend_from_slice(payload);
        out
    }

    /// Parses `bytes` (after the preface) into its complete frames.
    fn frames(mut bytes: &[u8]) -> Vec<(FrameHead, Vec<u8>)> {
        let mut out = Vec::new();
        while bytes.len() >= FRAME_HEAD {
            let head = FrameHead::parse(bytes[..FRAME_HEAD].try_into().unwrap());
            let Some(payload) = bytes.get(FRAME_HEAD..FRAME_HEAD + head.len) else {
                break;
            };
            out.push((head, payload.to_vec()));
            bytes = &bytes[FRAME_HEAD + head.len..];
        }
        out
    }

    /// Decodes the complete header blocks of a client's byte stream (from
    /// its preface on) as a table-less peer would: only plain literals, as
    /// this module writes them, decode.
    fn header_blocks(bytes: &[u8]) -> Vec<Vec<Field>> {
        let mut decoder = Decoder::new(0, 1 << 20);
        let mut blocks = Vec::new();
        let mut fragment = Vec::new();
        let Some(after_preface) = bytes.get(PREFACE.len()..) else {
            return blocks;
        };
        for (head, payload) in frames(after_preface) {
            match head.ty {
                HEADERS => {
                    let (_, f) = split_headers_payload(head.flags, &payload).unwrap();
                    fragment = f.to_vec();
                }
                CONTINUATION => fragment.extend_from_slice(&payload),
                _ => continue,
            }
            if head.flags & END_HEADERS != 0 {
                blocks.push(decoder.decode(&fragment).unwrap());
            }
        }
        blocks
    }

    /// A request header block as grpc-go's encoder writes it: `:authority`
    /// Huffman-coded and added to the dynamic table on the first request,
    /// referenced by index on later ones.
    fn go_style_block(authority: &str, first: bool) -> Vec<u8> {
        let mut b = vec![0x83, 0x86]; // :method POST, :scheme http
        if first {
            b.push(0x41); // literal, incremental indexing, name = :authority
            huffman_literal(authority.as_bytes(), &mut b);
        } else {
            b.push(0x80 | 62); // the newest dynamic entry
        }
        b.push(0x04); // literal without indexing, name = :path
        huffman_literal(b"/pluginregistration.Registration/GetInfo", &mut b);
        b
    }

    /// The `:authority` of each complete request in a client's byte stream
    /// written through [`SendAuthority`].
    pub fn request_authorities(bytes: &[u8]) -> Vec<String> {
        header_blocks(bytes)
            .iter()
            .flatten()
            .filter(|f| f.name == AUTHORITY)
            .map(|f| String::from_utf8_lossy(&f.value).into_owned())
            .collect()
    }

    /// The start of a connection as a kubelet's grpc-go client writes it:
    /// the preface, its SETTINGS, and one GetInfo request carrying
    /// `authority`.
    pub(crate) fn kubelet_request(authority: &str) -> Vec<u8> {
        let mut out = PREFACE.to_vec();
        FrameHead::write(0, 0x4, 0, 0, &mut out);
        out.extend(headers_frame(
            1,
            END_HEADERS,
            &go_style_block(authority, true),
        ));
        out
    }

    fn feed_in_pieces(rw: &mut Rewriter, input: &[u8], piece: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for chunk in input.chunks(piece) {
            rw.feed(chunk, &mut out);
        }
        rw.finish(&mut out);
        out
    }

    const KUBELET_AUTHORITY: &str = "%2Fvar%2Flib%2Fkubelet%2Fplugins_registry%2Fd-reg.sock";

    #[test]
    fn server_side_replaces_a_percent_encoded_path_on_every_request() {
        let mut input = PREFACE.to_vec();
        // SETTINGS (empty) passes untouched.
        FrameHead::write(0, 0x4, 0, 0, &mut input);
        input.extend(headers_frame(
            1,
            END_HEADERS,
            &go_style_block(KUBELET_AUTHORITY, true),
        ));
        // DATA on stream 1 passes untouched.
        FrameHead::write(5, 0x0, END_STREAM, 1, &mut input);
        input.extend_from_slice(&[0, 0, 0, 0, 0]);
        input.extend(headers_frame(
            3,
            END_HEADERS | END_STREAM,
            &go_style_block(KUBELET_AUTHORITY, false),
        ));
        for piece in [1, 7, 4096] {
            let mut rw = Rewriter::new(Policy::ReplaceInvalid(b"localhost".to_vec()));
            let out = feed_in_pieces(&mut rw, &input, piece);
            let blocks = header_blocks(&out);
            assert_eq!(blocks.len(), 2);
            for block in &blocks {
                assert_eq!(block[2], Field::new(":authority", "localhost"));
                assert_eq!(
                    block[3],
                    Field::new(":path", "/pluginregistration.Registration/GetInfo")
                );
            }
            let kinds: Vec<(u8, u8, u32)> = frames(&out[PREFACE.len()..])
                .iter()
                .map(|(h, _)| (h.ty, h.flags, h.stream))
                .collect();
            assert_eq!(
                kinds,
                [
                    (0x4, 0, 0),
                    (HEADERS, END_HEADERS, 1),
                    (0x0, END_STREAM, 1),
                    (HEADERS, END_HEADERS | END_STREAM, 3)
                ]
            );
        }
    }

    #[test]
    fn server_side_keeps_valid_authorities() {
        let mut input = PREFACE.to_vec();
        input.extend(headers_frame(
            1,
            END_HEADERS,
            &go_style_block("localhost:1234", true),
        ));
        let mut rw = Rewriter::new(Policy::ReplaceInvalid(b"localhost".to_vec()));
        let out = feed_in_pieces(&mut rw, &input, 3);
        assert_eq!(
            header_blocks(&out)[0][2],
            Field::new(":authority", "localhost:1234")
        );
    }

    #[test]
    fn padding_priority_and_continuations_are_handled() {
        let block = go_style_block(KUBELET_AUTHORITY, true);
        let (a, b) = block.split_at(10);
        let mut payload = vec![3]; // pad length
        payload.extend_from_slice(&[0x80, 0, 0, 1, 15]); // exclusive dep on 1, weight
        payload.extend_from_slice(a);
        payload.extend_from_slice(&[0, 0, 0]);
        let mut input = PREFACE.to_vec();
        input.extend(headers_frame(5, PADDED | PRIORITY | END_STREAM, &payload));
        FrameHead::write(b.len(), CONTINUATION, END_HEADERS, 5, &mut input);
        input.extend_from_slice(b);
        let mut rw = Rewriter::new(Policy::ReplaceInvalid(b"localhost".to_vec()));
        let out = feed_in_pieces(&mut rw, &input, 5);
        let got = frames(&out[PREFACE.len()..]);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0.flags, PRIORITY | END_STREAM | END_HEADERS);
        assert_eq!(&got[0].1[..5], &[0x80, 0, 0, 1, 15]);
        assert_eq!(
            header_blocks(&out)[0][2],
            Field::new(":authority", "localhost")
        );
    }

    #[test]
    fn large_blocks_are_split_into_continuations() {
        let mut fields = vec![Field::new(":authority", "localhost")];
        fields.push(Field::new("x-big", &"v".repeat(40_000)));
        let mut block = Vec::new();
        hpack::encode_plain(&fields, &mut block);
        let mut input = PREFACE.to_vec();
        FrameHead::write(MAX_FRAME, HEADERS, 0, 1, &mut input);
        input.extend_from_slice(&block[..MAX_FRAME]);
        for chunk in block[MAX_FRAME..].chunks(MAX_FRAME) {
            let last = chunk.as_ptr_range().end == block.as_ptr_range().end;
            let flags = if last { END_HEADERS } else { 0 };
            FrameHead::write(chunk.len(), CONTINUATION, flags, 1, &mut input);
            input.extend_from_slice(chunk);
        }
        let mut rw = Rewriter::new(Policy::Always(b"%2Fa.sock".to_vec()));
        let out = feed_in_pieces(&mut rw, &input, 1000);
        let got = frames(&out[PREFACE.len()..]);
        assert!(got.len() >= 3);
        assert!(got.iter().all(|(h, _)| h.len <= MAX_FRAME));
        let blocks = header_blocks(&out);
        assert_eq!(blocks[0][0], Field::new(":authority", "%2Fa.sock"));
        assert_eq!(blocks[0][1], fields[1]);
    }

    #[test]
    fn anything_unexpected_is_passed_on_untouched() {
        // Not HTTP/2 at all.
        let mut rw = Rewriter::new(Policy::ReplaceInvalid(b"localhost".to_vec()));
        let http1 = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
        assert_eq!(feed_in_pieces(&mut rw, http1, 4), http1);

        // An undecodable header block, then more frames.
        let mut input = PREFACE.to_vec();
        input.extend(headers_frame(1, END_HEADERS, &[0x80 | 70]));
        FrameHead::write(0, 0x4, 0, 0, &mut input);
        let mut rw = Rewriter::new(Policy::ReplaceInvalid(b"localhost".to_vec()));
        assert_eq!(feed_in_pieces(&mut rw, &input, 2), input);

        // A CONTINUATION out of place.
        let mut input = PREFACE.to_vec();
        FrameHead::write(1, CONTINUATION, END_HEADERS, 1, &mut input);
        input.push(0x82);
        let mut rw = Rewriter::new(Policy::ReplaceInvalid(b"localhost".to_vec()));
        assert_eq!(feed_in_pieces(&mut rw, &input, 100), input);

        // A connection cut inside a frame.
        let mut input = PREFACE.to_vec();
        input.extend(headers_frame(1, END_HEADERS, &go_style_block("x", true)));
        input.truncate(input.len() - 3);
        let mut rw = Rewriter::new(Policy::ReplaceInvalid(b"localhost".to_vec()));
        assert_eq!(feed_in_pieces(&mut rw, &input, 9), input);
    }
}
