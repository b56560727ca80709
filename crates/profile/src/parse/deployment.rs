//! Reading the deployment: its mode, and what each mode needs (manifests,
//! image archives, a command, the faults planted), since which fields may
//! be there depends on the mode and the shape alone cannot say it.
use std::collections::BTreeSet;

use super::fields::{Ctx, Field, Item, Map};
use super::placeholders;
use crate::names::closest;
use crate::shape;
use crate::yaml::line;
use crate::{COMMAND_PLACEHOLDERS, Deployment, Fault, Mode, Planter};

/// The modes as a sentence lists them: `A, B or C`.
pub(super) fn modes_text() -> String {
    let names = Mode::ALL.map(Mode::name);
    match names.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// The deployment, and where its `command` is (for the rules about it).
pub(super) fn deployment(
    ctx: &mut Ctx,
    f: &Field,
) -> Option<(Deployment, BTreeSet<Fault>, (u64, String))> {
    let mut m = ctx.mapping(f)?;
    let known_modes = || Mode::ALL.map(Mode::name).join(", ");
    let mode =
        match m.take(shape::MODE) {
            Some(mf) => ctx.text(&mf).and_then(|s| {
                match Mode::ALL.into_iter().find(|mode| mode.name() == s) {
                    Some(mode) => Some(mode),
                    None => {
                        let hint = match closest(&s, Mode::ALL.map(Mode::name)) {
                            Some(c) => format!("did you mean `{c}`?"),
                            None => format!("known: {}", known_modes()),
                        };
                        ctx.mistake(
                            line(mf.node),
                            &mf.path,
                            format!("unknown mode `{s}` ({hint})"),
                        );
                        None
                    }
                }
            }),
            None => {
                m.missing(ctx, shape::MODE, &format!("one of {}", known_modes()));
                None
            }
        };
    // The modes a field is for are the shape's.
    let only = |ctx: &mut Ctx, field: &Field| {
        let wanted = field.spec.modes;
        if let Some(mode) = mode
            && !wanted.is_empty()
            && !wanted.contains(&mode)
        {
            let names: Vec<&str> = wanted.iter().map(|m| m.name()).collect();
            // The runner imports images only into nodes it starts; on a
            // kubeconfig cluster that is the user's to do.
            let message = if mode == Mode::Manifests && field.path.ends_with(".imageArchives") {
                "only for mode RealNodes, whose nodes the runner starts and imports images \
                 into; with mode Manifests, load the images into the cluster's nodes yourself \
                 (e.g. `kind load image-archive FILE`) or have the nodes pull them"
                    .to_owned()
            } else {
                format!("only for mode {}, not {mode}", names.join(" or "))
            };
            ctx.mistake(field.line, &field.path, message);
        }
    };
    let files = |ctx: &mut Ctx, key: &str, what: &str, m: &mut Map| {
        let field = m.take(key)?;
        only(ctx, &field);
        let items = ctx.list(&field)?;
        Some((
            items.iter().map(|i| ctx.file(i, what)).collect::<Vec<_>>(),
            field.line,
        ))
    };
    let manifests = files(ctx, "manifests", "manifest", &mut m);
    let archives = files(ctx, "imageArchives", "image archive", &mut m);
    let faults_field = m.take("faults");
    let faults = faults_field.as_ref().and_then(|field| {
        let items = ctx.list(field)?;
        let mut set = BTreeSet::new();
        for i in items {
            let Some(fault) = Fault::from_name(&i.value) else {
                ctx.mistake(
                    i.line,
                    &i.field,
                    format!(
                        "unknown fault `{}` (known: {})",
                        i.value,
                        Fault::ALL
                            .iter()
                            .map(|f| f.name())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                );
                continue;
            };
            // Only the suite's own driver breaks itself; in front of any
            // other the interposer plants what shows in the answers.
            let planter = match mode {
                Some(Mode::Builtin) => Planter::Builtin,
                Some(Mode::Installed) => {
                    ctx.mistake(
                        i.line,
                        &i.field,
                        "mode Installed cannot have faults planted: the runner interposes only \
                         a driver it deploys (mode RealNodes, Manifests or SimulatedNodes)",
                    );
                    continue;
                }
                _ => Planter::Interposer,
            };
            if !fault.planted_by(planter) {
                let who = match planter {
                    Planter::Builtin => {
                        "the suite's own driver cannot plant it (the interposer \
                                         can, in front of a driver of mode RealNodes, Manifests \
                                         or SimulatedNodes)"
                    }
                    Planter::Interposer => {
                        "the interposer cannot plant it in front of another \
                                            driver (only the suite's own driver, mode Builtin, \
                                            breaks itself this way)"
                    }
                };
                ctx.mistake(i.line, &i.field, format!("fault `{}`: {who}", i.value));
                continue;
            }
            set.insert(fault);
        }
        Some(set)
    });
    let command_field = m.take("command");
    let command = command_field.as_ref().and_then(|field| {
        only(ctx, field);
        let items = ctx.list(field)?;
        check_command(ctx, &items);
        Some(items.into_iter().map(|i| i.value).collect::<Vec<_>>())
    });
    let (has_manifests, has_command) = (m.has("manifests"), m.has("command"));
    let command_at = command_field
        .as_ref()
        .map_or_else(|| (f.line, m.path("command")), |c| (c.line, c.path.clone()));
    m.finish(ctx);
    let deployment = match mode? {
        Mode::Builtin => Deployment::Builtin,
        Mode::Installed => Deployment::Installed,
        mode @ (Mode::RealNodes | Mode::Manifests) => {
            let manifests = match manifests {
                Some((list, _)) if !list.is_empty() => list,
                Some((_, l)) => {
                    ctx.mistake(
                        l,
                        &m_path(f, "manifests"),
                        format!("lists no manifest; mode {mode} installs the driver from them"),
                    );
                    return None;
                }
                None => {
                    if !has_manifests {
                        ctx.mistake(
                            f.line,
                            &m_path(f, "manifests"),
                            format!(
                                "missing: mode {mode} installs the driver from these manifests"
                            ),
                        );
                    }
                    return None;
                }
            };
            match mode {
                Mode::RealNodes => Deployment::RealNodes {
                    manifests,
                    image_archives: archives.map(|a| a.0).unwrap_or_default(),
                },
                _ => Deployment::Manifests { manifests },
            }
        }
        Mode::SimulatedNodes => match command {
            Some(command) if !command.is_empty() => Deployment::SimulatedNodes { command },
            Some(_) => {
                ctx.mistake(
                    command_at.0,
                    &command_at.1,
                    "is empty; mode SimulatedNodes starts it once per node",
                );
                return None;
            }
            None => {
                if !has_command {
                    ctx.mistake(
                        f.line,
                        &command_at.1,
                        "missing: mode SimulatedNodes starts this command once per node",
                    );
                }
                return None;
            }
        },
    };
    Some((deployment, faults.unwrap_or_default(), command_at))
}

fn m_path(f: &Field, key: &str) -> String {
    format!("{}.{key}", f.path)
}

fn check_command(ctx: &mut Ctx, items: &[Item]) {
    let names: Vec<&str> = COMMAND_PLACEHOLDERS.iter().map(|(n, _)| *n).collect();
    for item in items {
        for c in placeholders().captures_iter(&item.value) {
            let name = c.get(1).map_or("", |m| m.as_str());
            if names.contains(&name) {
                continue;
            }
            let hint = match closest(name, names.iter().copied()) {
                Some(k) => format!("did you mean `${{{k}}}`?"),
                None => format!(
                    "known: {}",
                    names
                        .iter()
                        .map(|n| format!("${{{n}}}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            ctx.mistake(
                item.line,
                &item.field,
                format!("unknown placeholder `${{{name}}}` ({hint})"),
            );
        }
    }
    // A program given by path is the profile's to ship; a bare name is
    // looked up in PATH when started.
    if let Some(program) = items.first()
        && program.value.contains('/')
        && !program.value.contains("${")
    {
        ctx.file(program, "program");
    }
}
