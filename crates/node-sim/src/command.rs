//! What a simulated container does, read from its command line.
//!
//! There is no container runtime, so a container either runs until its pod is
//! deleted or, for a small set of scripts, ends the way a busybox `sh` running
//! that script would: with a known code after a known time. The command line
//! (`command` followed by `args`) is read directly or as `sh -c "<script>"`
//! (also `bash`/`ash`/`dash`, `-ec`-style flags):
//!
//! | script | effect |
//! |---|---|
//! | `true`, `:` / `false` | status 0 / 1 at once |
//! | `exit N`, `exit` | the container exits with N (the last status) |
//! | `sleep N` | status 0 after N seconds (fractions, `s`/`m`/`h`/`d` suffixes) |
//! | `env`, `echo ...` | status 0 (their output is not simulated) |
//! | `env \| grep [-qsxF] [-e] PATTERN` | status 0 if a line of the container's env (spec env plus CDI env) matches, else 1 |
//! | `trap exit TERM; while true; do sleep 1; done` | runs until deleted (the pod builder's default) |
//!
//! These may be chained with `;`, newlines, `&&` and `||` with shell meaning;
//! words may be single- or double-quoted (without expansions). A script that
//! ends without `exit` exits with the last status. Anything else (variables,
//! redirections, loops, other programs, an image's own entrypoint) runs until
//! deletion, as an unknown long-running program would.
use std::time::Duration;

/// The longest a script may sleep in all and still exit by itself: ten
/// years, beyond any run. Longer ones run until deleted.
const LONGEST_SLEEP: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// The simulated life of one container run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Behaviour {
    /// Runs until the pod is deleted.
    RunForever,
    /// Exits with `code` after `after`.
    Exit { after: Duration, code: i32 },
}

/// The long-running script test pods run when a scenario gives no command
/// (upstream's `InfiniteSleepCommand`): it sleeps in a loop and exits as soon
/// as it gets SIGTERM, so deleting the pod does not wait for the grace period.
/// The simulated node stops containers on deletion anyway, so it only has to
/// know that this script never ends by itself.
pub const SLEEP_UNTIL_TERMINATED: &str = "trap exit TERM; while true; do sleep 1; done";

/// The behaviour of a container whose `command` and `args` are given, with
/// `env` the environment its process sees (spec env plus CDI env), for the
/// scripts that inspect it (`env | grep ...`).
///
/// `sh -c "<script>"` (also `bash`, `ash`, `dash`, flag clusters such as `-ec`)
/// runs the script; anything else is taken as one direct command.
pub fn behaviour(command: &[String], args: &[String], env: &[(String, String)]) -> Behaviour {
    let argv: Vec<&str> = command.iter().chain(args).map(String::as_str).collect();
    let Some(first) = argv.first() else {
        // The image's own entrypoint: unknown, so it runs like a pause container.
        return Behaviour::RunForever;
    };
    if is_shell(first) {
        return match argv.get(1) {
            Some(flags) if flags.starts_with('-') && flags[1..].contains('c') => argv
                .get(2)
                .map_or(Behaviour::RunForever, |script| run_script(script, env)),
            _ => Behaviour::RunForever,
        };
    }
    let words = argv.iter().map(|w| (*w).to_owned()).collect();
    run_statements(vec![(Connector::Seq, vec![words])], env)
}

fn is_shell(arg0: &str) -> bool {
    matches!(basename(arg0), "sh" | "bash" | "ash" | "dash")
}

fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// How a pipeline is joined to the one before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Connector {
    Seq,
    And,
    Or,
}

/// A pipeline: its commands, each a list of words.
type Pipeline = Vec<Vec<String>>;

