//! What `dra-e2e check` suggests for a mistake: the steps of the catalogue
//! closest to an undefined step, the known tag closest to an unknown one.
//!
//! Sentences are compared word by word: an edit distance whose steps are
//! words, where replacing a word by a misspelling of it (an edit distance
//! of letters), by its singular or plural, or adding or dropping an
//! article ("a", "an", "the") costs less than replacing it by another
//! word. Quoted strings and numbers are alike whatever their value, and a
//! pattern's `<placeholder>` takes a few words of anything.
use cucumber::gherkin::StepType;

use crate::profile::capability::{self, Capability};
use crate::steps::catalogue::{self, Entry};

/// At most this many steps are suggested.
const MAX_SUGGESTIONS: usize = 3;

/// Words a sentence may have or lack at little cost.
const ARTICLES: &[&str] = &["a", "an", "the"];

/// Cost of adding or dropping an article.
const ARTICLE: f32 = 0.3;
/// Cost of a word's singular for its plural or the other way round.
const NUMBER: f32 = 0.3;
/// Cost of each word a placeholder takes after its first.
const HOLE_WORD: f32 = 0.25;
/// A placeholder takes at most this many words.
const HOLE_MAX: usize = 6;
/// A step no further than this from the closest one is worth suggesting
/// with it.
const WINDOW: f32 = 0.5;

/// The letters-level edit distance of `a` and `b`, ignoring case, where
/// swapping two neighbours is one edit (optimal string alignment).
pub fn letter_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.to_lowercase().chars().collect();
    let b: Vec<char> = b.to_lowercase().chars().collect();
    // d[i][j]: distance of a[..i] and b[..j].
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let same = a[i - 1] == b[j - 1];
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + usize::from(!same));
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

/// How many letters of a word of `len` may be wrong for it to count as
/// misspelt rather than another word: a third, at least one.
fn typos_allowed(len: usize) -> usize {
    (len / 3).max(1)
}

/// One of `a` and `b` is the plural of the other (English, regular).
fn singular_plural(a: &str, b: &str) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    match long.strip_prefix(short) {
        Some("s") | Some("es") => true,
        _ => long
            .strip_suffix("ies")
            .is_some_and(|stem| short.strip_suffix('y') == Some(stem) && !stem.is_empty()),
    }
}

/// Cost of writing word `typed` where `meant` belongs: 0 when they are
/// the same, less than 1 for a misspelling, a singular for a plural or one
/// article for another, 1 for another word.
fn word_cost(typed: &str, meant: &str) -> f32 {
    if typed == meant {
        return 0.0;
    }
    if ARTICLES.contains(&typed) && ARTICLES.contains(&meant) {
        return ARTICLE;
    }
    if singular_plural(typed, meant) {
        return NUMBER;
    }
    let (lt, lm) = (typed.chars().count(), meant.chars().count());
    let allowed = typos_allowed(lt.min(lm));
    // Words of lengths this far apart are further apart still.
    if lt.abs_diff(lm) > allowed {
        return 1.0;
    }
    let d = letter_distance(typed, meant);
    if d <= allowed {
        0.3 + 0.2 * d as f32
    } else {
        1.0
    }
}

/// A word of a sentence, as compared.
#[derive(Debug, Clone, PartialEq)]
enum Token {
    /// A word, lower-cased; in a pattern, any of several (`running|pending`,
    /// `node(s)`).
    Word(Vec<String>),
    /// A quoted string: every one is alike.
    Quoted,
    /// A number, or a number with a unit (`20s`, `1000Mi`).
    Number,
    /// A pattern's `<placeholder>`: one word of anything, or a few.
    Hole,
}

impl Token {
    fn is_article(&self) -> bool {
        matches!(self, Token::Word(w) if w.iter().all(|w| ARTICLES.contains(&w.as_str())))
    }
}

fn is_number(word: &str) -> bool {
    let digits = word.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
    digits.len() < word.len()
        && word.starts_with(|c: char| c.is_ascii_digit())
        && digits.chars().all(|c| c.is_ascii_alphabetic())
}

