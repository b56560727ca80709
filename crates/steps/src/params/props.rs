//! Generated sentence parameters. A step's text is the user's input: every
//! parameter type reads any text without panicking, refuses with a message
//! that quotes the words at fault, accepts what its own regex matches (or
//! refuses it so), and prints what it read so that it reads back the same.
//! `PROPTEST_CASES` raises the bounded count (`make props-long`).
use std::fmt::Debug;
use std::str::FromStr;
use std::time::Duration;

use proptest::prelude::*;
use proptest::string::string_regex;

use super::*;

/// The words the step grammars look for, drawn among any other character.
const PIECES: &[&str] = &[
    "node ",
    "nodes ",
    " and ",
    ", ",
    ",",
    " ",
    "\"",
    "0",
    "1",
    "2",
    "18446744073709551616",
    "every node",
    "the node of pod ",
    "the driver",
    "driver ",
    "claim ",
    "the claim of pod ",
    "the extended resource claim of pod ",
    " to ",
    "s",
    "ms",
    "m",
    "h",
    "the admin",
    "the plugin on node ",
    "service account ",
    " of ",
    "NodePrepareResources",
    "GetInfo",
    "every container",
    "container ",
    "init container ",
    "with an inline claim",
    "using claim",
    "using claims ",
    "without claims",
    "not started yet",
    "in rolling-update mode",
    " for ",
    " with parameters ",
    "{}",
    " serving extended resource ",
    " with admin access",
    "devices per node",
    "device per node",
    "a network pool of ",
    " tainted ",
    "example.com/t=x:NoSchedule",
    "an all-nodes pool ",
    "a shared pool ",
    " of these slices",
    "node-allocatable devices ",
    "these devices",
    "no devices",
    "serving the ",
    " API",
    " APIs",
    " health",
    "v1",
    "v1beta1",
    "v1alpha1",
    "only",
    "writing device metadata ",
    "skipping node operations ",
    "on node",
    "on nodes ",
    "not registered with the kubelet",
    "without device health",
    ":",
];

fn text(len: usize) -> impl Strategy<Value = String> {
    let word = proptest::sample::select(PIECES.to_vec()).prop_map(str::to_owned);
    let piece = prop_oneof![2 => word, 1 => any::<char>().prop_map(String::from)];
    proptest::collection::vec(piece, 0..=len).prop_map(|p| p.concat())
}

/// Whether `message` quotes (as `{:?}` does) some part of `input`: the
/// words at fault, or all of it. Only blank input may be named by `""`.
fn names_part(message: &str, input: &str) -> bool {
    quoted(message)
        .iter()
        .any(|q| input.contains(q.as_str()) && (!q.trim().is_empty() || input.trim().is_empty()))
}

/// The texts `message` quotes as `{:?}` writes them, unescaped. (Trying
/// every part of the input instead costs the cube of its length.)
fn quoted(message: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = message.chars();
    while chars.by_ref().any(|c| c == '"') {
        let mut text = String::new();
        let mut closed = false;
        while let Some(c) = chars.next() {
            match c {
                '"' => {
                    closed = true;
                    break;
                }
                '\\' => match chars.next() {
                    Some('n') => text.push('\n'),
                    Some('r') => text.push('\r'),
                    Some('t') => text.push('\t'),
                    Some('0') => text.push('\0'),
                    Some('u') => {
                        let hex: String = chars
                            .by_ref()
                            .skip_while(|c| *c == '{')
                            .take_while(|c| *c != '}')
                            .collect();
                        if let Some(c) = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32)
                        {
                            text.push(c);
                        }
                    }
                    Some(other) => text.push(other),
                    None => {}
                },
                c => text.push(c),
            }
        }
        if closed {
            out.push(text);
        }
    }
    out
}

/// Reads `s` as a `T`; a refusal must quote what it refuses.
fn read<T: FromStr<Err = String>>(s: &str) -> Result<Option<T>, TestCaseError> {
    match s.parse::<T>() {
        Ok(v) => Ok(Some(v)),
        Err(m) => {
            prop_assert!(
                names_part(&m, s),
                "{} refused {s:?} naming no part of it: {m}",
                std::any::type_name::<T>()
            );
            Ok(None)
        }
    }
}

/// Every parameter type of a sentence, on one input.
fn read_all(s: &str) -> Result<(), TestCaseError> {
    read::<MethodOf>(s)?;
    read::<NodeSel>(s)?;
    read::<DriverRef>(s)?;
    read::<ClaimPhrase>(s)?;
    read::<Dur>(s)?;
    read::<Identity>(s)?;
    read::<PodStateWord>(s)?;
    read::<Health>(s)?;
    read::<SteadyPodStateWord>(s)?;
    read::<ClaimState>(s)?;
    read::<Verb>(s)?;
    read::<NodeRange>(s)?;
    read::<NodeList>(s)?;
    read::<Kind>(s)?;
    read::<Strings>(s)?;
    read::<Quoted>(s)?;
    read::<ApiVersion>(s)?;
    read::<Containers>(s)?;
    read::<Gets>(s)?;
    read::<PodClaimsPhrase>(s)?;
    read::<InstanceSettings>(s)?;
    read::<ClassOptions>(s)?;
    read::<ClaimOptions>(s)?;
    read::<DriverPhrase>(s)?;
    read::<ResourcesPhrase>(s)?;
    Ok(())
}

