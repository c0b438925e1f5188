//! `protomcp-conform capture`: the command line of [`protomcp_harness::capture`].

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use protomcp_harness::capture::run::{Options, Stop, bridge_argv, capture};
use protomcp_harness::capture::{Recording, TOOL_PLACEHOLDER, scenario};

/// File names written into `--out`.
pub const CAPTURE_FILE: &str = "capture.txt";
pub const TOOL_PROCESS_FILE: &str = "tool-process.yaml";
pub const BRIDGE_FILE: &str = "bridge.yaml";

pub const AFTER_HELP: &str = "\
How it works:
  The bridge command names the tool process as {tool}: the bridge starts a launcher in its place,
  which gets a socket of the capture's own and execs --tool with PROTOMCP_SOCKET set to it. The
  capture relays that socket to the bridge's socket, and the host's stdin/stdout to the bridge's,
  byte for byte, recording every frame and line with its time. Stdout carries only what the bridge
  wrote; the capture's own messages go to stderr, the bridge's stderr passes through.

  Put `protomcp-conform capture --out DIR --tool 'CMD' -- BRIDGE…` where the host's configuration
  has the bridge command. The capture ends when the bridge exits, when the host closed stdin and
  the bridge did not exit within --grace, at --max-time, or at SIGINT/SIGTERM; then it ends the
  bridge's process group and every tool process, and writes into DIR:
    capture.txt         the session (transcript lines with seconds and channel: host, tpN, bridge)
    tool-process.yaml   the harness plays the bridge against the tool process
    bridge.yaml         the harness plays host and tool process against the bridge (stdio)
  An HTTP bridge: its HTTP side is not interposed; leave stdin open, end the capture with Ctrl-C,
  and get the tool-process scenario only.
  Ids chosen by the side under test are captured and reused as ${placeholders}; paths of the
  capture become regexes; waits are 3 x the delay seen + 1 s (see docs/capture.md).

Replay (printed at the end, too):
  protomcp-conform --testee 'CMD' --scenarios DIR/tool-process.yaml
  protomcp-conform --bridge 'BRIDGE with {mock} for {tool}' --scenarios DIR/bridge.yaml

Examples:
  protomcp-conform capture --out cap --tool 'python3 server.py' -- pmcp run {tool}
  protomcp-conform capture --out cap --tool './my-tool' -- protomcp-conform bridge -- {tool}
  protomcp-conform capture --from cap/capture.txt --out cap2      # rewrite the scenarios

Exit codes:
  0  the capture file and both scenarios written
  1  the capture file written, but a scenario could not be (the reason is printed), or a
     process survived the teardown
  2  usage error or unreadable input (no {tool} in the bridge command, a bad --from file, a
     bridge that cannot be started)";

fn duration(s: &str) -> std::result::Result<Duration, String> {
    protomcp_harness::duration::parse(s).map_err(|e| e.to_string())
}

#[derive(clap::Args)]
pub struct CaptureArgs {
    /// Directory to write capture.txt, tool-process.yaml and bridge.yaml into (created).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// The tool process's command (split on whitespace; run in this working directory with the
    /// capture's socket in PROTOMCP_SOCKET).
    #[arg(long, value_name = "'CMD ARGS…'", required_unless_present = "from")]
    tool: Option<String>,
    /// Id prefix of the scenarios: PREFIX.tool-process and PREFIX.bridge (lowercase words
    /// joined by dots).
    #[arg(long, value_name = "PREFIX", default_value = "capture.session")]
    id: String,
    /// After the host closed stdin: how long the bridge has to exit before it is ended.
    #[arg(long, value_parser = duration, default_value = "5s")]
    grace: Duration,
    /// End the capture after this long (default: no limit).
    #[arg(long, value_parser = duration)]
    max_time: Option<Duration>,
    /// Write the scenarios from a capture file instead of capturing.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["tool", "bridge"])]
    from: Option<PathBuf>,
    /// The bridge command, after `--`, with {tool} where the bridge takes its tool file or
    /// command.
    #[arg(last = true, value_name = "BRIDGE")]
    bridge: Vec<String>,
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.split('.').all(|w| {
            !w.is_empty() && w.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
        })
}

fn stop_text(s: &Stop) -> String {
    match s {
        Stop::Exited(info) => format!("the bridge ended ({info})"),
        Stop::Grace => "the host closed stdin and the bridge did not exit within --grace: ended".into(),
        Stop::MaxTime => "--max-time reached: the bridge was ended".into(),
        Stop::Signal => "interrupted: the bridge was ended".into(),
    }
}

