//! `protomcp-conform bridge`: the reference bridge on the command line.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use protomcp_bridge::http::Credential;
use protomcp_bridge::{self as bridge, Bridge, Config};
use protomcp_proto::fault::{self, Fault};

/// Serve MCP to hosts (stdio or Streamable HTTP), bridging to a protomcp tool process.
#[derive(Args, Debug)]
pub struct BridgeArgs {
    /// How hosts reach the bridge.
    #[arg(long, value_enum, default_value_t = Transport::Stdio)]
    transport: Transport,
    /// Address to listen on with `--transport http` (loopback unless told otherwise).
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port to listen on with `--transport http` (0: any free port, printed on stderr).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Credentials every HTTP request must carry (401 otherwise): `token:VAR` for
    /// `Authorization: Bearer <value of VAR>`, `apikey:VAR` for `X-API-Key: <value of VAR>`.
    /// Repeatable: all must be satisfied.
    #[arg(long, value_name = "token:VAR|apikey:VAR", value_parser = parse_auth, action = clap::ArgAction::Append)]
    auth: Vec<AuthSpec>,
    /// The same as `--auth token:VAR`.
    #[arg(long, value_name = "VAR", action = clap::ArgAction::Append)]
    auth_token_env: Vec<String>,
    /// Bound on every wait for the tool process (`500ms`, `5s`, `5m` or `5min`, `1h`, or plain
    /// seconds).
    #[arg(long, value_parser = parse_duration, default_value = "5m")]
    call_timeout: Duration,
    /// Write the decoded traffic of both sides to FILE as it happens, in the harness's transcript
    /// line format (verbatim: real ids, full strings): `host→bridge` / `bridge→host` for MCP
    /// messages, `testee→harness` for frames to the tool process and `harness→testee` for frames
    /// from it (the bridge is the testee), `-- connected` when a tool process connects.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Restart the tool process when a file under PATH changes (in-flight calls finish first).
    #[arg(long, value_name = "PATH", num_args = 1.., action = clap::ArgAction::Append)]
    watch: Vec<PathBuf>,
    /// With `--transport http`: end a session that sent no request for this long (later
    /// requests with its id get 404).
    #[arg(long, value_parser = parse_duration, default_value = "5m")]
    session_idle: Duration,
    /// Socket path for the tool process (default: in a private temp dir).
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Answer tools/list, resources/list, resources/templates/list and prompts/list N items at
    /// a time with a `nextCursor` for the rest (BR-MCP-12 allows pagination; use it to check
    /// that a host follows cursors). Default: everything in one answer.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    page_size: Option<u32>,
    /// How `--watch` reloads (BR-RELOAD-01 allows both): `restart` ends the tool process and
    /// starts a new one (calls in flight finish first); `request` sends ReloadRequest to the
    /// running one and takes its registration burst as the new lists.
    #[arg(long, value_name = "HOW", default_value = "restart", value_parser = ["restart", "request"])]
    reload: String,
    /// After writing something a peer will answer, keep polling for the answer this long before
    /// sleeping (`0.4ms`, `1ms`, or `off`), while answers have lately come within that time:
    /// waking a sleeping CPU costs more than the bridge's work for a message, most of all on
    /// virtual machines. An idle bridge, or one whose peers are slower, does not poll; while
    /// polling it lets any other runnable thread go first. At most 1s.
    #[arg(long, value_name = "DURATION|off", value_parser = parse_poll, default_value = "0.4ms")]
    poll: Duration,
    /// Switch on one bridge fault of the catalogue (a realistic bug that breaks one requirement),
    /// for `adequacy --role bridge`; `adequacy --role bridge --list` lists them
    /// (docs/adequacy.md). Off unless named.
    #[arg(long, value_name = "NAME", value_parser = crate::fault_parser(protomcp_proto::fault::Role::Bridge))]
    fault: Option<protomcp_proto::fault::Fault>,
    /// The tool process: `-- CMD ARGS…`, or one entry FILE whose runtime follows from its
    /// extension (`.py` → python3, `.js` → node, anything else is executed itself).
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true, value_name = "CMD")]
    command: Vec<String>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Transport {
    /// One MCP session on stdin/stdout.
    Stdio,
    /// Streamable HTTP at `/mcp` (`sse` is accepted as an alias).
    #[value(alias = "sse")]
    Http,
}