/// Text that the parameter's own regex matches (what cucumber hands it).
fn matching<T: cucumber::Parameter>() -> BoxedStrategy<String> {
    string_regex(T::REGEX)
        .unwrap_or_else(|e| panic!("{}: {e}", T::REGEX))
        .boxed()
}

/// What the regex matches, the type reads, or refuses naming it (a step
/// that matches must never fail without saying which words are wrong).
fn regex_agrees<T: cucumber::Parameter + FromStr<Err = String> + Debug>(
    s: &str,
) -> Result<(), TestCaseError> {
    read::<T>(s).map(drop)
}

proptest! {
    // Failures are kept as plain tests (`regressions`), not in files.
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn any_text_is_read_or_refused_naming_its_words(s in text(10)) {
        read_all(&s)?;
    }

}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn what_each_regex_matches_is_read(
        node in matching::<NodeSel>(),
        driver in matching::<DriverRef>(),
        claim in matching::<ClaimPhrase>(),
        dur in matching::<Dur>(),
        identity in matching::<Identity>(),
        range in matching::<NodeRange>(),
        list in matching::<NodeList>(),
        containers in matching::<Containers>(),
        class in matching::<ClassOptions>(),
        claim_options in matching::<ClaimOptions>(),
        method in matching::<MethodOf>(),
    ) {
        // Those whose regex admits only what they read: read, never refused.
        prop_assert!(node.parse::<NodeSel>().is_ok() || node.starts_with("node "), "{node:?}");
        prop_assert!(driver.parse::<DriverRef>().is_ok(), "{driver:?}");
        prop_assert!(claim.parse::<ClaimPhrase>().is_ok(), "{claim:?}");
        prop_assert!(identity.parse::<Identity>().is_ok() || identity.starts_with("the plugin on node "), "{identity:?}");
        prop_assert!(containers.parse::<Containers>().is_ok(), "{containers:?}");
        prop_assert!(claim_options.parse::<ClaimOptions>().is_ok(), "{claim_options:?}");
        prop_assert!(method.parse::<MethodOf>().is_ok(), "{method:?}");
        // Those whose regex admits numbers too large, repeated nodes or
        // quotes inside quotes: read, or refused naming the words.
        regex_agrees::<NodeSel>(&node)?;
        regex_agrees::<Identity>(&identity)?;
        regex_agrees::<Dur>(&dur)?;
        regex_agrees::<NodeRange>(&range)?;
        regex_agrees::<NodeList>(&list)?;
        regex_agrees::<ClassOptions>(&class)?;
    }

}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    /// A parameter printed reads back as itself.
    #[test]
    fn printed_parameters_read_back(
        label in "[^\"]{1,12}",
        nodes in proptest::collection::btree_set(0usize..100, 1..5),
        secs in 0u64..100_000,
    ) {
        for d in [DriverRef::The, DriverRef::Named(label)] {
            prop_assert_eq!(d.to_string().parse::<DriverRef>(), Ok(d));
        }
        let list = NodeList(nodes.into_iter().collect());
        prop_assert_eq!(list.to_string().parse::<NodeList>(), Ok(list));
        prop_assert_eq!(format!("{secs}s").parse::<Dur>(), Ok(Dur(Duration::from_secs(secs))));
    }
}

/// Inputs the properties found refused without a word of them quoted.
#[test]
fn regressions() {
    // The driver part of `<method> of <driver>` was empty, and its error
    // quoted only that: `got ""`.
    let e = "a network pool of ".parse::<MethodOf>().unwrap_err();
    assert!(e.contains("\"a network pool of \""), "{e}");
    // ` to ` has two empty node counts.
    let e = " to ".parse::<NodeRange>().unwrap_err();
    assert!(e.contains("\" to \""), "{e}");
    // A driver phrase with an empty resources part, or an empty setting.
    for phrase in [", ", "2 devices per node, ", ":"] {
        let e = phrase.parse::<DriverPhrase>().unwrap_err();
        assert!(e.ends_with(&format!(", in {phrase:?}")), "{e}");
    }
    // ` for ` names no driver, in class and claim options alike.
    let e = " for ".parse::<ClassOptions>().unwrap_err();
    assert!(e.ends_with(", in \" for \""), "{e}");
    let e = " for  with admin access"
        .parse::<ClaimOptions>()
        .unwrap_err();
    assert!(e.ends_with(", in \" for  with admin access\""), "{e}");
}
