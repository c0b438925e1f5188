//! The `{tool}` of a capture: what the bridge starts as its tool process. It runs as this binary
//! under the name [`super::LAUNCHER_NAME`] (a symbolic link in the capture's temp dir), asks the
//! capture (control socket in [`super::ENV_CAPTURE`]) for a socket of its own in exchange for the
//! bridge's `PROTOMCP_SOCKET`, and `exec`s the real tool command with that socket: the tool
//! process keeps the launcher's pid and stays the bridge's child.
//!
//! The exchange is one JSON line each way: `{"pid": N, "socket": "<bridge's socket>"}`, then
//! `{"socket": "<capture's socket>", "argv": [...], "cwd": "..."}` or `{"error": "..."}`.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::ENV_CAPTURE;
use crate::testee::ENV_SOCKET;

/// How long the launcher waits for the capture's answer.
const ANSWER_LIMIT: Duration = Duration::from_secs(10);

/// The launcher's request.
#[derive(Debug, Serialize, Deserialize)]
pub struct Hello {
    pub pid: u32,
    pub socket: Option<String>,
}

/// The capture's answer.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Answer {
    #[serde(default)]
    pub socket: Option<String>,
    #[serde(default)]
    pub argv: Vec<String>,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub error: Option<String>,
}

/// Why the launcher got no usable answer from the capture that started it.
#[derive(Debug, thiserror::Error)]
enum AskError {
    #[error("cannot connect to the capture at {control}: {source}")]
    Connect { control: String, source: std::io::Error },
    #[error("writing to the capture: {0}")]
    Write(std::io::Error),
    #[error("no answer from the capture: {0}")]
    NoAnswer(std::io::Error),
    #[error("the capture's answer {answer:?}: {source}")]
    Answer { answer: String, source: serde_json::Error },
}

fn ask(control: &str, hello: &Hello) -> Result<Answer, AskError> {
    let mut s =
        UnixStream::connect(control).map_err(|source| AskError::Connect { control: control.to_owned(), source })?;
    s.set_read_timeout(Some(ANSWER_LIMIT)).map_err(AskError::Write)?;
    let mut line = serde_json::to_string(hello).expect("a Hello is plain data");
    line.push('\n');
    s.write_all(line.as_bytes()).map_err(AskError::Write)?;
    let mut answer = String::new();
    BufReader::new(&s).read_line(&mut answer).map_err(AskError::NoAnswer)?;
    serde_json::from_str(&answer).map_err(|source| AskError::Answer { answer, source })
}

/// Runs the launcher: on success it does not return (the process becomes the tool process).
/// The return value is the exit status of a launcher that could not start the tool.
pub fn run(args: &[std::ffi::OsString]) -> i32 {
    let Some(control) = std::env::var(ENV_CAPTURE).ok().filter(|v| !v.is_empty()) else {
        eprintln!(
            "protomcp-conform capture: {ENV_CAPTURE} is not set: this program is started by a bridge under `protomcp-conform capture` only"
        );
        return 2;
    };
    let hello = Hello { pid: std::process::id(), socket: std::env::var(ENV_SOCKET).ok() };
    let answer = match ask(&control, &hello) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("protomcp-conform capture: {e}");
            return 1;
        }
    };
    if let Some(e) = answer.error {
        eprintln!("protomcp-conform capture: {e}");
        return 1;
    }
    let (Some(socket), Some((program, rest))) = (answer.socket, answer.argv.split_first()) else {
        eprintln!("protomcp-conform capture: the capture's answer names no socket or no command");
        return 1;
    };
    let mut cmd = std::process::Command::new(program);
    cmd.args(rest).args(args).env(ENV_SOCKET, &socket).env_remove(ENV_CAPTURE);
    if let Some(d) = answer.cwd {
        cmd.current_dir(d);
    }
    let e = cmd.exec();
    eprintln!("protomcp-conform capture: cannot start the tool process `{}`: {e}", answer.argv.join(" "));
    127
}
