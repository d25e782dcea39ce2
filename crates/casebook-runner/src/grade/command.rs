//! `command`: a custom grader in any language. The program gets one JSON object on stdin,
//! `{"case": <the whole case>, "output": …, "per_turn": […], "trajectory": […]}`, and prints a
//! verdict `{"score": 0..1, "pass": bool?, "rationale": "…"?}` on stdout (alone, or as its last
//! line). A program that cannot start, exits non-zero, runs past `timeout_secs` or prints no
//! verdict is a `grader` failure, never a score of 0.

use std::process::Stdio;
use std::time::Duration;

use casebook_model::Case;
use serde::Serialize;
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use super::spec::{CommandOptions, score_threshold, seconds};
use super::{clip, read_verdict};
use crate::protocol::Step;
use crate::record::{Failure, Grade, RunOutput};

#[derive(Debug)]
pub(super) struct CommandGrader {
    program: String,
    args: Vec<String>,
    timeout: Duration,
    pass_score: f64,
}

#[derive(Serialize)]
struct Input<'a> {
    case: &'a Case,
    output: &'a Value,
    per_turn: &'a [Value],
    trajectory: &'a [Step],
}

impl CommandGrader {
    pub(super) fn build(options: &CommandOptions) -> Result<Self, String> {
        if options.program.trim().is_empty() {
            return Err("`program` is empty".to_owned());
        }
        Ok(CommandGrader {
            program: options.program.clone(),
            args: options.args.clone(),
            timeout: seconds(options.timeout_secs, "timeout_secs")?,
            pass_score: score_threshold(options.pass_score, "pass_score")?,
        })
    }

    pub(super) async fn grade(&self, case: &Case, run: &RunOutput) -> Result<Grade, Failure> {
        let program = &self.program;
        let failure = |message: String| Failure::new("grader", format!("case `{}`: `{program}` {message}", case.id));
        let input = Input { case, output: &run.output, per_turn: &run.per_turn, trajectory: &run.trajectory };
        let mut input = serde_json::to_vec(&input).map_err(|e| failure(format!("cannot be given the run: {e}")))?;
        input.push(b'\n');
        let mut child = Command::new(program)
            .args(&self.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // A program past its time limit is killed when the wait is dropped.
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| failure(format!("cannot start: {e}")))?;
        let stdin = child.stdin.take();
        let feed = async move {
            if let Some(mut stdin) = stdin {
                // A program that does not read its input closes the pipe early: not an error by
                // itself, its exit status and output tell.
                let _ = stdin.write_all(&input).await;
            }
        };
        let finished = async {
            let ((), output) = tokio::join!(feed, child.wait_with_output());
            output
        };
        let output = tokio::time::timeout(self.timeout, finished)
            .await
            .map_err(|_| failure(format!("did not finish within {:?}", self.timeout)))?
            .map_err(|e| failure(format!("failed: {e}")))?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let how = match output.status.code() {
                Some(code) => format!("exited with status {code}"),
                None => format!("was stopped ({})", output.status),
            };
            return Err(failure(format!("{how}: {}", clip(stderr.trim(), 500))));
        }
        let trimmed = stdout.trim();
        let verdict = [Some(trimmed), trimmed.lines().next_back()].into_iter().flatten().find_map(|text| {
            match serde_json::from_str(text.trim()) {
                Ok(Value::Object(object)) => Some(object),
                _ => None,
            }
        });
        let verdict =
            verdict.ok_or_else(|| failure(format!("printed no JSON verdict object: `{}`", clip(trimmed, 300))))?;
        read_verdict(&verdict, self.pass_score).map_err(|e| failure(format!("printed an unusable verdict: {e}")))
    }
}
