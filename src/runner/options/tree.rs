//! The command tree as the table sees it: which options each command has
//! and which of them the command line gave. The table is written by hand,
//! so a walk of clap's tree is what keeps it whole ([`differences`]), and
//! the refusals judge only what the user typed, never a value from the
//! environment.
use super::Opt;

/// How an argument is typed: `--long`, else `-s`.
fn flag_of(arg: &clap::Arg) -> Option<String> {
    arg.get_long()
        .map(|l| format!("--{l}"))
        .or_else(|| arg.get_short().map(|s| format!("-{s}")))
}

/// The options of a command that take part in the table: everything typed
/// with a dash, but help and version.
pub(super) fn options_of(cmd: &clap::Command) -> impl Iterator<Item = (&clap::Arg, String)> {
    cmd.get_arguments()
        .filter(|a| !a.is_positional())
        .filter(|a| {
            !matches!(
                a.get_action(),
                clap::ArgAction::Help
                    | clap::ArgAction::HelpShort
                    | clap::ArgAction::HelpLong
                    | clap::ArgAction::Version
            )
        })
        .filter_map(|a| flag_of(a).map(|f| (a, f)))
}

/// Every command of the tree with its path (`""` for the run, `"cluster
/// up"`), the hidden internal ones too.
fn commands(root: &clap::Command) -> Vec<(String, &clap::Command)> {
    fn walk<'a>(path: String, cmd: &'a clap::Command, out: &mut Vec<(String, &'a clap::Command)>) {
        for sub in cmd.get_subcommands() {
            let p = match path.as_str() {
                "" => sub.get_name().to_owned(),
                _ => format!("{path} {}", sub.get_name()),
            };
            walk(p, sub, out);
        }
        out.push((path, cmd));
    }
    let mut out = Vec::new();
    walk(String::new(), root, &mut out);
    out
}

/// Where `table` and the command tree differ: options the tree has and the
/// table lacks, and entries for options the tree does not have.
pub fn differences(table: &[Opt], root: &clap::Command) -> Vec<String> {
    let mut out = Vec::new();
    let mut seen = Vec::new();
    for (path, cmd) in commands(root) {
        for (_, flag) in options_of(cmd) {
            let shown = format!("{} {flag}", if path.is_empty() { "dra-e2e" } else { &path });
            match table.iter().find(|o| o.command == path && o.flag == flag) {
                Some(_) => seen.push((path.clone(), flag)),
                None => out.push(format!("{shown}: not in the options table")),
            }
        }
    }
    for o in table {
        if !seen.iter().any(|(c, f)| c == o.command && f == o.flag) {
            out.push(format!(
                "{} {}: in the options table, not in the command tree",
                o.command, o.flag
            ));
        }
    }
    out
}

/// The options given on the command line in `matches` (of `cmd`), with
/// their values as typed. Values from the environment are the machine's,
/// not the run's: they are not refused where they do nothing.
pub(super) fn given(cmd: &clap::Command, matches: &clap::ArgMatches) -> Vec<(String, Vec<String>)> {
    options_of(cmd)
        .filter(|(a, _)| {
            matches.value_source(a.get_id().as_str())
                == Some(clap::parser::ValueSource::CommandLine)
        })
        .map(|(a, flag)| {
            // A flag's parsed value (`true`, a count) is no value typed.
            if !a.get_action().takes_values() {
                return (flag, Vec::new());
            }
            let values = matches
                .get_raw(a.get_id().as_str())
                .map(|v| v.map(|s| s.to_string_lossy().into_owned()).collect())
                .unwrap_or_default();
            (flag, values)
        })
        .collect()
}
