//! Reading the profile's smaller sections: the device class, a setting
//! passed by flag or environment, the capabilities and the container
//! check; the first two are one of two alternative fields, read by one
//! rule so that both say a conflict and an absence alike.
use std::collections::BTreeSet;

use super::fields::{Ctx, Field};
use super::placeholders;
use crate::names::is_env_name;
use crate::shape::{Choice, Kind, Shape};
use crate::yaml::line;
use crate::{Capability, ContainerCheck, DeviceClass, ENV_PLACEHOLDERS, EnvPattern, Setting};

pub(super) fn device_class(ctx: &mut Ctx, f: &Field) -> Option<(DeviceClass, u64, String)> {
    let mut m = ctx.mapping(f)?;
    let name = m
        .take("name")
        .and_then(|n| Some((ctx.text(&n)?, line(n.node), n.path)));
    let selector = m.take("selector").and_then(|s| {
        let text = ctx.text(&s)?;
        if matches!(s.spec.kind, Kind::Text { blank_ok: false }) && text.trim().is_empty() {
            ctx.mistake(
                line(s.node),
                &s.path,
                "the CEL selector is empty; it must select the driver's devices, e.g. \
                 device.driver == \"gpu.example.com\"",
            );
            return None;
        }
        Some((text, line(s.node), s.path))
    });
    let set = m.has("name") || m.has("selector");
    m.finish(ctx);
    let chosen = one_of(
        ctx,
        f,
        set,
        (name, selector),
        |name_line| {
            format!(
                "conflicts with deviceClass.name (line {name_line}): use an existing class or \
                 have one created from a selector, not both"
            )
        },
        "set `name` (an existing DeviceClass) or `selector` (a CEL expression the runner \
         creates a class from)"
            .to_owned(),
    )?;
    Some(match chosen {
        OneOf::First((n, l, path)) => (DeviceClass::Existing(n), l, path),
        OneOf::Second((s, l, path)) => (DeviceClass::Selector(s), l, path),
    })
}

/// A value with the line and path of the field it came from.
type Located<T> = (T, u64, String);

/// Which of two alternative fields a mapping set.
enum OneOf<A, B> {
    First(A),
    Second(B),
}

/// The one of two alternative fields a mapping sets (`deviceClass.name` or
/// `.selector`, `flag` or `env`). Both is a mistake at the second, said by
/// `conflict` (given the first's line); neither is one at the mapping, said by
/// `missing`, unless `set` says one was there but broken (and so reported
/// where it is).
fn one_of<A, B>(
    ctx: &mut Ctx,
    f: &Field,
    set: bool,
    fields: (Option<Located<A>>, Option<Located<B>>),
    conflict: impl FnOnce(u64) -> String,
    missing: String,
) -> Option<OneOf<Located<A>, Located<B>>> {
    // The schema says the same only if the shape does.
    debug_assert!(
        matches!(
            f.spec.kind,
            Kind::Mapping(Shape {
                choice: Some(Choice::OneOf(_)),
                ..
            })
        ),
        "the shape of {} has no OneOf",
        f.path
    );
    match fields {
        (Some(a), None) => Some(OneOf::First(a)),
        (None, Some(b)) => Some(OneOf::Second(b)),
        (Some((_, first_line, _)), Some((_, l, path))) => {
            ctx.mistake(l, &path, conflict(first_line));
            None
        }
        (None, None) => {
            if !set {
                ctx.mistake(f.line, &f.path, missing);
            }
            None
        }
    }
}

/// `flag` or `env`: how the driver is told a value (`example` is a flag
/// for the messages).
pub(super) fn setting(ctx: &mut Ctx, f: &Field, example: &str) -> Option<(Setting, u64, String)> {
    let field = f.path.clone();
    let mut m = ctx.mapping(f)?;
    let flag = m.take("flag").and_then(|ff| {
        let s = ctx.text(&ff)?;
        if !s.starts_with('-') || s.len() < 2 || s.contains(char::is_whitespace) || s.contains('=')
        {
            ctx.mistake(
                line(ff.node),
                &ff.path,
                format!(
                    "`{s}` is not a flag name: it starts with `-`, has no spaces and no `=` \
                     (the runner passes FLAG=VALUE), e.g. {example}"
                ),
            );
            return None;
        }
        Some((s, line(ff.node), ff.path))
    });
    let env = m.take("env").and_then(|ef| {
        let s = ctx.text(&ef)?;
        if !is_env_name(&s) {
            ctx.mistake(
                line(ef.node),
                &ef.path,
                format!(
                    "`{s}` is not an environment variable name (letters, digits and `_`, not \
                     starting with a digit)"
                ),
            );
            return None;
        }
        Some((s, line(ef.node), ef.path))
    });
    let set = m.has("flag") || m.has("env");
    m.finish(ctx);
    let chosen = one_of(
        ctx,
        f,
        set,
        (flag, env),
        |flag_line| {
            format!(
                "conflicts with {field}.flag (line {flag_line}): the driver is told one way, not \
                 both"
            )
        },
        format!("set `flag` (e.g. {example}) or `env`"),
    )?;
    let setting = match chosen {
        OneOf::First((s, _, _)) => Setting::Flag(s),
        OneOf::Second((s, _, _)) => Setting::Env(s),
    };
    Some((setting, f.line, f.path.clone()))
}

