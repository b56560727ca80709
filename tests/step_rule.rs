//! The step rule (docs/development.md): code in `crates/steps/` parses a sentence
//! and calls the harness; it makes no Kubernetes API call, runs no wait and
//! walks no JSON of its own. Those belong in the harness and the ground
//! (`crates/harness`, `crates/kube`), where the conformance pack, the
//! tests and the next step can use them too, and where a wait reports what
//! it last saw.
//!
//! Read from the code's syntax (syn's items, each function's tokens), not
//! by grepping: a comment or a string that names `Api` is not a call. What
//! counts, per function of `crates/steps/`:
//!
//! - **api**: a kube API handle or request parameter (`Api`, `Patch`,
//!   `PostParams`, `PatchParams`, `DeleteParams`, `ListParams`,
//!   `WatchParams`, `GetParams`);
//! - **wait**: a path through a `wait` module, or `await_condition`,
//!   `watcher`, `sleep`;
//! - **json**: `.pointer(`, `.pointer_mut(`, `.as_object(`, `.as_array(`,
//!   or an index by a string literal (`v["spec"]`).
//!
//! When the rule landed (7f67c47), 108 functions broke it; they were listed
//! as debt that could only shrink, and moved into the harness one by one
//! until none was left. Now no function may break it.
use crate::common::rust_files;
use std::collections::BTreeMap;
use std::path::Path;

use proc_macro2::{Delimiter, TokenStream, TokenTree};
use quote::ToTokens as _;

const API: &[&str] = &[
    "Api",
    "Patch",
    "PostParams",
    "PatchParams",
    "DeleteParams",
    "ListParams",
    "WatchParams",
    "GetParams",
];
const WAIT: &[&str] = &["await_condition", "watcher", "sleep"];
const JSON_METHODS: &[&str] = &["pointer", "pointer_mut", "as_object", "as_array"];
/// Keywords an array literal may follow (`for x in ["a"]`).
const KEYWORDS: &[&str] = &[
    "in", "return", "break", "else", "match", "if", "while", "let",
];

/// How often one function breaks the rule, by kind.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Count {
    api: usize,
    wait: usize,
    json: usize,
}

impl Count {
    fn is_zero(&self) -> bool {
        *self == Count::default()
    }
}

fn count_tokens(tokens: TokenStream, count: &mut Count) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    for (i, t) in tokens.iter().enumerate() {
        let next_is =
            |ch: char| matches!(tokens.get(i + 1), Some(TokenTree::Punct(p)) if p.as_char() == ch);
        let prev_is_dot =
            i > 0 && matches!(&tokens[i - 1], TokenTree::Punct(p) if p.as_char() == '.');
        match t {
            TokenTree::Ident(id) => {
                let s = id.to_string();
                if API.contains(&s.as_str()) {
                    count.api += 1;
                } else if WAIT.contains(&s.as_str()) || (s == "wait" && next_is(':')) {
                    count.wait += 1;
                } else if prev_is_dot && JSON_METHODS.contains(&s.as_str()) {
                    count.json += 1;
                }
            }
            TokenTree::Group(g) => {
                let inner: Vec<TokenTree> = g.stream().into_iter().collect();
                // An index follows what ends an expression (a name, a call,
                // an index); an array literal follows an operator or a
                // keyword, an attribute `#`, a macro `!`.
                let after_expression = match i.checked_sub(1).map(|p| &tokens[p]) {
                    Some(TokenTree::Ident(id)) => !KEYWORDS.contains(&id.to_string().as_str()),
                    Some(TokenTree::Group(_)) => true,
                    _ => false,
                };
                let string_index = g.delimiter() == Delimiter::Bracket
                    && after_expression
                    && matches!(inner.as_slice(), [TokenTree::Literal(l)] if l.to_string().starts_with('"'));
                if string_index {
                    count.json += 1;
                }
                count_tokens(g.stream(), count);
            }
            _ => {}
        }
    }
}

