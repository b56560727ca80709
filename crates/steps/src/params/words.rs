//! Compile-time regexes for phrase parameters made of fixed words
//! ([`phrase_words!`](super::phrase_words)): the words, escaped, joined by
//! `|`, as `const` data, since `cucumber::Parameter::REGEX` is a constant.
//! [`concat`] joins such regexes with literal ones.

/// Whether `b` must be escaped in a regex (as `regex::escape` does).
const fn is_meta(b: u8) -> bool {
    matches!(
        b,
        b'\\'
            | b'.'
            | b'+'
            | b'*'
            | b'?'
            | b'('
            | b')'
            | b'|'
            | b'['
            | b']'
            | b'{'
            | b'}'
            | b'^'
            | b'$'
            | b'#'
            | b'&'
            | b'-'
            | b'~'
    )
}

/// The length of [`alternation`] of `words`.
pub const fn alternation_len(words: &[&str]) -> usize {
    let mut len = 0;
    let mut i = 0;
    while i < words.len() {
        if i > 0 {
            len += 1;
        }
        let w = words[i].as_bytes();
        let mut j = 0;
        while j < w.len() {
            len += if is_meta(w[j]) { 2 } else { 1 };
            j += 1;
        }
        i += 1;
    }
    len
}

/// `words`, each escaped, joined by `|`; `N` is [`alternation_len`].
pub const fn alternation<const N: usize>(words: &[&str]) -> [u8; N] {
    let mut out = [0u8; N];
    let mut at = 0;
    let mut i = 0;
    while i < words.len() {
        if i > 0 {
            out[at] = b'|';
            at += 1;
        }
        let w = words[i].as_bytes();
        let mut j = 0;
        while j < w.len() {
            if is_meta(w[j]) {
                out[at] = b'\\';
                at += 1;
            }
            out[at] = w[j];
            at += 1;
            j += 1;
        }
        i += 1;
    }
    assert!(at == N, "alternation: N is not alternation_len(words)");
    out
}

/// The length of [`concat`] of `parts`.
pub const fn concat_len(parts: &[&str]) -> usize {
    let mut len = 0;
    let mut i = 0;
    while i < parts.len() {
        len += parts[i].len();
        i += 1;
    }
    len
}

/// `parts` one after the other; `N` is [`concat_len`].
pub const fn concat<const N: usize>(parts: &[&str]) -> [u8; N] {
    let mut out = [0u8; N];
    let mut at = 0;
    let mut i = 0;
    while i < parts.len() {
        let p = parts[i].as_bytes();
        let mut j = 0;
        while j < p.len() {
            out[at] = p[j];
            at += 1;
            j += 1;
        }
        i += 1;
    }
    assert!(at == N, "concat: N is not concat_len(parts)");
    out
}

/// Bytes built from whole `&str`s as text.
pub const fn text(bytes: &'static [u8]) -> &'static str {
    match std::str::from_utf8(bytes) {
        Ok(s) => s,
        Err(_) => panic!("the bytes were not built from whole strings"),
    }
}

/// A regex of string constants joined at compile time:
/// `regex_concat!["(?:", Method::REGEX, ")?"]`.
macro_rules! regex_concat {
    [$($part:expr),+ $(,)?] => {{
        const PARTS: &[&str] = &[$($part),+];
        const LEN: usize = $crate::params::words::concat_len(PARTS);
        const BYTES: [u8; LEN] = $crate::params::words::concat::<LEN>(PARTS);
        $crate::params::words::text(&BYTES)
    }};
}
pub(crate) use regex_concat;

/// `` `a`, `b` or `c` ``: the words a parameter accepts, for its errors.
pub fn listing(words: &[&str]) -> String {
    let quoted: Vec<String> = words.iter().map(|w| format!("`{w}`")).collect();
    match quoted.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => quoted.join(""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WORDS: &[&str] = &["a.b", "c|d", "x-y", "(z)", "plain words"];
    const LEN: usize = alternation_len(WORDS);
    const BYTES: [u8; LEN] = alternation::<LEN>(WORDS);

    #[test]
    fn words_are_escaped_as_the_regex_crate_escapes_them() {
        let want: Vec<String> = WORDS.iter().map(|w| regex::escape(w)).collect();
        assert_eq!(text(&BYTES), want.join("|"));
        let re = regex::Regex::new(&format!("^(?:{})$", text(&BYTES))).expect("valid");
        for w in WORDS {
            assert!(re.is_match(w), "{w}");
        }
        assert!(!re.is_match("aXb"));
        assert_eq!(re.captures_len(), 1);
    }

    #[test]
    fn regexes_concatenate() {
        const R: &str = regex_concat!["(?:", "a|b", ")?"];
        assert_eq!(R, "(?:a|b)?");
    }

    #[test]
    fn word_lists_read_as_english() {
        assert_eq!(listing(&["a"]), "`a`");
        assert_eq!(listing(&["a", "b"]), "`a` or `b`");
        assert_eq!(listing(&["a", "b", "c"]), "`a`, `b` or `c`");
    }
}