pub(super) fn capabilities(ctx: &mut Ctx, f: &Field) -> Option<BTreeSet<Capability>> {
    let items = ctx.list(f)?;
    let mut out = BTreeSet::new();
    let mut first_line = std::collections::BTreeMap::new();
    for item in items {
        match item.value.parse::<Capability>() {
            Ok(c) => {
                if let Some(l) = first_line.get(&c) {
                    ctx.mistake(
                        item.line,
                        &item.field,
                        format!("{c} is listed twice (first on line {l})"),
                    );
                } else {
                    first_line.insert(c, item.line);
                    out.insert(c);
                }
            }
            Err(e) => ctx.mistake(item.line, &item.field, e.to_string()),
        }
    }
    Some(out)
}

/// The check, and where its command is when it has one.
pub(super) fn container_check(
    ctx: &mut Ctx,
    f: &Field,
) -> Option<(ContainerCheck, Option<(u64, String)>)> {
    let mut m = ctx.mapping(f)?;
    let env = m.take("env").and_then(|ef| {
        let items = ctx.list(&ef)?;
        if items.is_empty() {
            ctx.mistake(
                ef.line,
                &ef.path,
                "is empty; list NAME or NAME=VALUE patterns, or leave env out",
            );
        }
        let mut out = Vec::new();
        for item in items {
            let name = item.value.split_once('=').map_or(&*item.value, |(n, _)| n);
            if name.is_empty() {
                ctx.mistake(
                    item.line,
                    &item.field,
                    format!(
                        "`{}` has no variable name: write NAME or NAME=VALUE (`*` matches any text)",
                        item.value
                    ),
                );
            } else if name.contains(char::is_whitespace) {
                ctx.mistake(
                    item.line,
                    &item.field,
                    format!("variable name `{name}` contains a space"),
                );
            } else if let Some(unknown) = placeholders()
                .find_iter(&item.value)
                .map(|m| m.as_str())
                .find(|p| !ENV_PLACEHOLDERS.iter().any(|(k, _)| k == p))
            {
                ctx.mistake(
                    item.line,
                    &item.field,
                    format!(
                        "`{unknown}` is no placeholder of containerCheck.env (known: {})",
                        ENV_PLACEHOLDERS
                            .iter()
                            .map(|(k, _)| *k)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                );
            } else {
                out.push(EnvPattern::new(item.value));
            }
        }
        Some(out)
    });
    let command_field = m.take("command");
    let command = command_field.as_ref().and_then(|cf| {
        let items = ctx.list(cf)?;
        if items.is_empty() {
            ctx.mistake(
                cf.line,
                &cf.path,
                "is empty; give the program and its arguments",
            );
        }
        Some(items.into_iter().map(|i| i.value).collect::<Vec<_>>())
    });
    debug_assert!(
        matches!(m.shape.choice, Some(Choice::AnyOf(_))),
        "the shape of {} has no AnyOf",
        f.path
    );
    let keys_set = m.has("env") || m.has("command");
    m.finish(ctx);
    let check = ContainerCheck {
        env: env.unwrap_or_default(),
        command: command.unwrap_or_default(),
    };
    if check.env.is_empty() && check.command.is_empty() {
        if !keys_set {
            ctx.mistake(
                f.line,
                &f.path,
                "say how a container shows it got its device: set `env` (variables from CDI), \
                 `command` (run in the container, exit 0 = got it) or both",
            );
        }
        return None;
    }
    Some((check, command_field.map(|c| (c.line, c.path))))
}
