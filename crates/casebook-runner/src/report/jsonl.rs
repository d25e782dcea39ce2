//! Results as JSON lines: one [`RunResult`] per line, in the order given, the form results are
//! kept in per run and read back for re-grading and comparison.

use std::io::{self, Write};

use crate::record::RunResult;

/// Writes each result as one line of JSON to `out`.
pub fn write_jsonl<'a>(results: impl IntoIterator<Item = &'a RunResult>, mut out: impl Write) -> io::Result<()> {
    for result in results {
        serde_json::to_writer(&mut out, result)?;
        out.write_all(b"\n")?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::tests::{erroring, passing};

    #[test]
    fn one_result_per_line_round_trips() {
        let mut results = vec![passing("a", "base", 0), erroring("b", "base", 1, "timeout", "line\nbreak")];
        results[0].labels = vec!["lang:fr".to_owned()];
        let mut out = Vec::new();
        write_jsonl(&results, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        let back: Vec<RunResult> = lines.iter().map(|line| serde_json::from_str(line).unwrap()).collect();
        assert_eq!(back, results);
    }
}