fn run_script(script: &str, env: &[(String, String)]) -> Behaviour {
    if script
        .split_whitespace()
        .eq(SLEEP_UNTIL_TERMINATED.split_whitespace())
    {
        return Behaviour::RunForever;
    }
    match parse_script(script) {
        Some(statements) => run_statements(statements, env),
        None => Behaviour::RunForever,
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Seq,
    And,
    Or,
    Pipe,
}

/// Splits a script into words and the operators `;`, newline, `&&`, `||` and
/// `|`. Single quotes, double quotes without expansions inside and
/// backslash escapes are understood; `None` means the script uses shell syntax beyond that
/// (variables, substitutions, redirections, globs, backgrounding, comments),
/// which the simulation does not evaluate.
fn tokenize(script: &str) -> Option<Vec<Token>> {
    let mut tokens = Vec::new();
    let mut word = String::new();
    // A word has started, possibly empty (`''`).
    let mut in_word = false;
    let mut chars = script.chars().peekable();
    let end_word = |tokens: &mut Vec<Token>, word: &mut String, in_word: &mut bool| {
        if *in_word {
            tokens.push(Token::Word(std::mem::take(word)));
            *in_word = false;
        }
    };
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => end_word(&mut tokens, &mut word, &mut in_word),
            ';' | '\n' => {
                end_word(&mut tokens, &mut word, &mut in_word);
                tokens.push(Token::Seq);
            }
            '&' => {
                end_word(&mut tokens, &mut word, &mut in_word);
                // A lone `&` runs in the background: not understood.
                chars.next_if_eq(&'&')?;
                tokens.push(Token::And);
            }
            '|' => {
                end_word(&mut tokens, &mut word, &mut in_word);
                tokens.push(if chars.next_if_eq(&'|').is_some() {
                    Token::Or
                } else {
                    Token::Pipe
                });
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '\'' => break,
                        q => word.push(q),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '"' => break,
                        '$' | '`' | '\\' => return None,
                        q => word.push(q),
                    }
                }
            }
            '\\' => match chars.next()? {
                // A line continuation.
                '\n' => {}
                escaped => {
                    in_word = true;
                    word.push(escaped);
                }
            },
            '#' if !in_word => return None,
            '$' | '`' | '(' | ')' | '<' | '>' | '*' | '?' | '[' => return None,
            other => {
                in_word = true;
                word.push(other);
            }
        }
    }
    end_word(&mut tokens, &mut word, &mut in_word);
    Some(tokens)
}

/// Groups tokens into pipelines joined by connectors. Empty statements
/// (a trailing `;`) are skipped; an operator without a command on both sides
/// is a syntax error, which yields `None`.
fn parse_script(script: &str) -> Option<Vec<(Connector, Pipeline)>> {
    let mut out = Vec::new();
    let mut connector = Connector::Seq;
    let mut pipeline: Pipeline = Vec::new();
    let mut command: Vec<String> = Vec::new();
    // The last operator needs a command after it (`&&`, `||`, `|`).
    let mut dangling = false;
    for token in tokenize(script)? {
        match token {
            Token::Word(w) => {
                command.push(w);
                dangling = false;
            }
            Token::Pipe => {
                if command.is_empty() {
                    return None;
                }
                pipeline.push(std::mem::take(&mut command));
                dangling = true;
            }
            Token::Seq | Token::And | Token::Or => {
                if dangling {
                    return None;
                }
                if command.is_empty() {
                    if token != Token::Seq {
                        return None;
                    }
                    continue;
                }
                pipeline.push(std::mem::take(&mut command));
                out.push((connector, std::mem::take(&mut pipeline)));
                connector = match token {
                    Token::And => Connector::And,
                    Token::Or => Connector::Or,
                    _ => Connector::Seq,
                };
                dangling = token != Token::Seq;
            }
        }
    }
    if dangling {
        return None;
    }
    if !command.is_empty() {
        pipeline.push(command);
        out.push((connector, pipeline));
    }
    Some(out)
}

/// What one pipeline did.
enum Outcome {
    /// Finished with this status, after this long.
    Status(i32, Duration),
    /// `exit`: the shell ends with this code.
    Exit(i32),
    /// Not in the understood set.
    Unknown,
}