/// The words of `text`; `pattern`: the catalogue's notation (`<x>`,
/// `a|b`, `(s)`) is read as such.
fn tokenize(text: &str, pattern: bool) -> Vec<Token> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('"') {
            out.push(Token::Quoted);
            rest = after.find('"').map_or("", |end| &after[end + 1..]);
            continue;
        }
        let end = rest
            .find(|c: char| c.is_whitespace() || c == '"')
            .unwrap_or(rest.len());
        let raw = &rest[..end];
        rest = rest[end..].trim_start();
        if let Some(t) = word_token(raw, pattern) {
            out.push(t);
        }
    }
    out
}

fn word_token(raw: &str, pattern: bool) -> Option<Token> {
    let strip = |w: &str| {
        w.trim_matches(|c: char| ",.:;!?".contains(c))
            .to_lowercase()
    };
    if !pattern {
        let w = strip(raw);
        return match w.as_str() {
            "" => None,
            w if is_number(w) => Some(Token::Number),
            _ => Some(Token::Word(vec![w])),
        };
    }
    let mut words = Vec::new();
    for alt in raw.split('|') {
        let alt = alt.trim_matches(|c: char| ",.:;!?".contains(c));
        if alt.starts_with('<') && alt.ends_with('>') {
            return Some(Token::Hole);
        }
        if let Some(stem) = alt.strip_suffix("(s)") {
            words.push(stem.to_lowercase());
            words.push(format!("{}s", stem.to_lowercase()));
        } else if alt == "a(n)" {
            words.extend(["a".to_owned(), "an".to_owned()]);
        } else {
            let w = strip(alt);
            if w.is_empty() || w == "..." {
                continue;
            }
            if is_number(&w) {
                return Some(Token::Number);
            }
            words.push(w);
        }
    }
    (!words.is_empty()).then_some(Token::Word(words))
}

/// Cost of user token `u` where the sentence has `c` (not a placeholder).
fn substitute(u: &Token, c: &Token) -> f32 {
    match (u, c) {
        (Token::Quoted, Token::Quoted) | (Token::Number, Token::Number) => 0.0,
        (Token::Word(u), Token::Word(c)) => c
            .iter()
            .map(|c| word_cost(&u[0], c))
            .fold(f32::INFINITY, f32::min),
        _ => 1.0,
    }
}

/// Cost of a word the user wrote that the sentence lacks.
fn extra(t: &Token) -> f32 {
    if t.is_article() { ARTICLE } else { 1.0 }
}

/// Cost of one of the sentence's words the user left out: a name in
/// quotes is half a word (`the pod is running` for `pod "p" is running`).
fn missing(t: &Token) -> f32 {
    match t {
        Token::Quoted => 0.5,
        t => extra(t),
    }
}

/// How far `typed` is from sentence `form`, in words.
fn distance(typed: &[Token], form: &[Token]) -> f32 {
    let (n, m) = (typed.len(), form.len());
    let mut d = vec![vec![0f32; m + 1]; n + 1];
    for i in 1..=n {
        d[i][0] = d[i - 1][0] + extra(&typed[i - 1]);
    }
    for j in 1..=m {
        d[0][j] = d[0][j - 1] + missing(&form[j - 1]);
    }
    for i in 1..=n {
        for j in 1..=m {
            let mut best =
                (d[i - 1][j] + extra(&typed[i - 1])).min(d[i][j - 1] + missing(&form[j - 1]));
            if form[j - 1] == Token::Hole {
                for k in 1..=i.min(HOLE_MAX) {
                    best = best.min(d[i - k][j - 1] + HOLE_WORD * (k - 1) as f32);
                }
            } else {
                best = best.min(d[i - 1][j - 1] + substitute(&typed[i - 1], &form[j - 1]));
            }
            d[i][j] = best;
        }
    }
    d[n][m]
}

/// How far a sentence of `words` words may be from the closest step for
/// that step to be suggested: half a word, and a few more in longer
/// sentences.
fn limit(words: usize) -> f32 {
    0.5 + 0.15 * words as f32
}