fn quote(argv: &[String]) -> String {
    argv.join(" ")
}

pub fn run(a: CaptureArgs) -> Result<ExitCode> {
    if !valid_id(&a.id) {
        bail!("--id {:?}: lowercase words (a-z, 0-9, -, _) joined by dots, e.g. capture.my-bug", a.id);
    }
    let mut status = ExitCode::SUCCESS;
    let session = match &a.from {
        Some(f) => {
            let text = std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
            Recording::parse(&text).with_context(|| format!("{}", f.display()))?
        }
        None => {
            let tool: Vec<String> =
                a.tool.as_deref().unwrap_or_default().split_whitespace().map(str::to_owned).collect();
            if tool.is_empty() {
                bail!("--tool is empty: give the tool process's command, e.g. --tool 'python3 server.py'");
            }
            if a.bridge.is_empty() {
                bail!(
                    "no bridge command: give it after `--`, with {TOOL_PLACEHOLDER} for the tool, e.g. `-- pmcp run {TOOL_PLACEHOLDER}`"
                );
            }
            bridge_argv(&a.bridge, std::path::Path::new("/"))?;
            std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
            let opts = Options {
                bridge: a.bridge.clone(),
                tool,
                file: a.out.join(CAPTURE_FILE),
                grace: a.grace,
                max_time: a.max_time,
                exe: std::env::current_exe().context("finding this binary")?,
            };
            let rt =
                tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the runtime")?;
            let captured = rt.block_on(capture(&opts, tokio::io::stdin(), tokio::io::stdout()));
            // The host's stdin may still be open: do not wait for its reader.
            rt.shutdown_background();
            let captured = captured?;
            eprintln!(
                "protomcp-conform capture: {}; {} items recorded in {}",
                stop_text(&captured.stop),
                captured.session.events.len() as u64 + captured.session.dropped,
                opts.file.display()
            );
            if !captured.clean {
                eprintln!("protomcp-conform capture: a process of the bridge or a tool process survived SIGKILL");
                status = ExitCode::from(1);
            }
            captured.session
        }
    };
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    if session.dropped > 0 {
        eprintln!(
            "protomcp-conform capture: the session has {} items more than a scenario keeps ({}): the scenarios end early",
            session.dropped,
            protomcp_harness::capture::MAX_EVENTS
        );
    }
    let written = [
        (TOOL_PROCESS_FILE, scenario::tool_process(&session, &a.id)),
        (BRIDGE_FILE, scenario::bridge(&session, &a.id)),
    ];
    let mut written_ok: Vec<&str> = Vec::new();
    for (name, result) in written {
        let path = a.out.join(name);
        match result {
            Ok(text) => {
                std::fs::write(&path, &text).with_context(|| format!("writing {}", path.display()))?;
                let max = protomcp_harness::scenario::MAX_FILE_BYTES;
                if text.len() as u64 > max {
                    eprintln!(
                        "protomcp-conform capture: {} is {} bytes, more than a scenario file may be ({max}): the large payloads of the session are in it; cut the session shorter",
                        path.display(),
                        text.len()
                    );
                    status = ExitCode::from(1);
                } else if let Err(e) = protomcp_harness::scenario::parse_generated(&path, &text) {
                    eprintln!(
                        "protomcp-conform capture: {} was written but does not load (a bug of capture):\n{e}",
                        path.display()
                    );
                    status = ExitCode::from(1);
                } else {
                    eprintln!("protomcp-conform capture: wrote {}", path.display());
                    written_ok.push(name);
                }
            }
            Err(e) => {
                eprintln!("protomcp-conform capture: no {name}: {e}");
                status = ExitCode::from(1);
            }
        }
    }
    let out = a.out.display();
    let replays: Vec<String> = written_ok
        .iter()
        .map(|name| match *name {
            TOOL_PROCESS_FILE => format!("--testee '{}'", quote(&session.tool)),
            _ => format!("--bridge '{}'", quote(&scenario::replay_bridge(&session.bridge))),
        })
        .zip(written_ok.iter())
        .map(|(target, name)| format!("  protomcp-conform {target} --scenarios {out}/{name}"))
        .collect();
    if !replays.is_empty() {
        eprintln!("protomcp-conform capture: replay with\n{}", replays.join("\n"));
    }
    Ok(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenario_id_prefixes_are_lowercase_dotted_words() {
        assert!(valid_id("capture.session") && valid_id("bug-12") && valid_id("a.b_c.d-1"));
        assert!(!valid_id("") && !valid_id("Capture") && !valid_id("a..b") && !valid_id("a b") && !valid_id("a."));
    }
}
