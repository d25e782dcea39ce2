//! Rendering diagnostics: annotate-snippets with the source line and a caret for people, one
//! JSON object a line for programs.

use std::collections::HashMap;
use std::io::{BufReader, Read, Seek, SeekFrom, Write};

use annotate_snippets::{AnnotationKind, Group, Level, Renderer, Snippet};
use casebook_model::{Diagnostic, Severity};

use crate::settings::Global;

/// Characters of a long line shown on each side of the column.
const WINDOW: usize = 60;
/// Lines whose column is past this are cut before they are rendered (a line can be 50 MB).
const LONG_LINE: usize = 100_000;

pub struct Reporter {
    json: bool,
    color: bool,
    stderr: bool,
    /// Open files, to show the lines diagnostics point at.
    files: HashMap<String, Option<BufReader<fs_err::File>>>,
}

impl Reporter {
    /// `stderr`: diagnostics go to stderr (when stdout carries data).
    pub fn new(settings: &Global, stderr: bool) -> Self {
        Self {
            json: settings.json,
            color: if stderr { settings.color_stderr } else { settings.color_stdout },
            stderr,
            files: HashMap::new(),
        }
    }

    pub fn emit(&mut self, d: &Diagnostic) {
        let text = if self.json {
            let mut line = serde_json::to_string(d).unwrap_or_default();
            line.push('\n');
            line
        } else {
            let mut s = self.render(d);
            s.push_str("\n\n");
            s
        };
        // A reader that went away ends the command (`pipes`): the rest would be lost anyway.
        crate::pipes::written(if self.stderr {
            std::io::stderr().lock().write_all(text.as_bytes())
        } else {
            std::io::stdout().lock().write_all(text.as_bytes())
        });
    }

    /// The part of the line `d` points at that is shown: the line from its start when the column
    /// is near it, else a window of characters around the column; with the index of its first
    /// character in the line. The line is read in pieces, so a 50 MB line costs a window.
    fn source_line(&mut self, d: &Diagnostic) -> Option<(String, usize)> {
        let offset = d.line_offset?;
        if d.line == 0 {
            return None;
        }
        let reader = self
            .files
            .entry(d.file.clone())
            .or_insert_with(|| fs_err::File::open(&d.file).ok().map(BufReader::new))
            .as_mut()?;
        reader.seek(SeekFrom::Start(offset)).ok()?;
        let col = (d.column.max(1) - 1) as usize;
        let first = if col > LONG_LINE { col - WINDOW } else { 0 };
        let last = col + WINDOW;
        let (mut shown, mut index) = (String::new(), 0usize);
        let mut pending = Vec::new();
        let mut piece = [0u8; 8192];
        loop {
            let read = reader.read(&mut piece).ok()?;
            pending.extend_from_slice(&piece[..read]);
            // Decode what is complete; invalid bytes show as U+FFFD.
            let usable = match std::str::from_utf8(&pending) {
                Ok(_) => pending.len(),
                Err(e) => match e.error_len() {
                    Some(bad) => e.valid_up_to() + bad,
                    None if read == 0 => pending.len(),
                    None => e.valid_up_to(),
                },
            };
            for c in String::from_utf8_lossy(&pending[..usable]).chars() {
                if c == '\n' || index >= last {
                    return Some((shown.trim_end_matches('\r').to_owned(), first));
                }
                if index >= first {
                    shown.push(c);
                }
                index += 1;
            }
            pending.drain(..usable);
            if read == 0 {
                return Some((shown.trim_end_matches('\r').to_owned(), first));
            }
        }
    }

    fn render(&mut self, d: &Diagnostic) -> String {
        let level = match d.severity {
            Severity::Error => Level::ERROR,
            Severity::Warning => Level::WARNING,
        };
        let renderer = if self.color { Renderer::styled() } else { Renderer::plain() };
        // Long lines are cut to this width around the caret by the renderer.
        let renderer = renderer.term_width(120);
        let line = self.source_line(d);
        let title = level.primary_title(&d.message).id(d.code.as_str());
        // The place in the source record, with the casebook path when it is named otherwise; a
        // stored version has the casebook path only.
        let label = match (d.pointer.as_deref().filter(|p| !p.is_empty()), d.path.as_deref()) {
            (Some(p), Some(path)) if p != path => format!("at {p} (`{path}` in casebook)"),
            (Some(p), _) => format!("at {p}"),
            (None, Some(path)) if !path.is_empty() => format!("at {path}"),
            (None, _) => String::new(),
        };
        let mut groups = Vec::new();
        let group = match &line {
            Some((shown, first)) => {
                let col = (d.column.max(1) - 1) as usize;
                let first = *first;
                let at = shown.char_indices().nth(col - first).map_or(shown.len(), |c| c.0);
                let width = shown[at..].chars().next().map_or(0, char::len_utf8);
                let snippet = Snippet::source(shown)
                    .line_start(d.line as usize)
                    .annotation(AnnotationKind::Primary.span(at..at + width).label(&label));
                if first == 0 {
                    title.element(snippet.path(&d.file))
                } else {
                    // The excerpt's own column would be wrong: name the place first.
                    let origin = annotate_snippets::Origin::path(&d.file)
                        .line(d.line as usize)
                        .char_column(d.column.max(1) as usize);
                    title.element(origin).element(snippet)
                }
            }
            None => {
                let origin = annotate_snippets::Origin::path(&d.file);
                let origin = if d.line == 0 {
                    origin
                } else {
                    origin.line(d.line as usize).char_column(d.column.max(1) as usize)
                };
                title.element(origin)
            }
        };
        groups.push(group);
        if line.is_none() && !label.is_empty() {
            // No source line to put the place under: say it beside.
            groups.push(Group::with_title(Level::NOTE.secondary_title(label.as_str())));
        }
        if let Some(hint) = &d.hint {
            groups.push(Group::with_title(Level::HELP.secondary_title(hint)));
        }
        renderer.render(&groups)
    }
}

/// An error and its causes joined by `: `, each said once: a wrapper whose message already holds
/// its cause's (`#[error("database error: {0}")]` over sqlx's error, itself over SQLite's) is
/// not followed by that message again, as `{err:#}` would.
fn causes(err: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

/// An environment or usage error (exit 2), on stderr.
pub fn environment_error(settings: &Global, err: &anyhow::Error) {
    let mut stderr = std::io::stderr().lock();
    let message = causes(err);
    if settings.json {
        let value = serde_json::json!({"severity": "error", "code": "E-environment", "message": message});
        let _ = writeln!(stderr, "{value}");
    } else {
        let renderer = if settings.color_stderr { Renderer::styled() } else { Renderer::plain() };
        let report = [Group::with_title(Level::ERROR.primary_title(message))];
        let _ = writeln!(stderr, "{}", renderer.render(&report));
    }
}

#[cfg(test)]
mod tests {
    use std::fmt;

    /// An error that repeats its cause in its message, as `StoreError::Database` does.
    #[derive(Debug)]
    struct Wrapper(&'static str, std::io::Error);

    impl fmt::Display for Wrapper {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "{}: {}", self.0, self.1)
        }
    }

    impl std::error::Error for Wrapper {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.1)
        }
    }

    #[test]
    fn a_cause_already_in_the_message_is_said_once() {
        let sqlite = std::io::Error::other("(code: 1) Expression tree is too large (maximum depth 1000)");
        let err = anyhow::Error::new(Wrapper("database error", sqlite)).context("cannot list the cases");
        assert_eq!(
            super::causes(&err),
            "cannot list the cases: database error: (code: 1) Expression tree is too large (maximum depth 1000)"
        );
    }
}
