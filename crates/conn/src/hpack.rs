//! Just enough HPACK (RFC 7541) to read the header blocks one HTTP/2 peer
//! sends and write them out again without compression state: a decoder that
//! follows the sender's dynamic table, and an encoder that only emits plain
//! literals, so whoever reads its output needs no table at all.
use std::collections::VecDeque;
use std::sync::OnceLock;

/// A header field as the sender meant it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Field {
    pub name: Vec<u8>,
    pub value: Vec<u8>,
    /// Sent as "never indexed": intermediaries must keep it out of tables.
    pub never_indexed: bool,
}

impl Field {
    #[cfg(test)]
    pub fn new(name: &str, value: &str) -> Self {
        Self {
            name: name.as_bytes().to_vec(),
            value: value.as_bytes().to_vec(),
            never_indexed: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DecodeError {
    #[error("header block ends inside a representation")]
    Truncated,
    #[error("integer does not fit")]
    IntegerOverflow,
    #[error("index {0} is in neither table")]
    BadIndex(usize),
    #[error("dynamic table size update to {0} above the limit")]
    TableTooLarge(usize),
    #[error("dynamic table size update after a header field")]
    LateSizeUpdate,
    #[error("invalid Huffman code")]
    Huffman,
    #[error("decoded header list larger than {0} bytes")]
    ListTooLarge(usize),
}

/// The static table, RFC 7541 appendix A; entry `i` has index `i + 1`.
const STATIC: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// The table size both sides start with (HTTP/2 `SETTINGS_HEADER_TABLE_SIZE`
/// default).
pub(crate) const DEFAULT_TABLE_SIZE: usize = 4096;

/// Per-entry overhead in the table size accounting (RFC 7541 §4.1).
const ENTRY_OVERHEAD: usize = 32;

/// Decodes the header blocks of one direction of one connection, in order.
#[derive(Debug)]
pub(crate) struct Decoder {
    /// Newest entry first: index 62 is `table[0]`.
    table: VecDeque<(Vec<u8>, Vec<u8>)>,
    size: usize,
    max_size: usize,
    /// The largest size update accepted.
    size_limit: usize,
    /// The largest decoded header list (names, values, 32 per field).
    list_limit: usize,
}

impl Decoder {
    pub fn new(size_limit: usize, list_limit: usize) -> Self {
        Self {
            table: VecDeque::new(),
            size: 0,
            max_size: DEFAULT_TABLE_SIZE.min(size_limit),
            size_limit,
            list_limit,
        }
    }

    /// Decodes one complete header block (all its fragments joined).
    pub fn decode(&mut self, mut block: &[u8]) -> Result<Vec<Field>, DecodeError> {
        let mut fields = Vec::new();
        let mut list_size = 0usize;
        while let Some(&first) = block.first() {
            let field = if first & 0x80 != 0 {
                let index = read_int(&mut block, 7)?;
                let (name, value) = self.entry(index)?;
                Field {
                    name: name.to_vec(),
                    value: value.to_vec(),
                    never_indexed: false,
                }
            } else if first & 0xc0 == 0x40 {
                let field = self.literal(&mut block, 6, false)?;
                self.insert(field.name.clone(), field.value.clone());
                field
            } else if first & 0xe0 == 0x20 {
                if !fields.is_empty() {
                    return Err(DecodeError::LateSizeUpdate);
                }
                let size = read_int(&mut block, 5)?;
                if size > self.size_limit {
                    return Err(DecodeError::TableTooLarge(size));
                }
                self.max_size = size;
                self.evict(0);
                continue;
            } else {
                // 0001xxxx never indexed, 0000xxxx without indexing.
                self.literal(&mut block, 4, first & 0x10 != 0)?
            };
            list_size += field.name.len() + field.value.len() + ENTRY_OVERHEAD;
            if list_size > self.list_limit {
                return Err(DecodeError::ListTooLarge(self.list_limit));
            }
            fields.push(field);
        }
        Ok(fields)
    }

    fn literal(
        &self,
        block: &mut &[u8],
        prefix: u8,
        never_indexed: bool,
    ) -> Result<Field, DecodeError> {
        let index = read_int(block, prefix)?;
        let name = if index == 0 {
            read_string(block)?
        } else {
            self.entry(index)?.0.to_vec()
        };
        let value = read_string(block)?;
        Ok(Field {
            name,
            value,
            never_indexed,
        })
    }

    fn entry(&self, index: usize) -> Result<(&[u8], &[u8]), DecodeError> {
        match index {
            1..=61 => {
                let (n, v) = STATIC[index - 1];
                Ok((n.as_bytes(), v.as_bytes()))
            }
            _ => index
                .checked_sub(STATIC.len() + 1)
                .and_then(|i| self.table.get(i))
                .map(|(n, v)| (n.as_slice(), v.as_slice()))
                .ok_or(DecodeError::BadIndex(index)),
        }
    }

    fn insert(&mut self, name: Vec<u8>, value: Vec<u8>) {
        let size = name.len() + value.len() + ENTRY_OVERHEAD;
        if size > self.max_size {
            // An entry larger than the table empties it (RFC 7541 §4.4).
            self.table.clear();
            self.size = 0;
            return;
        }
        self.evict(size);
        self.size += size;
        self.table.push_front((name, value));
    }

    /// Drops the oldest entries until `room` more bytes fit.
    fn evict(&mut self, room: usize) {
        while self.size + room > self.max_size {
            let Some((n, v)) = self.table.pop_back() else {
                break;
            };
            self.size -= n.len() + v.len() + ENTRY_OVERHEAD;
        }
    }
}

/// Appends `fields` as literals without indexing (never indexed where the
/// sender said so), names and values as plain octets: decoding the result
/// needs neither a dynamic table nor Huffman tables.
pub(crate) fn encode_plain(fields: &[Field], out: &mut Vec<u8>) {
    for f in fields {
        let at = out.len();
        write_int(out, 4, 0);
        if f.never_indexed {
            out[at] |= 0x10;
        }
        for s in [&f.name, &f.value] {
            write_int(out, 7, s.len());
            out.extend_from_slice(s);
        }
    }
}

/// Reads an integer with an `n`-bit prefix (RFC 7541 §5.1).
fn read_int(block: &mut &[u8], n: u8) -> Result<usize, DecodeError> {
    let (&first, mut rest) = block.split_first().ok_or(DecodeError::Truncated)?;
    let max = (1usize << n) - 1;
    let mut value = usize::from(first) & max;
    if value == max {
        let mut shift = 0u32;
        loop {
            let (&b, r) = rest.split_first().ok_or(DecodeError::Truncated)?;
            rest = r;
            // Four continuation octets already reach 2^28; more is abuse.
            if shift > 21 {
                return Err(DecodeError::IntegerOverflow);
            }
            value += usize::from(b & 0x7f) << shift;
            shift += 7;
            if b & 0x80 == 0 {
                break;
            }
        }
    }
    *block = rest;
    Ok(value)
}

fn write_int(out: &mut Vec<u8>, n: u8, mut value: usize) {
    let max = (1usize << n) - 1;
    if value < max {
        out.push(value as u8);
        return;
    }
    out.push(max as u8);
    value -= max;
    while value >= 0x80 {
        out.push((value & 0x7f) as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Reads a string literal (RFC 7541 §5.2), Huffman-decoding it if flagged.
fn read_string(block: &mut &[u8]) -> Result<Vec<u8>, DecodeError> {
    let huffman = block.first().ok_or(DecodeError::Truncated)? & 0x80 != 0;
    let len = read_int(block, 7)?;
    if len > block.len() {
        return Err(DecodeError::Truncated);
    }
    let (raw, rest) = block.split_at(len);
    *block = rest;
    if huffman {
        huffman_decode(raw)
    } else {
        Ok(raw.to_vec())
    }
}

/// The HPACK Huffman code (RFC 7541 appendix B) is canonical: codes of one
/// length are consecutive and ordered by symbol, shorter lengths first. So
/// the bit length of every symbol is all it takes to rebuild it. Each row:
/// a length, the printable ASCII symbols of that length, the other symbols
/// (octet values; 256 is EOS).
const CODE_LENGTHS: &[(u8, &[u8], &[u16])] = &[
    (5, b"012aceiost", &[]),
    (6, b" %-./3456789=A_bdfghlmnpru", &[]),
    (7, b":BCDEFGHIJKLMNOPQRSTUVWYjkqvwxyz", &[]),
    (8, b"&*,;XZ", &[]),
    (10, b"!\"()?", &[]),
    (11, b"'+|", &[]),
    (12, b"#>", &[]),
    (13, b"$@[]~", &[0]),
    (14, b"^}", &[]),
    (15, b"<`{", &[]),
    (19, b"\\", &[195, 208]),
    (20, b"", &[128, 130, 131, 162, 184, 194, 224, 226]),
    (
        21,
        b"",
        &[
            153, 161, 167, 172, 176, 177, 179, 209, 216, 217, 227, 229, 230,
        ],
    ),
    (
        22,
        b"",
        &[
            129, 132, 133, 134, 136, 146, 154, 156, 160, 163, 164, 169, 170, 173, 178, 181, 185,
            186, 187, 189, 190, 196, 198, 228, 232, 233,
        ],
    ),
    (
        23,
        b"",
        &[
            1, 135, 137, 138, 139, 140, 141, 143, 147, 149, 150, 151, 152, 155, 157, 158, 165, 166,
            168, 174, 175, 180, 182, 183, 188, 191, 197, 231, 239,
        ],
    ),
    (
        24,
        b"",
        &[9, 142, 144, 145, 148, 159, 171, 206, 215, 225, 236, 237],
    ),
    (25, b"", &[199, 207, 234, 235]),
    (
        26,
        b"",
        &[
            192, 193, 200, 201, 202, 205, 210, 213, 218, 219, 238, 240, 242, 243, 255,
        ],
    ),
    (
        27,
        b"",
        &[
            203, 204, 211, 212, 214, 221, 222, 223, 241, 244, 245, 246, 247, 248, 250, 251, 252,
            253, 254,
        ],
    ),
    (
        28,
        b"",
        &[
            2, 3, 4, 5, 6, 7, 8, 11, 12, 14, 15, 16, 17, 18, 19, 20, 21, 23, 24, 25, 26, 27, 28,
            29, 30, 31, 127, 220, 249,
        ],
    ),
    (30, b"", &[10, 13, 22, 256]),
];

const EOS: u16 = 256;
const MAX_CODE_LEN: usize = 30;

/// Canonical decoding tables: the codes of length `l` are the values
/// `first[l] .. first[l] + count[l]`, standing for
/// `symbols[offset[l] ..][.. count[l]]`.
struct Canonical {
    first: [u32; MAX_CODE_LEN + 1],
    count: [u32; MAX_CODE_LEN + 1],
    offset: [usize; MAX_CODE_LEN + 1],
    symbols: Vec<u16>,
}

fn canonical() -> &'static Canonical {
    static TABLE: OnceLock<Canonical> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut by_len: Vec<Vec<u16>> = vec![Vec::new(); MAX_CODE_LEN + 1];
        for &(len, ascii, others) in CODE_LENGTHS {
            let row = &mut by_len[usize::from(len)];
            row.extend(ascii.iter().map(|&b| u16::from(b)));
            row.extend_from_slice(others);
            row.sort_unstable();
        }
        let mut t = Canonical {
            first: [0; MAX_CODE_LEN + 1],
            count: [0; MAX_CODE_LEN + 1],
            offset: [0; MAX_CODE_LEN + 1],
            symbols: Vec::with_capacity(257),
        };
        let mut code = 0u32;
        for (len, row) in by_len.iter().enumerate().skip(1) {
            t.first[len] = code;
            t.count[len] = row.len() as u32;
            t.offset[len] = t.symbols.len();
            t.symbols.extend_from_slice(row);
            code = (code + row.len() as u32) << 1;
        }
        t
    })
}

fn huffman_decode(src: &[u8]) -> Result<Vec<u8>, DecodeError> {
    let t = canonical();
    let mut out = Vec::with_capacity(src.len() * 8 / 5);
    let (mut code, mut len) = (0u32, 0usize);
    for byte in src {
        for shift in (0..8).rev() {
            code = (code << 1) | u32::from((byte >> shift) & 1);
            len += 1;
            if code.wrapping_sub(t.first[len]) < t.count[len] {
                let symbol = t.symbols[t.offset[len] + (code - t.first[len]) as usize];
                if symbol == EOS {
                    return Err(DecodeError::Huffman);
                }
                out.push(symbol as u8);
                (code, len) = (0, 0);
            } else if len == MAX_CODE_LEN {
                return Err(DecodeError::Huffman);
            }
        }
    }
    // What is left must be padding: fewer than 8 bits, all ones (a prefix
    // of EOS).
    if len > 7 || code != (1u32 << len) - 1 {
        return Err(DecodeError::Huffman);
    }
    Ok(out)
}

#[cfg(any(test, feature = "testing"))]
// Only the wire reading is used outside this crate's tests.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) mod tests {
    use super::*;

    /// The code of `symbol` as (bits, length), from the canonical tables.
    fn code_of(symbol: u16) -> (u32, usize) {
        let t = canonical();
        for len in 1..=MAX_CODE_LEN {
            let row = &t.symbols[t.offset[len]..t.offset[len] + t.count[len] as usize];
            if let Some(i) = row.iter().position(|&s| s == symbol) {
                return (t.first[len] + i as u32, len);
            }
        }
        panic!("symbol {symbol} has no code");
    }

    /// Huffman-encodes `s` (tests only: the rewriter never needs it).
    pub(crate) fn huffman_encode(s: &[u8]) -> Vec<u8> {
        let (mut acc, mut bits, mut out) = (0u64, 0usize, Vec::new());
        for &b in s {
            let (code, len) = code_of(u16::from(b));
            acc = (acc << len) | u64::from(code);
            bits += len;
            while bits >= 8 {
                bits -= 8;
                out.push((acc >> bits) as u8);
            }
        }
        if bits > 0 {
            let pad = 8 - bits;
            out.push(((acc << pad) as u8) | ((1u8 << pad) - 1));
        }
        out
    }

    /// A string literal, Huffman-coded.
    pub(crate) fn huffman_literal(s: &[u8], out: &mut Vec<u8>) {
        let coded = huffman_encode(s);
        let at = out.len();
        write_int(out, 7, coded.len());
        out[at] |= 0x80;
        out.extend_from_slice(&coded);
    }

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn code_is_complete_and_covers_every_symbol() {
        let t = canonical();
        let mut symbols = t.symbols.clone();
        symbols.sort_unstable();
        assert_eq!(symbols, (0..=EOS).collect::<Vec<_>>());
        // Kraft sum of exactly one: no code is missing or left over.
        let kraft: u64 = (1..=MAX_CODE_LEN)
            .map(|l| u64::from(t.count[l]) << (MAX_CODE_LEN - l))
            .sum();
        assert_eq!(kraft, 1 << MAX_CODE_LEN);
        // EOS is thirty one-bits.
        assert_eq!(code_of(EOS), ((1 << 30) - 1, 30));
    }

    #[test]
    fn huffman_matches_the_rfc_examples() {
        // RFC 7541 C.4.1 and C.6.1.
        for (text, coded) in [
            ("www.example.com", "f1e3 c2e5 f23a 6ba0 ab90 f4ff"),
            ("no-cache", "a8eb 1064 9cbf"),
            ("custom-key", "25a8 49e9 5ba9 7d7f"),
            ("custom-value", "25a8 49e9 5bb8 e8b4 bf"),
            ("302", "6402"),
            ("private", "aec3 771a 4b"),
            (
                "Mon, 21 Oct 2013 20:13:21 GMT",
                "d07a be94 1054 d444 a820 0595 040b 8166 e082 a62d 1bff",
            ),
            (
                "https://www.example.com",
                "9d29 ad17 1863 c78f 0b97 c8e9 ae82 ae43 d3",
            ),
        ] {
            assert_eq!(huffman_decode(&hex(coded)).unwrap(), text.as_bytes());
            assert_eq!(huffman_encode(text.as_bytes()), hex(coded), "{text}");
        }
    }

    #[test]
    fn huffman_round_trips_every_octet_and_rejects_bad_padding() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(huffman_decode(&huffman_encode(&all)).unwrap(), all);
        // '0' is 00000: three padding bits must be ones, not zeros.
        assert_eq!(huffman_decode(&[0b0000_0000]), Err(DecodeError::Huffman));
        assert_eq!(huffman_decode(&[0b0000_0111]).unwrap(), b"0");
        // A whole octet of padding is too much.
        assert_eq!(huffman_decode(&[0x07, 0xff]), Err(DecodeError::Huffman));
    }

    #[test]
    fn decodes_the_rfc_request_sequence_with_huffman_and_indexing() {
        // RFC 7541 C.4: three requests on one connection.
        let mut d = Decoder::new(DEFAULT_TABLE_SIZE, 1 << 16);
        let first = d
            .decode(&hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff"))
            .unwrap();
        assert_eq!(
            first,
            [
                Field::new(":method", "GET"),
                Field::new(":scheme", "http"),
                Field::new(":path", "/"),
                Field::new(":authority", "www.example.com"),
            ]
        );
        let second = d.decode(&hex("8286 84be 5886 a8eb 1064 9cbf")).unwrap();
        assert_eq!(second[3], Field::new(":authority", "www.example.com"));
        assert_eq!(second[4], Field::new("cache-control", "no-cache"));
        let third = d
            .decode(&hex(
                "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
            ))
            .unwrap();
        assert_eq!(
            third,
            [
                Field::new(":method", "GET"),
                Field::new(":scheme", "https"),
                Field::new(":path", "/index.html"),
                Field::new(":authority", "www.example.com"),
                Field::new("custom-key", "custom-value"),
            ]
        );
        assert_eq!(d.size, 164);
    }

    #[test]
    fn evicts_oldest_entries_and_follows_size_updates() {
        let mut d = Decoder::new(DEFAULT_TABLE_SIZE, 1 << 16);
        // Two literals with incremental indexing, new names: 2 * (1+1+32).
        let mut block = Vec::new();
        for (n, v) in [("a", "1"), ("b", "2")] {
            block.push(0x40);
            for s in [n, v] {
                write_int(&mut block, 7, s.len());
                block.extend_from_slice(s.as_bytes());
            }
        }
        d.decode(&block).unwrap();
        assert_eq!(d.entry(62).unwrap(), (&b"b"[..], &b"2"[..]));
        assert_eq!(d.entry(63).unwrap(), (&b"a"[..], &b"1"[..]));
        // Shrinking to 40 keeps only the newest entry.
        let mut update = Vec::new();
        write_int(&mut update, 5, 40);
        update[0] |= 0x20;
        assert_eq!(d.decode(&update).unwrap(), []);
        assert_eq!(d.entry(62).unwrap(), (&b"b"[..], &b"2"[..]));
        assert_eq!(d.entry(63), Err(DecodeError::BadIndex(63)));
        // Above the limit, or after a field: refused.
        let mut big = Vec::new();
        write_int(&mut big, 5, DEFAULT_TABLE_SIZE + 1);
        big[0] |= 0x20;
        assert_eq!(
            d.decode(&big),
            Err(DecodeError::TableTooLarge(DEFAULT_TABLE_SIZE + 1))
        );
        let late = [&[0x82u8][..], &update].concat();
        assert_eq!(d.decode(&late), Err(DecodeError::LateSizeUpdate));
    }

    #[test]
    fn plain_encoding_round_trips_through_a_fresh_decoder() {
        let long = "x".repeat(300);
        let mut secret = Field::new("authorization", "token");
        secret.never_indexed = true;
        let fields = vec![
            Field::new(":authority", "%2Fvar%2Flib%2Fkubelet%2Fx.sock"),
            Field::new("grpc-timeout", &long),
            secret,
        ];
        let mut block = Vec::new();
        encode_plain(&fields, &mut block);
        assert_eq!(block[0], 0x00);
        let mut d = Decoder::new(DEFAULT_TABLE_SIZE, 1 << 16);
        assert_eq!(d.decode(&block).unwrap(), fields);
        assert!(d.table.is_empty());
    }

    #[test]
    fn truncated_and_oversized_input_is_an_error() {
        let mut d = Decoder::new(DEFAULT_TABLE_SIZE, 100);
        assert_eq!(d.decode(&[0x40, 0x85, 0x01]), Err(DecodeError::Truncated));
        assert_eq!(d.decode(&[0xff]), Err(DecodeError::Truncated));
        assert_eq!(
            d.decode(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]),
            Err(DecodeError::IntegerOverflow)
        );
        assert_eq!(d.decode(&[0x80]), Err(DecodeError::BadIndex(0)));
        let mut block = Vec::new();
        encode_plain(&[Field::new("a", &"v".repeat(80))], &mut block);
        assert_eq!(d.decode(&block), Err(DecodeError::ListTooLarge(100)));
    }
}