/// Evaluates pipelines like a shell would, accumulating sleep time.
fn run_statements(statements: Vec<(Connector, Pipeline)>, env: &[(String, String)]) -> Behaviour {
    let mut code = 0i32;
    let mut elapsed = Duration::ZERO;
    for (connector, pipeline) in statements {
        let skip = match connector {
            Connector::Seq => false,
            Connector::And => code != 0,
            Connector::Or => code == 0,
        };
        if skip {
            continue;
        }
        match run_pipeline(&pipeline, code, env) {
            Outcome::Status(c, took) => {
                code = c;
                // Sleeps beyond any run end only with the pod, as `sleep
                // infinity` does; a deadline that far would overflow the
                // clock (`sleep 10000000000000000000` panicked there).
                match elapsed.checked_add(took).filter(|e| *e <= LONGEST_SLEEP) {
                    Some(e) => elapsed = e,
                    None => return Behaviour::RunForever,
                }
            }
            Outcome::Exit(c) => {
                return Behaviour::Exit {
                    after: elapsed,
                    code: c,
                };
            }
            Outcome::Unknown => return Behaviour::RunForever,
        }
    }
    Behaviour::Exit {
        after: elapsed,
        code,
    }
}

/// One pipeline: a single command, or `env | grep ...`. `last` is the status
/// of the previous pipeline (what a bare `exit` returns).
fn run_pipeline(pipeline: &[Vec<String>], last: i32, env: &[(String, String)]) -> Outcome {
    fn words(c: &[String]) -> Vec<&str> {
        c.iter().map(String::as_str).collect()
    }
    match pipeline {
        [single] => run_command(&words(single), last),
        [producer, consumer] if words(producer) == ["env"] => {
            let consumer = words(consumer);
            match consumer.split_first() {
                Some((grep, args)) if basename(grep) == "grep" => match Grep::parse(args) {
                    Some(g) => Outcome::Status(g.run(env), Duration::ZERO),
                    None => Outcome::Unknown,
                },
                _ => Outcome::Unknown,
            }
        }
        _ => Outcome::Unknown,
    }
}

fn run_command(words: &[&str], last: i32) -> Outcome {
    let Some((name, args)) = words.split_first() else {
        return Outcome::Unknown;
    };
    match (basename(name), args) {
        ("true" | ":", []) => Outcome::Status(0, Duration::ZERO),
        ("false", []) => Outcome::Status(1, Duration::ZERO),
        // Print; their output is not simulated.
        ("env", []) | ("echo", _) => Outcome::Status(0, Duration::ZERO),
        ("exit", []) => Outcome::Exit(last),
        ("exit", [n]) => match n.parse::<i64>() {
            Ok(n) => Outcome::Exit(n.rem_euclid(256) as i32),
            Err(_) => Outcome::Unknown,
        },
        ("sleep", [d]) => match parse_sleep(d) {
            Some(d) => Outcome::Status(0, d),
            None => Outcome::Unknown,
        },
        _ => Outcome::Unknown,
    }
}

/// `grep` reading the output of `env`: options `-q`, `-s`, `-x` (whole line),
/// `-F` (fixed string), `-e PATTERN`, and exactly one pattern. Without `-F`
/// the pattern is a basic regular expression; only patterns without regex
/// metacharacters (where it means the literal text) are understood.
#[derive(Debug, PartialEq, Eq)]
struct Grep {
    pattern: String,
    whole_line: bool,
}

