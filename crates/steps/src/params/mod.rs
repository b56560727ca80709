//! Typed step parameters, so a misspelt value fails to match (and `dra-e2e
//! check` reports it) instead of failing at run time.
mod driver_phrase;
pub mod words;

/// Declares a phrase parameter made of fixed words once: from `"word" =>
/// value` pairs, the type's `cucumber::Parameter` (its regex: the words,
/// escaped, joined by `|`, built at compile time; tried in the order
/// written) and its `FromStr` (whose error lists the words), with the words
/// as `WORDS`. The type itself is declared beside it.
///
/// ```text
/// phrase_words! {
///     Verb as "verb", "verb" {
///         "updating" => Verb::Updating,
///         "deleting" => Verb::Deleting,
///     }
/// }
/// ```
///
/// `Verb as "verb"` names the parameter `{verb}` in sentences; the second
/// string says what a word is, for the error.
///
/// A type of a lower floor that has words of its own (`WORDS` and
/// `from_words`, as `ground::dynamic::PatchType`) gets a newtype here:
/// `phrase_words! { PatchTypeWord(PatchType) as "patchtype", "patch type" }`.
macro_rules! phrase_words {
    ($ty:ident as $name:literal, $what:literal { $($word:literal => $value:expr),+ $(,)? }) => {
        impl $ty {
            /// The words of the parameter, in the order its regex tries them.
            pub const WORDS: &'static [&'static str] = &[$($word),+];
        }

        $crate::params::phrase_words!(@parameter $ty, $name);

        impl ::std::str::FromStr for $ty {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($word => Ok($value),)+
                    other => Err(format!(
                        "unknown {} {other:?}; expected {}",
                        $what,
                        $crate::params::words::listing(Self::WORDS)
                    )),
                }
            }
        }
    };
    // A newtype over a type of a lower floor that keeps its own words
    // (`WORDS`, in the order the regex tries them, and `from_words`).
    ($ty:ident($inner:ty) as $name:literal, $what:literal) => {
        impl $ty {
            /// The words of the parameter, in the order its regex tries them.
            pub const WORDS: &'static [&'static str] = &<$inner>::WORDS;
        }

        $crate::params::phrase_words!(@parameter $ty, $name);

        impl ::std::str::FromStr for $ty {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                <$inner>::from_words(s).map($ty).ok_or_else(|| {
                    format!(
                        "unknown {} {s:?}; expected {}",
                        $what,
                        $crate::params::words::listing(Self::WORDS)
                    )
                })
            }
        }
    };
    // The cucumber parameter of either form: a regex that tries `WORDS` in order.
    (@parameter $ty:ident, $name:literal) => {
        impl ::cucumber::Parameter for $ty {
            const REGEX: &'static str = {
                const LEN: usize = $crate::params::words::alternation_len($ty::WORDS);
                const BYTES: [u8; LEN] =
                    $crate::params::words::alternation::<LEN>($ty::WORDS);
                $crate::params::words::text(&BYTES)
            };
            const NAME: &'static str = $name;
        }
    };
}
pub(crate) use phrase_words;

// After `phrase_words!`, which they declare their words with.
mod methods;
mod options;
mod references;
mod states;
mod values;

pub use crate::ground::wait::{PodState, SteadyPodState};
pub use driver_phrase::{DriverPhrase, ResourcesPhrase};
pub use methods::{ApiVersion, Method, MethodOf};
pub use options::{ClaimOptions, ClassOptions, InstanceSettings, PodClaimsPhrase};
pub use references::{
    ClaimPhrase, Containers, DriverRef, Identity, Kind, NodeList, NodeRange, NodeSel,
};
pub use states::{ClaimState, Gets, Health, PodStateWord, SteadyPodStateWord, Verb};
pub use values::{Dur, Quoted, Strings};

/// Quoted, comma/and-separated strings: `"a", "b" and "c"`.
pub fn quoted_list(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(start) = rest.find('"') {
        let after = &rest[start + 1..];
        let Some(end) = after.find('"') else { break };
        out.push(after[..end].to_owned());
        rest = &after[end + 1..];
    }
    out
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;
    use cucumber::Parameter;

    /// A words parameter's regex, anchored, matches each of its words and
    /// no other text, has no capture group, and each word parses.
    fn words_hold<T: Parameter + FromStr<Err = String> + std::fmt::Debug>(words: &[&str]) {
        let re = regex::Regex::new(&format!("^(?:{})$", T::REGEX)).expect("a valid regex");
        assert_eq!(re.captures_len(), 1, "{} has a capture group", T::REGEX);
        for w in words {
            assert!(re.is_match(w), "{} does not match {w:?}", T::REGEX);
            w.parse::<T>().unwrap_or_else(|e| panic!("{w:?}: {e}"));
        }
        assert!(!re.is_match("sideways"));
        let e = "sideways".parse::<T>().unwrap_err();
        assert!(e.contains("\"sideways\""), "{e}");
        for w in words {
            assert!(e.contains(&format!("`{w}`")), "{e} lacks {w}");
        }
    }

    #[test]
    fn word_parameters_spell_their_words_once() {
        // The regexes are the ones the words gave before they were spelt once.
        assert_eq!(
            PodStateWord::REGEX,
            "running|scheduled|unschedulable|completed|failed|gone|pending"
        );
        assert_eq!(SteadyPodStateWord::REGEX, "pending|running|terminating");
        assert_eq!(Health::REGEX, "Healthy|Unhealthy|Unknown");
        assert_eq!(
            ClaimState::REGEX,
            "allocated|deallocated|not reserved|deleted"
        );
        assert_eq!(Verb::REGEX, "updating|deleting");
        assert_eq!(ApiVersion::REGEX, "v1|v1beta1|v1alpha4|v1alpha1");
        assert_eq!(Gets::REGEX, "gets|does not get");
        assert_eq!(
            MethodOf::REGEX,
            r#"(?:NodePrepareResources|NodeUnprepareResources|GetInfo|NotifyRegistrationStatus|NodeWatchResources)(?: of (?:the driver|driver "[^"]+"))?"#
        );
        words_hold::<PodStateWord>(PodStateWord::WORDS);
        words_hold::<SteadyPodStateWord>(SteadyPodStateWord::WORDS);
        words_hold::<Health>(Health::WORDS);
        words_hold::<ClaimState>(ClaimState::WORDS);
        words_hold::<Verb>(Verb::WORDS);
        words_hold::<ApiVersion>(ApiVersion::WORDS);
        words_hold::<Gets>(Gets::WORDS);
        words_hold::<Method>(Method::WORDS);
        words_hold::<crate::crud::PatchTypeWord>(crate::crud::PatchTypeWord::WORDS);
        words_hold::<crate::crud::Watched>(crate::crud::Watched::WORDS);
        assert_eq!(
            "not reserved".parse::<ClaimState>(),
            Ok(ClaimState::NotReserved)
        );
        assert_eq!("does not get".parse::<Gets>(), Ok(Gets(false)));
        assert_eq!(
            "Unhealthy".parse::<Health>().map(Health::as_status),
            Ok("Unhealthy")
        );
        assert_eq!(
            "runing".parse::<PodStateWord>().unwrap_err(),
            "unknown pod state \"runing\"; expected `running`, `scheduled`, `unschedulable`, \
             `completed`, `failed`, `gone` or `pending`"
        );
    }
}

#[cfg(test)]
mod props;
