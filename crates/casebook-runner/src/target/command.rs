//! The `command` target: agents as subprocesses speaking JSON lines, one request object per line
//! on stdin and one reply object per line on stdout.
//!
//! Processes are kept in a pool: a call takes an idle one or starts a new one, so there are as
//! many as calls run at once, and each is reused afterwards. A process that exits, or writes a
//! line that is not a reply, is discarded (and killed), so that no later call reads its leftovers.

use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::task::JoinHandle;

use super::http::excerpt;
use super::policy::AttemptError;
use crate::protocol::{AgentReply, AgentRequest};

/// How much of a process's stderr is kept to explain its failure.
const STDERR_TAIL: usize = 2000;

#[derive(Debug)]
pub(crate) struct CommandPool {
    program: String,
    args: Vec<String>,
    idle: Mutex<Vec<Process>>,
}

#[derive(Debug)]
struct Process {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// The end of what the process wrote to stderr (which is kept off the terminal: libraries do
    /// not print).
    stderr: Arc<Mutex<String>>,
    stderr_reader: JoinHandle<()>,
}

impl CommandPool {
    pub fn new(program: String, args: Vec<String>) -> Self {
        Self { program, args, idle: Mutex::new(Vec::new()) }
    }

    /// How many processes wait for a call.
    pub fn idle_count(&self) -> usize {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    pub async fn call(&self, request: &AgentRequest) -> Result<AgentReply, AttemptError> {
        let taken = self.idle.lock().unwrap_or_else(PoisonError::into_inner).pop();
        let mut process = match taken {
            Some(process) => process,
            None => self.spawn()?,
        };
        let mut line = serde_json::to_string(request)
            .map_err(|error| AttemptError::fatal("protocol", format!("could not encode the request: {error}")))?;
        line.push('\n');
        let written = async {
            process.stdin.write_all(line.as_bytes()).await?;
            process.stdin.flush().await
        }
        .await;
        if let Err(error) = written {
            return Err(self.discard(process, &format!("could not be sent the request ({error})"), true).await);
        }
        let mut answer = String::new();
        match process.stdout.read_line(&mut answer).await {
            Ok(0) => Err(self.discard(process, "exited without replying", true).await),
            Err(error) => Err(self.discard(process, &format!("could not be read from ({error})"), false).await),
            Ok(_) => match AgentReply::parse(answer.as_bytes()) {
                Ok(reply) => {
                    self.idle.lock().unwrap_or_else(PoisonError::into_inner).push(process);
                    Ok(reply)
                }
                Err(error) => {
                    let why = format!(
                        "wrote a line that is not an agent reply `{{\"output\": …, \"trajectory\": [optional steps]}}` \
                         or `{{\"tool_calls\": […]}}` ({error}): {}",
                        excerpt(answer.as_bytes())
                    );
                    Err(self.discard(process, &why, false).await)
                }
            },
        }
    }

    fn spawn(&self) -> Result<Process, AttemptError> {
        let mut child = Command::new(&self.program)
            .args(&self.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|error| AttemptError::fatal("process", format!("could not start `{}`: {error}", self.program)))?;
        let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(AttemptError::fatal("process", format!("`{}` started without pipes", self.program)));
        };
        let tail = Arc::new(Mutex::new(String::new()));
        let stderr_reader = tokio::spawn(keep_tail(BufReader::new(stderr), Arc::clone(&tail)));
        Ok(Process { child, stdin, stdout: BufReader::new(stdout), stderr: tail, stderr_reader })
    }

    /// Ends a process that failed and says why, with the end of its stderr and, when it was
    /// `exiting` by itself, its exit status.
    async fn discard(&self, mut process: Process, why: &str, exiting: bool) -> AttemptError {
        if !exiting {
            let _ = process.child.start_kill();
        }
        let status = match tokio::time::timeout(Duration::from_millis(500), process.child.wait()).await {
            Ok(Ok(status)) if exiting => format!(" ({status})"),
            Ok(_) => String::new(),
            Err(_) => {
                let _ = process.child.start_kill();
                String::new()
            }
        };
        // Give the reader a moment to collect what the process wrote last.
        let _ = tokio::time::timeout(Duration::from_millis(200), &mut process.stderr_reader).await;
        process.stderr_reader.abort();
        let stderr = process.stderr.lock().unwrap_or_else(PoisonError::into_inner).trim().to_owned();
        let mut message = format!("`{}` {why}{status}", self.program);
        if !stderr.is_empty() {
            message.push_str("; its stderr ends with: ");
            message.push_str(&stderr);
        }
        AttemptError::fatal("process", message)
    }
}

/// Reads a process's stderr to its end, keeping the last [`STDERR_TAIL`] bytes or so.
async fn keep_tail(mut stderr: BufReader<tokio::process::ChildStderr>, tail: Arc<Mutex<String>>) {
    let mut line = String::new();
    loop {
        line.clear();
        match stderr.read_line(&mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let mut tail = tail.lock().unwrap_or_else(PoisonError::into_inner);
                tail.push_str(&line);
                if tail.len() > STDERR_TAIL {
                    let mut cut = tail.len() - STDERR_TAIL;
                    while !tail.is_char_boundary(cut) {
                        cut += 1;
                    }
                    tail.drain(..cut);
                }
            }
        }
    }
}