impl Grep {
    fn parse(args: &[&str]) -> Option<Grep> {
        let mut fixed = false;
        let mut whole_line = false;
        let mut patterns: Vec<String> = Vec::new();
        let mut operands: Vec<&str> = Vec::new();
        let mut options_done = false;
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            if options_done || !arg.starts_with('-') || *arg == "-" {
                operands.push(arg);
                continue;
            }
            if *arg == "--" {
                options_done = true;
                continue;
            }
            let mut flags = arg[1..].chars();
            while let Some(f) = flags.next() {
                match f {
                    'q' | 's' => {}
                    'x' => whole_line = true,
                    'F' => fixed = true,
                    'e' => {
                        let rest: String = flags.by_ref().collect();
                        if rest.is_empty() {
                            patterns.push((*it.next()?).to_owned());
                        } else {
                            patterns.push(rest);
                        }
                    }
                    _ => return None,
                }
            }
        }
        // Without -e the first operand is the pattern; any other operand is a
        // file to read instead of stdin.
        if patterns.is_empty() {
            if operands.is_empty() {
                return None;
            }
            patterns.push(operands.remove(0).to_owned());
        }
        if !operands.is_empty() || patterns.len() != 1 {
            return None;
        }
        let pattern = patterns.remove(0);
        if !fixed && pattern.contains(['.', '[', ']', '*', '^', '$', '\\']) {
            return None;
        }
        Some(Grep {
            pattern,
            whole_line,
        })
    }

    /// grep's status: 0 when a line of `env`'s output matches, 1 otherwise.
    fn run(&self, env: &[(String, String)]) -> i32 {
        let matched = env.iter().any(|(k, v)| {
            format!("{k}={v}").lines().any(|line| {
                if self.whole_line {
                    line == self.pattern
                } else {
                    line.contains(&self.pattern)
                }
            })
        });
        if matched { 0 } else { 1 }
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

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn sh(script: &str) -> Behaviour {
        sh_env(script, &[])
    }

    fn sh_env(script: &str, e: &[(&str, &str)]) -> Behaviour {
        behaviour(&["sh".into(), "-c".into(), script.into()], &[], &env(e))
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
        assert_eq!(sh("env"), exit(0, 0));
        // Upstream's extended-resource cleanup pods.
        assert_eq!(
            sh(
                "echo 'Pod started with extended resource'; sleep 2; echo 'Pod failing now'; exit 1"
            ),
            exit(2, 1)
        );
    }

    #[test]
    fn shell_connectors_and_exit_codes() {
        assert_eq!(sh("false && sleep 5"), exit(0, 1));
        assert_eq!(sh("false || exit 7"), exit(0, 7));
        assert_eq!(sh("true || exit 7"), exit(0, 0));
        assert_eq!(sh("false; exit"), exit(0, 1));
        assert_eq!(sh("exit 256"), exit(0, 0));
        assert_eq!(sh("exit -1"), exit(0, 255));
        // Quoted words are words like any other.
        assert_eq!(sh("'exit' \"4\""), exit(0, 4));
    }

    #[test]
    fn shell_spellings() {
        let argv = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            behaviour(&argv(&["/bin/sh"]), &argv(&["-c", "exit 2"]), &[]),
            exit(0, 2)
        );
        assert_eq!(
            behaviour(&argv(&["bash", "-ec", "sleep 3; exit 0"]), &[], &[]),
            exit(3, 0)
        );
        assert_eq!(behaviour(&argv(&["/bin/true"]), &[], &[]), exit(0, 0));
        assert_eq!(behaviour(&argv(&["false"]), &[], &[]), exit(0, 1));
        assert_eq!(behaviour(&argv(&["sleep"]), &argv(&["4"]), &[]), exit(4, 0));
    }

    #[test]
    fn the_default_script_runs_until_deleted() {
        assert_eq!(sh(SLEEP_UNTIL_TERMINATED), Behaviour::RunForever);
        assert_eq!(
            behaviour(
                &["/bin/sh".into(), "-c".into()],
                &["trap exit TERM;  while true; do sleep 1; done".into()],
                &[]
            ),
            Behaviour::RunForever
        );
    }

    #[test]
    fn env_checks_see_the_container_env() {
        let e = [("user_a", "b"), ("admin_x", "y"), ("multi", "one\ntwo")];
        // Upstream's init container check: a substring match.
        assert_eq!(sh_env("env | grep user_a=b", &e), exit(0, 0));
        assert_eq!(sh_env("env | grep user_a=c", &e), exit(0, 1));
        assert_eq!(sh_env("env | grep user_a=", &e), exit(0, 0));
        // Whole lines, fixed strings, quoted.
        let check = "env; env | grep -qxF 'user_a=b' && env | grep -qxF 'admin_x=y'";
        assert_eq!(sh_env(check, &e), exit(0, 0));
        assert_eq!(sh_env(check, &[("user_a", "b")]), exit(0, 1));
        assert_eq!(
            sh_env(check, &[("user_a", "bc"), ("admin_x", "y")]),
            exit(0, 1)
        );
        assert_eq!(sh_env("env | grep -x -e two", &e), exit(0, 0));
        assert_eq!(sh_env("env | grep -qx -- user_a", &e), exit(0, 1));
        assert_eq!(sh_env("env | grep -F 'a.b' || exit 5", &e), exit(0, 5));
        // The pipeline's status decides what follows it.
        assert_eq!(sh_env("env | grep nope; exit", &e), exit(0, 1));
        assert_eq!(sh_env("env | grep -q user_a=b && sleep 2", &e), exit(2, 0));
    }

    #[test]
    fn everything_else_runs_forever() {
        assert_eq!(behaviour(&[], &[], &[]), Behaviour::RunForever);
        assert_eq!(sh("sleep infinity"), Behaviour::RunForever);
        assert_eq!(
            sh("while true; do sleep 10000; done"),
            Behaviour::RunForever
        );
        assert_eq!(sh("trap exit TERM"), Behaviour::RunForever);
        assert_eq!(sh("env && sleep 100"), exit(100, 0));
        assert_eq!(sh("env FOO=1 true"), Behaviour::RunForever);
        assert_eq!(sh("exit abc"), Behaviour::RunForever);
        assert_eq!(
            behaviour(&["/pause".into()], &[], &[]),
            Behaviour::RunForever
        );
        assert_eq!(
            behaviour(&["sh".into()], &["script.sh".into()], &[]),
            Behaviour::RunForever
        );
        assert_eq!(sh("sleep 1 &"), Behaviour::RunForever);
        assert_eq!(sh("exit $CODE"), Behaviour::RunForever);
        assert_eq!(sh("exit \"$CODE\""), Behaviour::RunForever);
        assert_eq!(sh("true > /tmp/x"), Behaviour::RunForever);
        assert_eq!(sh("# comment\ntrue"), Behaviour::RunForever);
        assert_eq!(sh("exit 'unterminated"), Behaviour::RunForever);
        assert_eq!(sh("true && && true"), Behaviour::RunForever);
        assert_eq!(sh("true |"), Behaviour::RunForever);
        assert_eq!(sh("true | false"), Behaviour::RunForever);
        // grep forms outside the set: files, regexes, unknown flags, stdin.
        assert_eq!(sh("env | grep a /etc/passwd"), Behaviour::RunForever);
        assert_eq!(sh("env | grep 'user_.=b'"), Behaviour::RunForever);
        assert_eq!(sh("env | grep -v a"), Behaviour::RunForever);
        assert_eq!(sh("env | grep"), Behaviour::RunForever);
        assert_eq!(sh("grep a"), Behaviour::RunForever);
        assert_eq!(sh("env | env | grep a"), Behaviour::RunForever);
    }

    /// Every script the pod builder writes ends as busybox `sh` would end it.
    #[test]
    fn pod_builder_scripts() {
        use dra_e2e_kube::objects::PodShape;
        use k8s_openapi::api::core::v1::Container;
        let run = |c: &Container, e: &[(&str, &str)]| {
            behaviour(
                c.command.as_deref().unwrap_or_default(),
                c.args.as_deref().unwrap_or_default(),
                &env(e),
            )
        };
        let mut shape = PodShape::new("p");
        shape.containers = 2;
        shape.init_container = Some(vec!["user_a=b".into(), "it's=a \"b\" $x".into()]);
        let spec = shape.build().unwrap().spec.unwrap();
        for c in &spec.containers {
            assert_eq!(run(c, &[]), Behaviour::RunForever, "{c:?}");
        }
        let init = &spec.init_containers.unwrap()[0];
        let both = [("user_a", "b"), ("it's", "a \"b\" $x"), ("other", "1")];
        assert_eq!(run(init, &both), exit(0, 0));
        assert_eq!(run(init, &both[..1]), exit(0, 1));
        assert_eq!(run(init, &both[1..]), exit(0, 1));
        assert_eq!(run(init, &[("user_a", "bb"), both[1]]), exit(0, 1));

        shape.init_container = Some(vec!["user_a=b".into()]);
        let spec = shape.build().unwrap().spec.unwrap();
        let init = &spec.init_containers.unwrap()[0];
        assert_eq!(run(init, &[("user_a", "b")]), exit(0, 0));
        assert_eq!(run(init, &[("admin_x", "y")]), exit(0, 1));

        // Scenario commands pass through unchanged.
        shape.command = Some("sleep 1; exit 1".into());
        let spec = shape.build().unwrap().spec.unwrap();
        assert_eq!(run(&spec.containers[1], &[]), exit(1, 1));
    }

    #[test]
    fn tokens() {
        assert_eq!(
            tokenize("a 'b c'\"d\" ''|| e|f;g&&h").unwrap(),
            vec![
                Token::Word("a".into()),
                Token::Word("b cd".into()),
                Token::Word(String::new()),
                Token::Or,
                Token::Word("e".into()),
                Token::Pipe,
                Token::Word("f".into()),
                Token::Seq,
                Token::Word("g".into()),
                Token::And,
                Token::Word("h".into()),
            ]
        );
        assert_eq!(
            tokenize("'it'\\''s' a\\\nb").unwrap(),
            vec![Token::Word("it's".into()), Token::Word("ab".into())]
        );
        assert_eq!(tokenize("a # b"), None);
        assert_eq!(tokenize("a#b").unwrap(), vec![Token::Word("a#b".into())]);
    }
}

