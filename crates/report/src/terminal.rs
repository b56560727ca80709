//! The terminal the runner shares between a status line and everything
//! else it prints. A person watching sees one status line (the run's
//! progress, or a build's current step) kept at the bottom of stdout, while
//! scenario output (stdout) and log lines (stderr, through `tracing` or the
//! runner's own notes) scroll above it.
//!
//! stdout and stderr usually land on the same terminal, so a log line
//! written while the status line stands would continue it. Every writer
//! therefore goes through one [`Screen`], which lifts the status line off
//! before a write and puts it back once the cursor is at a line's start
//! again. The streams are one per process, so the screen is too: a
//! process-wide value, not run state.
use std::io::{self, Write};
use std::sync::{Arc, Mutex, OnceLock};

/// Clears the terminal line the cursor is on.
pub const CLEAR_LINE: &str = "\r\x1b[2K";

/// The two streams and what stands on the status line.
pub struct Screen {
    out: Box<dyn Write + Send>,
    err: Box<dyn Write + Send>,
    /// The status line is drawn where the cursor is.
    shown: bool,
    /// stdout's last write ended a line, so its cursor is at a line's start.
    at_line_start: bool,
    /// What the status line shows; empty: no status line.
    status: String,
}

impl Screen {
    pub fn new(out: Box<dyn Write + Send>, err: Box<dyn Write + Send>) -> Screen {
        Screen {
            out,
            err,
            shown: false,
            at_line_start: true,
            status: String::new(),
        }
    }

    fn lift(&mut self) -> io::Result<()> {
        if self.shown {
            self.out.write_all(CLEAR_LINE.as_bytes())?;
            self.out.flush()?;
            self.shown = false;
        }
        Ok(())
    }

    fn draw(&mut self) -> io::Result<()> {
        if self.at_line_start && !self.status.is_empty() {
            self.lift()?;
            self.out.write_all(self.status.as_bytes())?;
            self.shown = true;
        }
        self.out.flush()
    }

    /// Writes scenario output to stdout, under the status line.
    pub fn write_out(&mut self, buf: &[u8]) -> io::Result<()> {
        self.lift()?;
        self.out.write_all(buf)?;
        if !buf.is_empty() {
            self.at_line_start = buf.ends_with(b"\n");
        }
        self.draw()
    }

    /// Writes a log line to stderr, above the status line. A log write
    /// that does not end its line is ended here: the status line must not
    /// be drawn after it.
    pub fn write_err(&mut self, buf: &[u8]) -> io::Result<()> {
        self.lift()?;
        self.err.write_all(buf)?;
        if self.shown_needs_newline(buf) {
            self.err.write_all(b"\n")?;
        }
        self.err.flush()?;
        self.draw()
    }

    fn shown_needs_newline(&self, buf: &[u8]) -> bool {
        !self.status.is_empty() && !buf.is_empty() && !buf.ends_with(b"\n")
    }

    /// Shows `line` as the status line (empty: none).
    pub fn set_status(&mut self, line: String) -> io::Result<()> {
        if line.is_empty() {
            self.lift()?;
        }
        self.status = line;
        self.draw()
    }
}

/// A shared screen; cheap to clone.
#[derive(Clone)]
pub struct Terminal(Arc<Mutex<Screen>>);

impl Terminal {
    pub fn new(screen: Screen) -> Terminal {
        Terminal(Arc::new(Mutex::new(screen)))
    }

    fn with<T>(&self, f: impl FnOnce(&mut Screen) -> io::Result<T>) -> io::Result<T> {
        let mut s = self
            .0
            .lock()
            .map_err(|_| io::Error::other("the terminal's lock is poisoned"))?;
        f(&mut s)
    }

    pub fn set_status(&self, line: String) {
        let _ = self.with(|s| s.set_status(line));
    }

    pub fn clear_status(&self) {
        self.set_status(String::new());
    }

    /// The writer for scenario output (stdout).
    pub fn out(&self) -> TerminalOut {
        TerminalOut(self.clone())
    }

    /// The writer for log lines (stderr).
    pub fn err(&self) -> TerminalErr {
        TerminalErr(self.clone())
    }
}

