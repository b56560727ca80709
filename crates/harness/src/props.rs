//! Generated input for the property tests of the harness's parsers (device
//! lines, taints, quantities): text drawn from the words a grammar knows
//! and any other character, so the cases reach both the grammar's paths and
//! its refusals.
use proptest::prelude::*;

/// Text of up to `len` pieces: the `words` a parser looks for, and any
/// other character (cheaper to draw than a regex's `.`).
pub fn text(words: &[&'static str], len: usize) -> impl Strategy<Value = String> {
    let word = proptest::sample::select(words.to_vec()).prop_map(str::to_owned);
    let piece = prop_oneof![word, any::<char>().prop_map(String::from)];
    proptest::collection::vec(piece, 0..=len).prop_map(|p| p.concat())
}