/// Generated container commands: a feature file's pod command is read
/// without panicking, and what exits does so at a time the clock can hold.
/// `PROPTEST_CASES` raises the bounded count.
#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    fn script() -> impl Strategy<Value = String> {
        let words = vec![
            "sleep ",
            "exit ",
            "true",
            "false",
            "env",
            "echo x",
            " | grep -qxF ",
            "a=b",
            "; ",
            "\n",
            " && ",
            " || ",
            " | ",
            "'",
            "\"",
            "\\",
            "0",
            "1",
            "0.5",
            "1e3",
            "m",
            "d",
            "10000000000000000000",
            "18446744073709551615",
            "99999999999",
            "-1",
            " ",
            "$x",
            "#",
            SLEEP_UNTIL_TERMINATED,
        ];
        let word = proptest::sample::select(words).prop_map(str::to_owned);
        let piece = prop_oneof![4 => word, 1 => any::<char>().prop_map(String::from)];
        proptest::collection::vec(piece, 0..12).prop_map(|p| p.concat())
    }

    proptest! {
        // Failures are kept as plain tests beside these, not in files.
        #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn any_script_runs_or_exits_within_the_clock(s in script()) {
            let env = vec![("a".to_owned(), "b".to_owned())];
            let argv = |shell: &str| vec![shell.to_owned(), "-c".to_owned(), s.clone()];
            for b in [behaviour(&argv("sh"), &[], &env), behaviour(std::slice::from_ref(&s), &[], &env)] {
                if let Behaviour::Exit { after, .. } = b {
                    prop_assert!(after <= LONGEST_SLEEP, "{s:?}: {after:?}");
                    prop_assert!(std::time::Instant::now().checked_add(after).is_some());
                }
            }
        }

        #[test]
        fn sleep_then_exit_exits_then(n in 0u64..1_000_000, code in 0i32..256) {
            let script = format!("sleep {n}; exit {code}");
            let b = behaviour(&["sh".into(), "-c".into(), script], &[], &[]);
            prop_assert_eq!(b, Behaviour::Exit { after: Duration::from_secs(n), code });
        }
    }

    /// Inputs the properties found.
    #[test]
    fn regressions() {
        // Sleeps past what the clock holds panicked adding them up, or
        // later at `now + after`; they run until deleted instead.
        for script in [
            "sleep 10000000000000000000",
            "sleep 10000000000000000000; sleep 10000000000000000000",
            "sleep 99999999999",
        ] {
            let b = behaviour(&["sh".into(), "-c".into(), script.into()], &[], &[]);
            assert_eq!(b, Behaviour::RunForever, "{script}");
        }
    }
}