/// The keyword a sentence starts with, if any, and the rest: `Given|When x`
/// gives both types.
fn split_keyword(sentence: &str) -> (Vec<StepType>, &str) {
    let (first, rest) = sentence.split_once(' ').unwrap_or((sentence, ""));
    let mut types = Vec::new();
    for k in first.split('|') {
        match k {
            "Given" => types.push(StepType::Given),
            "When" => types.push(StepType::When),
            "Then" => types.push(StepType::Then),
            _ => return (Vec::new(), sentence),
        }
    }
    (types, rest)
}

/// The sentences `[...]` groups give: with each group and without it.
fn expand_optional(text: &str) -> Vec<String> {
    const MAX_FORMS: usize = 64;
    let Some(open) = text.find('[') else {
        return vec![text.to_owned()];
    };
    let mut depth = 0;
    let mut close = None;
    for (i, c) in text[open..].char_indices() {
        match c {
            '[' => depth += 1,
            ']' => {
                depth -= 1;
                if depth == 0 {
                    close = Some(open + i);
                    break;
                }
            }
            _ => {}
        }
    }
    let Some(close) = close else {
        return vec![text.to_owned()];
    };
    let (before, inner, after) = (&text[..open], &text[open + 1..close], &text[close + 1..]);
    let mut out = Vec::new();
    for tail in expand_optional(after) {
        out.push(format!("{before}{tail}"));
        for middle in expand_optional(inner) {
            if out.len() >= MAX_FORMS {
                return out;
            }
            out.push(format!("{before}{middle}{tail}"));
        }
    }
    out
}

/// One way a catalogue step can be written, and what to show for it.
struct Form {
    types: Vec<StepType>,
    tokens: Vec<Token>,
    /// The example (`true`) or a pattern.
    example: bool,
}

/// The forms of a catalogue entry: its example, and every `/`-separated
/// sentence of its pattern with and without its optional parts.
fn forms(entry: &Entry) -> Vec<(Form, String)> {
    let mut out = Vec::new();
    let example = entry.example.lines().next().unwrap_or_default();
    let (types, body) = split_keyword(example);
    out.push((
        Form {
            types,
            tokens: tokenize(body, false),
            example: true,
        },
        example.to_owned(),
    ));
    // `(table | a | b |)`: what the step's table holds, not its words.
    let pattern = match entry.pattern.find(" (table") {
        Some(i) => &entry.pattern[..i],
        None => entry.pattern,
    };
    let mut last_types = Vec::new();
    for sentence in pattern.split(" / ") {
        let (types, body) = split_keyword(sentence);
        // `... / is no longer delayed on <node>` continues the first
        // sentence: shown whole, it reads.
        let (types, shown) = if types.is_empty() {
            (last_types.clone(), entry.pattern.to_owned())
        } else {
            (types, sentence.to_owned())
        };
        last_types.clone_from(&types);
        for text in expand_optional(body) {
            out.push((
                Form {
                    types: types.clone(),
                    tokens: tokenize(&text, true),
                    example: false,
                },
                shown.clone(),
            ));
        }
    }
    out
}