/// The process's terminal: this process's stdout and stderr.
pub fn process() -> &'static Terminal {
    static TERMINAL: OnceLock<Terminal> = OnceLock::new();
    TERMINAL
        .get_or_init(|| Terminal::new(Screen::new(Box::new(io::stdout()), Box::new(io::stderr()))))
}

/// Prints a line of the runner's own to stderr, above any status line.
pub fn note(line: &str) {
    let _ = process().with(|s| s.write_err(format!("{line}\n").as_bytes()));
}

/// `eprintln!` for the runner's own lines while a status line may stand.
#[macro_export]
macro_rules! note {
    ($($arg:tt)*) => {
        $crate::terminal::note(&format!($($arg)*))
    };
}

/// stdout under the status line.
#[derive(Clone)]
pub struct TerminalOut(Terminal);

impl Write for TerminalOut {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.with(|s| s.write_out(buf))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.with(|s| s.out.flush())
    }
}

/// stderr above the status line.
#[derive(Clone)]
pub struct TerminalErr(Terminal);

impl Write for TerminalErr {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.with(|s| s.write_err(buf))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.with(|s| s.err.flush())
    }
}

/// Log lines of `tracing` go to the process's stderr through its screen.
#[derive(Clone, Copy, Default)]
pub struct LogWriter;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = TerminalErr;

    fn make_writer(&'a self) -> Self::Writer {
        process().err()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both streams into one buffer, as on a terminal.
    #[derive(Clone, Default)]
    struct Tty(Arc<Mutex<Vec<u8>>>);

    impl Write for Tty {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// The lines a terminal would show for `bytes`: `\r\x1b[2K` clears the
    /// current line, `\n` ends it.
    fn rendered(bytes: &[u8]) -> Vec<String> {
        let text = String::from_utf8_lossy(bytes).into_owned();
        let mut lines = vec![String::new()];
        for (i, part) in text.split(CLEAR_LINE).enumerate() {
            if i > 0 {
                lines.last_mut().unwrap().clear();
            }
            for (j, piece) in part.split('\n').enumerate() {
                if j > 0 {
                    lines.push(String::new());
                }
                lines.last_mut().unwrap().push_str(piece);
            }
        }
        lines
    }

    #[test]
    fn log_lines_and_the_status_line_never_share_a_line() {
        let tty = Tty::default();
        let t = Terminal::new(Screen::new(Box::new(tty.clone()), Box::new(tty.clone())));
        let mut out = t.out();
        let mut err = t.err();
        t.set_status("[0/2] 0 passed".into());
        err.write_all(b"WARN a log line\n").unwrap();
        out.write_all(b"Scenario: a\n").unwrap();
        t.set_status("[1/2] 1 passed".into());
        // A log write without its newline still ends its line.
        err.write_all(b"WARN no newline").unwrap();
        err.write_all(b"WARN next\n").unwrap();
        t.clear_status();
        out.write_all(b"2 passed\n").unwrap();
        let lines = rendered(&tty.0.lock().unwrap());
        assert_eq!(
            lines,
            [
                "WARN a log line",
                "Scenario: a",
                "WARN no newline",
                "WARN next",
                "2 passed",
                ""
            ],
            "{lines:?}"
        );
        for l in &lines {
            assert!(!(l.contains("WARN") && l.contains("passed")), "{l:?}");
        }
    }

    #[test]
    fn the_status_line_stands_below_the_last_line() {
        let tty = Tty::default();
        let t = Terminal::new(Screen::new(Box::new(tty.clone()), Box::new(tty.clone())));
        t.set_status("building etcd".into());
        t.err().write_all(b"note\n").unwrap();
        assert_eq!(rendered(&tty.0.lock().unwrap()), ["note", "building etcd"]);
    }

    #[test]
    fn without_a_status_line_writes_pass_through() {
        let tty = Tty::default();
        let t = Terminal::new(Screen::new(Box::new(tty.clone()), Box::new(tty.clone())));
        t.err().write_all(b"partial").unwrap();
        t.out().write_all(b" more\n").unwrap();
        assert_eq!(&*tty.0.lock().unwrap(), b"partial more\n");
    }
}