/// Each function of a file's source (free, in impls and in inline modules,
/// named `module::function` or `Type::method`) with what it breaks.
fn breaks_in(source: &str) -> Result<BTreeMap<String, Count>, String> {
    fn walk(items: &[syn::Item], prefix: &str, out: &mut BTreeMap<String, Count>) {
        for item in items {
            match item {
                syn::Item::Fn(f) => add(out, format!("{prefix}{}", f.sig.ident), &f.block),
                syn::Item::Impl(imp) => {
                    let ty = imp.self_ty.to_token_stream().to_string().replace(' ', "");
                    for it in &imp.items {
                        if let syn::ImplItem::Fn(f) = it {
                            add(out, format!("{prefix}{ty}::{}", f.sig.ident), &f.block);
                        }
                    }
                }
                syn::Item::Mod(m) if m.ident != "tests" => {
                    if let Some((_, inner)) = &m.content {
                        walk(inner, &format!("{prefix}{}::", m.ident), out);
                    }
                }
                _ => {}
            }
        }
    }
    fn add(out: &mut BTreeMap<String, Count>, name: String, block: &syn::Block) {
        let mut count = Count::default();
        count_tokens(block.to_token_stream(), &mut count);
        if !count.is_zero() {
            let slot = out.entry(name).or_default();
            slot.api += count.api;
            slot.wait += count.wait;
            slot.json += count.json;
        }
    }
    let file = syn::parse_file(source).map_err(|e| format!("does not parse: {e}"))?;
    let mut out = BTreeMap::new();
    walk(&file.items, "", &mut out);
    Ok(out)
}

/// Every function of `crates/steps/` that breaks the rule, as `file: function`.
fn breaks_in_steps(root: &Path) -> BTreeMap<String, Count> {
    let mut files = Vec::new();
    rust_files(&root.join("crates/steps/src"), &mut files);
    files.sort();
    let mut out = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(root).unwrap().display().to_string();
        let text = std::fs::read_to_string(&f).unwrap();
        let found = breaks_in(&text).unwrap_or_else(|e| panic!("{rel}: {e}"));
        for (name, count) in found {
            out.insert(format!("{rel}: {name}"), count);
        }
    }
    out
}

#[test]
fn steps_make_no_api_calls_waits_or_json_walks_of_their_own() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let found = breaks_in_steps(root);
    let named: Vec<String> = found
        .iter()
        .map(|(name, count)| {
            format!(
                "{name} makes API calls, waits or walks JSON itself ({count:?}): move that into \
                 the harness and call it from the step"
            )
        })
        .collect();
    assert!(
        named.is_empty(),
        "the step rule (tests/step_rule.rs):\n{}",
        named.join("\n")
    );
}

/// The broken examples: a step that builds an API handle, waits and walks
/// JSON is caught in each way; comments, strings, attributes and unit tests
/// are not counted.
#[test]
fn the_step_rule_catches_each_kind() {
    let source = r##"
        /// Api in a doc comment is not a call.
        #[when(expr = "the pod {string} is deleted")]
        async fn deleted(w: &mut World, pod: String) {
            let api: Api<Pod> = Api::namespaced(w.client(), &w.namespace);
            api.delete(&pod, &DeleteParams::default()).await.unwrap();
            wait::object(&api, &pod, gone()).await;
            let name = w.json["metadata"]["name"].as_str();
            let _ = w.json.pointer("/spec/nodeName");
            let s = "Api and wait::object in a string";
            let v = vec!["not an index"];
            for n in ["nor this"] { let m = (["nor", "that"], ["x"]); }
            tokio::time::sleep(d).await;
        }
        #[then("fine")]
        async fn fine(w: &mut World) { crate::harness::thing(w).await }
        impl Helper { fn walks(&self) -> bool { self.v.as_object().is_some() } }
        mod inner { fn lists() { let _ = ListParams::default(); } }
        #[cfg(test)]
        mod tests { fn t() { let _ = Api::all(c); } }
    "##;
    let found = breaks_in(source).unwrap();
    assert_eq!(
        found.get("deleted"),
        Some(&Count {
            api: 3,
            wait: 2,
            json: 3
        }),
        "{found:#?}"
    );
    assert_eq!(found.get("Helper::walks").map(|c| c.json), Some(1));
    assert_eq!(found.get("inner::lists").map(|c| c.api), Some(1));
    assert!(
        !found.contains_key("fine") && !found.contains_key("tests::t"),
        "{found:#?}"
    );
}