/// The catalogue's steps closest to step `text` (without its keyword) of
/// type `ty`, best first, at most three: the example when it is about as
/// close as the pattern, the pattern otherwise. None when nothing is close.
pub fn steps(text: &str, ty: StepType) -> Vec<String> {
    // Every entry's forms, made once.
    static FORMS: std::sync::OnceLock<Vec<Vec<(Form, String)>>> = std::sync::OnceLock::new();
    let catalogue = FORMS.get_or_init(|| {
        catalogue::CATALOGUE
            .iter()
            .flat_map(|t| t.entries)
            .map(forms)
            .collect()
    });
    let typed = tokenize(text, false);
    if typed.is_empty() {
        return Vec::new();
    }
    let mut scored: Vec<(f32, &str)> = Vec::new();
    for entry in catalogue {
        let mut best_example: Option<(f32, &str)> = None;
        let mut best_pattern: Option<(f32, &str)> = None;
        for (form, shown) in entry {
            let mut cost = distance(&typed, &form.tokens);
            // The same words under another keyword are a mistake too, but
            // the step of the keyword written is likelier.
            if !form.types.is_empty() && !form.types.contains(&ty) {
                cost += 0.1;
            }
            let best = if form.example {
                &mut best_example
            } else {
                &mut best_pattern
            };
            if best.is_none_or(|(c, _)| cost < c) {
                *best = Some((cost, shown));
            }
        }
        let chosen = match (best_example, best_pattern) {
            (Some(e), Some(p)) => {
                if e.0 <= p.0 + 0.5 {
                    (p.0.min(e.0), e.1)
                } else {
                    p
                }
            }
            (Some(x), None) | (None, Some(x)) => x,
            (None, None) => continue,
        };
        scored.push(chosen);
    }
    scored.sort_by(|a, b| a.0.total_cmp(&b.0));
    let Some(best) = scored.first().map(|s| s.0) else {
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    for (cost, shown) in scored {
        if cost > limit(typed.len()) || cost > best + WINDOW || out.len() == MAX_SUGGESTIONS {
            break;
        }
        if !out.iter().any(|o| o == shown) {
            out.push(shown.to_owned());
        }
    }
    out
}

/// The known tag closest to `tag` (without `@`), when one is close
/// enough to be what was meant: a misspelt name, or a misspelt prefix
/// (`@FeatureGates:X`) or capability (`@DriverCapability:AdminAcess`).
pub fn tag(tag: &str, known: &[&str], prefixes: &[&str]) -> Option<String> {
    let close = |typed: &str, meant: &str| {
        letter_distance(typed, meant) <= typos_allowed(meant.chars().count())
    };
    if let Some((head, rest)) = tag.split_once(':') {
        let prefixes = prefixes
            .iter()
            .copied()
            .chain([capability::TAG_PREFIX])
            .filter_map(|p| p.strip_suffix(':'));
        let head = prefixes
            .map(|p| (letter_distance(head, p), p))
            .filter(|(_, p)| close(head, p))
            .min_by_key(|(d, _)| *d)?
            .1;
        let rest = if format!("{head}:") == capability::TAG_PREFIX {
            Capability::ALL
                .iter()
                .map(|c| c.name())
                .map(|c| (letter_distance(rest, c), c))
                .filter(|(_, c)| close(rest, c))
                .min_by_key(|(d, _)| *d)?
                .1
        } else if rest.is_empty() {
            return None;
        } else {
            rest
        };
        let fixed = format!("{head}:{rest}");
        return (fixed != tag).then_some(fixed);
    }
    known
        .iter()
        .map(|k| (letter_distance(tag, k), *k))
        .filter(|(_, k)| close(tag, k))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn suggest(text: &str, ty: StepType) -> Vec<String> {
        steps(text, ty)
    }

    #[test]
    fn letters() {
        assert_eq!(letter_distance("driver", "driver"), 0);
        assert_eq!(letter_distance("drvier", "driver"), 1);
        assert_eq!(letter_distance("runing", "running"), 1);
        assert_eq!(letter_distance("Pod", "pod"), 0);
        assert_eq!(letter_distance("", "abc"), 3);
        assert_eq!(letter_distance("kitten", "sitting"), 3);
        assert!(singular_plural("device", "devices"));
        assert!(singular_plural("classes", "class"));
        assert!(singular_plural("policy", "policies"));
        assert!(!singular_plural("pod", "pods2"));
    }

    #[test]
    fn patterns_read_as_notation() {
        assert_eq!(
            tokenize("pod \"<name>\" is running|pending for <duration>", true),
            vec![
                Token::Word(vec!["pod".into()]),
                Token::Quoted,
                Token::Word(vec!["is".into()]),
                Token::Word(vec!["running".into(), "pending".into()]),
                Token::Word(vec!["for".into()]),
                Token::Hole,
            ]
        );
        assert_eq!(
            tokenize("called 2 times, Pod \"a b\" 20s", false),
            vec![
                Token::Word(vec!["called".into()]),
                Token::Number,
                Token::Word(vec!["times".into()]),
                Token::Word(vec!["pod".into()]),
                Token::Quoted,
                Token::Number,
            ]
        );
        let mut forms = expand_optional("a[ b[ c]] d[ e]");
        forms.sort();
        assert_eq!(
            forms,
            ["a b c d", "a b c d e", "a b d", "a b d e", "a d", "a d e"]
        );
    }

    #[test]
    fn a_misspelt_word_finds_its_step() {
        assert_eq!(
            suggest("a drvier with 1 device per node", StepType::Given)[0],
            "Given a driver [\"<name>\"] with <resources>[, <setting>]..."
        );
        assert_eq!(
            suggest("pod \"tester-1\" is runing", StepType::Then)[0],
            "Then pod \"tester-1\" is running"
        );
    }

    #[test]
    fn a_singular_for_a_plural_finds_its_step() {
        assert_eq!(
            suggest("all pod run on different nodes", StepType::Then)[0],
            "Then all pods run on different nodes"
        );
        assert_eq!(
            suggest("no plugin has prepared claim", StepType::Then)[0],
            "Then no plugin has prepared claims"
        );
    }

    #[test]
    fn a_missing_article_finds_its_step() {
        assert_eq!(
            suggest(
                "outage was shorter than the kubelet's wiping delay",
                StepType::Then
            )[0],
            "Then the outage was shorter than the kubelet's wiping delay"
        );
        assert_eq!(
            suggest("driver under test", StepType::Given)[0],
            "Given the driver under test"
        );
    }

    #[test]
    fn the_right_words_under_the_wrong_keyword_get_the_right_keyword() {
        assert_eq!(
            suggest("the driver is registered on every node", StepType::When),
            ["Then the driver is registered on every node"]
        );
    }

    #[test]
    fn something_unrelated_gets_no_suggestion() {
        for text in [
            "the moon is made of green cheese",
            "the weather is nice today",
            "I eat an apple",
            "foo",
            "everything works",
        ] {
            for ty in [StepType::Given, StepType::When, StepType::Then] {
                assert_eq!(suggest(text, ty), Vec::<String>::new(), "{ty:?} {text}");
            }
        }
    }

    #[test]
    fn every_example_suggests_its_own_step_first() {
        for entry in catalogue::CATALOGUE.iter().flat_map(|t| t.entries) {
            let example = entry.example.lines().next().unwrap();
            let (types, body) = split_keyword(example);
            let got = suggest(body, types[0]);
            let own = forms(entry)
                .into_iter()
                .map(|(_, shown)| shown)
                .collect::<Vec<_>>();
            assert!(
                got.first().is_some_and(|g| own.contains(g)),
                "{example}: {got:?}"
            );
        }
    }

    #[test]
    fn closest_tags() {
        let known = ["DynamicResourceAllocation", "serial", "slow", "Interposed"];
        let prefixes = ["FeatureGate:", "KubeletMinVersion:"];
        let t = |tag: &str| super::tag(tag, &known, &prefixes);
        assert_eq!(
            t("DynamicResourceAlocation").as_deref(),
            Some("DynamicResourceAllocation")
        );
        assert_eq!(t("Serial").as_deref(), Some("serial"));
        assert_eq!(t("Interposd").as_deref(), Some("Interposed"));
        assert_eq!(
            t("FeatureGates:DRADeviceTaints").as_deref(),
            Some("FeatureGate:DRADeviceTaints")
        );
        assert_eq!(t("KubeletMinVersion1.34"), None);
        assert_eq!(
            t("DriverCapability:AdminAcess").as_deref(),
            Some("DriverCapability:AdminAccess")
        );
        assert_eq!(
            t("DriverCapabilty:AdminAccess").as_deref(),
            Some("DriverCapability:AdminAccess")
        );
        assert_eq!(t("wip"), None);
        assert_eq!(t("Something:else"), None);
    }
}