/// One `--auth` option: the scheme and the environment variable naming the secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthSpec {
    bearer: bool,
    var: String,
}

impl AuthSpec {
    fn flag(&self) -> String {
        format!("--auth {}:{}", if self.bearer { "token" } else { "apikey" }, self.var)
    }
}

/// The longest `--poll`: a peer that stops answering costs the bridge one window of busy
/// polling, so the window is kept to what a peer that is awake needs, with room to spare.
const POLL_MAX: Duration = Duration::from_secs(1);

/// `--poll`: a duration up to [`POLL_MAX`], or `off` (never poll).
fn parse_poll(s: &str) -> Result<Duration, String> {
    if s.trim() == "off" {
        return Ok(Duration::ZERO);
    }
    let d = parse_duration(s)?;
    if d > POLL_MAX {
        return Err(format!(
            "at most {POLL_MAX:?}: a window is spent polling when a peer stops answering, and an answer \
             slower than that is better slept for"
        ));
    }
    Ok(d)
}

/// `token:VAR` or `apikey:VAR`.
pub fn parse_auth(s: &str) -> Result<AuthSpec, String> {
    let (scheme, var) = s.split_once(':').ok_or_else(|| format!("{s:?}: expected token:VAR or apikey:VAR"))?;
    let bearer = match scheme {
        "token" => true,
        "apikey" => false,
        _ => return Err(format!("{s:?}: unknown scheme {scheme:?} (token, apikey)")),
    };
    if var.is_empty() {
        return Err(format!("{s:?}: no environment variable named"));
    }
    Ok(AuthSpec { bearer, var: var.to_owned() })
}

/// The secrets of `specs`, read from the environment; an unset or empty one is an error
/// (BR-HTTP-24), naming the option but never a value.
fn credentials(specs: &[AuthSpec]) -> Result<Vec<Credential>> {
    specs
        .iter()
        .map(|a| match std::env::var(&a.var) {
            Ok(v)
                if !v.is_empty()
                    || protomcp_proto::fault::on(protomcp_proto::fault::Fault::BrHttpEmptySecretAccepted) =>
            {
                Ok(if a.bearer { Credential::Bearer(v) } else { Credential::ApiKey(v) })
            }
            _ => bail!("{}: the environment variable is unset or empty", a.flag()),
        })
        .collect()
}

/// A duration option ([`protomcp_harness::duration`]: `500ms`, `90s`, `5m`, `1h`; plain seconds).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    protomcp_harness::duration::parse(s).map_err(|e| e.to_string())
}

/// The argv for an entry file (BR-CONN-08): the runtime follows from the extension.
fn entry_command(file: &Path) -> Vec<String> {
    let abs = std::path::absolute(file).unwrap_or_else(|_| file.to_owned());
    let path = abs.to_string_lossy().into_owned();
    let env_or = |var: &str, default: &str| std::env::var(var).unwrap_or_else(|_| default.to_owned());
    match file.extension().and_then(|e| e.to_str()) {
        Some("py") => vec![env_or("PROTOMCP_PYTHON", "python3"), path],
        Some("js" | "mjs") => vec![env_or("PROTOMCP_NODE", "node"), path],
        Some("ts") => vec!["npx".into(), "tsx".into(), path],
        Some("go") => vec!["go".into(), "run".into(), path],
        _ => vec![path],
    }
}

