//! What a simulated container does, read from its command line.
//!
//! There is no container runtime, so a container either runs until its pod is
//! deleted or, for the small set of shell scripts listed in the module docs of
//! [`crate::node_sim`], exits with a known code after a known time.
use std::time::Duration;

/// The simulated life of one container run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Behaviour {
    /// Runs until the pod is deleted.
    RunForever,
    /// Exits with `code` after `after`.
    Exit { after: Duration, code: i32 },
}

/// The behaviour of a container whose `command` and `args` are given.
///
/// `sh -c "<script>"` (also `bash`, `ash`, `dash`, flag clusters such as `-ec`)
/// runs the script; anything else is taken as one direct command.
pub fn behaviour(command: &[String], args: &[String]) -> Behaviour {
    let argv: Vec<&str> = command.iter().chain(args).map(String::as_str).collect();
    let Some(first) = argv.first() else {
        // The image's own entrypoint: unknown, so it runs like a pause container.
        return Behaviour::RunForever;
    };
    if is_shell(first) {
        return match argv.get(1) {
            Some(flags) if flags.starts_with('-') && flags[1..].contains('c') => argv
                .get(2)
                .map_or(Behaviour::RunForever, |script| run_script(script)),
            _ => Behaviour::RunForever,
        };
    }
    run_statements(vec![(Connector::Seq, argv)])
}

fn is_shell(arg0: &str) -> bool {
    matches!(basename(arg0), "sh" | "bash" | "ash" | "dash")
}

fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// How a statement is joined to the one before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Connector {
    Seq,
    And,
    Or,
}

fn run_script(script: &str) -> Behaviour {
    run_statements(split_script(script))
}

/// Splits on `;`, newlines, `&&` and `||`. Quotes are not understood: a script
/// using them contains words no statement matches and so runs forever.
fn split_script(script: &str) -> Vec<(Connector, Vec<&str>)> {
    let mut out = Vec::new();
    let mut connector = Connector::Seq;
    let mut rest = script;
    loop {
        let next = rest.char_indices().find_map(|(i, c)| match c {
            ';' | '\n' => Some((i, 1, Connector::Seq)),
            '&' if rest[i..].starts_with("&&") => Some((i, 2, Connector::And)),
            '|' if rest[i..].starts_with("||") => Some((i, 2, Connector::Or)),
            _ => None,
        });
        let (stmt, after) = match next {
            Some((i, len, c)) => {
                let stmt = &rest[..i];
                rest = &rest[i + len..];
                (stmt, Some(c))
            }
            None => (rest, None),
        };
        let words: Vec<&str> = stmt.split_whitespace().collect();
        if !words.is_empty() {
            out.push((connector, words));
        }
        match after {
            Some(c) => connector = c,
            None => return out,
        }
    }
}

/// Evaluates statements like a shell would, accumulating sleep time.
fn run_statements(statements: Vec<(Connector, Vec<&str>)>) -> Behaviour {
    let mut code = 0i32;
    let mut elapsed = Duration::ZERO;
    for (connector, words) in statements {
        let skip = match connector {
            Connector::Seq => false,
            Connector::And => code != 0,
            Connector::Or => code == 0,
        };
        if skip {
            continue;
        }
        match (basename(words[0]), &words[1..]) {
            ("true" | ":", []) => code = 0,
            ("false", []) => code = 1,
            ("exit", []) => {
                return Behaviour::Exit {
                    after: elapsed,
                    code,
                };
            }
            ("exit", [n]) => match n.parse::<i64>() {
                Ok(n) => {
                    return Behaviour::Exit {
                        after: elapsed,
                        code: n.rem_euclid(256) as i32,
                    };
                }
                Err(_) => return Behaviour::RunForever,
            },
            ("sleep", [d]) => match parse_sleep(d) {
                Some(d) => {
                    elapsed += d;
                    code = 0;
                }
                None => return Behaviour::RunForever,
            },
            _ => return Behaviour::RunForever,
        }
    }
    Behaviour::Exit {
        after: elapsed,
        code,
    }
}

/// `sleep` operands: seconds with an optional fraction and `s`/`m`/`h`/`d`
/// suffix. `infinity` and anything else yield `None`.
fn parse_sleep(word: &str) -> Option<Duration> {
    let (num, unit) = match word.char_indices().last()? {
        (i, 's') => (&word[..i], 1.0),
        (i, 'm') => (&word[..i], 60.0),
        (i, 'h') => (&word[..i], 3600.0),
        (i, 'd') => (&word[..i], 86400.0),
        _ => (word, 1.0),
    };
    if num.is_empty() || !num.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return None;
    }
    let secs: f64 = num.parse().ok()?;
    Duration::try_from_secs_f64(secs * unit).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Behaviour {
        behaviour(&["sh".into(), "-c".into(), script.into()], &[])
    }

    fn exit(secs: u64, code: i32) -> Behaviour {
        Behaviour::Exit {
            after: Duration::from_secs(secs),
            code,
        }
    }

    #[test]
    fn documented_scripts() {
        assert_eq!(sh("true"), exit(0, 0));
        assert_eq!(sh("false"), exit(0, 1));
        assert_eq!(sh("exit 3"), exit(0, 3));
        assert_eq!(sh("sleep 2"), exit(2, 0));
        assert_eq!(sh("sleep 1; exit 1"), exit(1, 1));
        assert_eq!(sh("sleep 1;exit 1;"), exit(1, 1));
        assert_eq!(sh("sleep 1\nexit 4\n"), exit(1, 4));
        assert_eq!(
            sh("sleep 0.5"),
            Behaviour::Exit {
                after: Duration::from_millis(500),
                code: 0
            }
        );
        assert_eq!(sh("sleep 1m"), exit(60, 0));
    }

    #[test]
    fn shell_connectors_and_exit_codes() {
        assert_eq!(sh("false && sleep 5"), exit(0, 1));
        assert_eq!(sh("false || exit 7"), exit(0, 7));
        assert_eq!(sh("true || exit 7"), exit(0, 0));
        assert_eq!(sh("false; exit"), exit(0, 1));
        assert_eq!(sh("exit 256"), exit(0, 0));
        assert_eq!(sh("exit -1"), exit(0, 255));
    }

    #[test]
    fn shell_spellings() {
        let argv = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            behaviour(&argv(&["/bin/sh"]), &argv(&["-c", "exit 2"])),
            exit(0, 2)
        );
        assert_eq!(
            behaviour(&argv(&["bash", "-ec", "sleep 3; exit 0"]), &[]),
            exit(3, 0)
        );
        assert_eq!(behaviour(&argv(&["/bin/true"]), &[]), exit(0, 0));
        assert_eq!(behaviour(&argv(&["false"]), &[]), exit(0, 1));
        assert_eq!(behaviour(&argv(&["sleep"]), &argv(&["4"])), exit(4, 0));
    }

    #[test]
    fn everything_else_runs_forever() {
        assert_eq!(behaviour(&[], &[]), Behaviour::RunForever);
        assert_eq!(sh("sleep infinity"), Behaviour::RunForever);
        assert_eq!(
            sh("while true; do sleep 10000; done"),
            Behaviour::RunForever
        );
        assert_eq!(sh("env && sleep 100"), Behaviour::RunForever);
        assert_eq!(sh("exit abc"), Behaviour::RunForever);
        assert_eq!(behaviour(&["/pause".into()], &[]), Behaviour::RunForever);
        assert_eq!(
            behaviour(&["sh".into()], &["script.sh".into()]),
            Behaviour::RunForever
        );
        assert_eq!(sh("sleep 1 &"), Behaviour::RunForever);
    }
}