pub fn run(args: BridgeArgs) -> Result<ExitCode> {
    let command = match args.command.as_slice() {
        [one] if Path::new(one).is_file() => entry_command(Path::new(one)),
        _ => args.command.clone(),
    };
    if let Some(f) = args.fault {
        protomcp_proto::fault::activate(f);
        eprintln!("protomcp-conform bridge: fault {f} switched on ({})", f.description());
    }
    let mut auth = args.auth.clone();
    auth.extend(args.auth_token_env.iter().map(|var| AuthSpec { bearer: true, var: var.clone() }));
    // BR-HTTP-24: a named secret that is unset or empty stops the start, before listening.
    let auth = match args.transport {
        Transport::Http => credentials(&auth)?,
        Transport::Stdio => {
            if !auth.is_empty() {
                eprintln!("protomcp-conform bridge: --auth has no effect on stdio");
            }
            Vec::new()
        }
    };
    let cfg = Config {
        command,
        call_timeout: args.call_timeout,
        socket: args.socket,
        trace: args.trace,
        page_size: args.page_size.map(|n| n as usize),
        reload_by_request: args.reload == "request",
        poll: args.poll,
    };
    // One thread: the bridge's work per message is small and every hand-off between worker
    // threads is a futex wake (docs/performance.md compares it with two workers).
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the runtime")?;
    let code = runtime.block_on(async move {
        let listener = match args.transport {
            Transport::Http => {
                let l = tokio::net::TcpListener::bind((args.host.as_str(), args.port))
                    .await
                    .with_context(|| format!("listening on {}:{}", args.host, args.port))?;
                Some(l)
            }
            Transport::Stdio => None,
        };
        // BR-LIFECYCLE-09/10 from the start: a host that closes stdin, or a signal, while the
        // tool process has not connected yet ends the bridge as it would while serving.
        let stdio = listener.is_none();
        let early_stop = async move {
            tokio::select! {
                _ = protomcp_harness::runner::process::interrupted() => {}
                _ = bridge::stdio::hung_up(), if stdio => {}
            }
        };
        let bridge = match Bridge::start_until(cfg, early_stop).await {
            Ok(b) => b,
            Err(bridge::StartError::Failed(bridge::error::StartFailure::Stopped)) => {
                eprintln!("protomcp-conform bridge: stopped before the tool process was ready");
                return Ok(ExitCode::SUCCESS);
            }
            Err(e) => {
                eprintln!("protomcp-conform bridge: {e}");
                if fault::on(Fault::BrLifecycleFailedStartExitZero) {
                    return Ok::<_, anyhow::Error>(ExitCode::SUCCESS);
                }
                return Ok::<_, anyhow::Error>(ExitCode::from(1));
            }
        };
        if !args.watch.is_empty() {
            tokio::spawn(bridge::watch::run(bridge.clone(), args.watch.clone()));
        }
        let stop = async {
            if fault::on(Fault::BrLifecycleSigtermIgnored) {
                // SIGINT only; SIGTERM, caught since the start, goes unheard.
                let _ = tokio::signal::ctrl_c().await;
            } else {
                protomcp_harness::runner::process::interrupted().await
            }
        };
        let served = match listener {
            None => bridge::mcp::serve_stdio(bridge.clone(), stop).await,
            Some(listener) => {
                let addr = listener.local_addr().context("local address")?;
                let loopback = addr.ip().is_loopback();
                if !loopback && auth.is_empty() {
                    eprintln!("protomcp-conform bridge: WARNING: listening on {addr} without authentication");
                }
                eprintln!("protomcp-conform bridge: listening on http://{addr}{}", bridge::http::PATH);
                let guard = bridge::http::Guard { loopback, auth };
                bridge::mcp::serve_http(bridge.clone(), listener, guard, args.session_idle, stop).await
            }
        };
        bridge.shutdown().await;
        if std::env::var_os(bridge::POLL_STATS).is_some() {
            let (opened, polled, caught) = bridge.poll_counts();
            eprintln!(
                "protomcp-conform bridge: poll windows: {opened} opened, {polled} polled, {caught} answered while polling"
            );
        }
        if let Err(e) = served {
            bail!(e);
        }
        if stdio && fault::on(Fault::BrLifecycleEofExitNonzero) {
            return Ok(ExitCode::from(1));
        }
        Ok(ExitCode::SUCCESS)
    });
    runtime.shutdown_timeout(Duration::from_millis(200));
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_options() {
        assert_eq!(parse_auth("token:T"), Ok(AuthSpec { bearer: true, var: "T".into() }));
        assert_eq!(parse_auth("apikey:K_1"), Ok(AuthSpec { bearer: false, var: "K_1".into() }));
        for bad in ["T", "token:", "basic:T", ":T", "TOKEN:T"] {
            assert!(parse_auth(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn runtimes_by_extension() {
        let c = entry_command(Path::new("/x/server.py"));
        assert_eq!(c[1], "/x/server.py");
        assert_eq!(entry_command(Path::new("/x/tool")), vec!["/x/tool".to_owned()]);
    }
}
