//! `protomcp-conform`: the command line. Thin by design: it parses arguments, calls into
//! `protomcp-harness`, and maps outcomes to exit codes.

#![deny(unsafe_code)]

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Parser, Subcommand, ValueEnum};
use protomcp_harness::testee::{self, Misbehave};
use protomcp_proto::frame::{Limits, MAX_FRAME};
use protomcp_proto::violation::Party;

mod adequacy;
mod bridge;
mod capture;
mod coverage;
mod explore;
mod matrix;
mod proto_mcp;
mod reports;
mod run;

/// Conformance harness and protocol fuzzer for protomcp tool processes (SDKs) and bridges.
///
/// Without a subcommand it runs the scenario catalogue against a target: `--sdk DIR`
/// (DIR/protomcp-conform.toml or an SDK checkout), `--testee 'CMD ARGS…'` or `--bridge CMD|DIR`;
/// by default both sides: the tool-process scenarios against the bundled reference testee and the
/// bridge scenarios against the reference bridge (with the bundled mock).
#[derive(Parser)]
#[command(version, about, long_about = None, after_help = RUN_EXIT_CODES, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: run::RunArgs,
}

const EXIT_CODES: &str = "Exit codes:\n  0  success (decode: no protocol rule broken)\n  1  protocol rules broken\n  2  usage error or unreadable input";

const RUN_EXIT_CODES: &str = "Exit codes of a run:\n  0  every scenario PASS, XFAIL, SKIP or WARN\n  1  a FAIL, or an XPASS (a stale known-failures entry)\n  2  usage error or scenario-file error (file:line:col)\n  3  an ERROR (the harness could not judge), or a run that executed no scenario\n  130  interrupted (SIGINT): every testee killed, every temp dir removed\n\nEnvironment: PROTOMCP_CONFORM_TMPDIR is where the per-scenario temp dirs go (default: the system temp dir).";

#[derive(Subcommand)]
enum Command {
    /// List the scenarios: id, level, requirements, title.
    List {
        #[command(flatten)]
        sel: run::Selection,
    },
    /// Print the MUST/SHOULD requirements of the spec that no scenario cites (and are not listed
    /// as not black-box testable in harness/data/untestable/), with counts per area.
    ///
    /// Exit status: 0 when every requirement is covered or listed, 1 otherwise.
    Coverage(coverage::CoverageArgs),
    /// Mutation adequacy: run each fault of the reference peers' catalogue (`--list`) against the
    /// scenarios of its area and report it KILLED (a scenario failed and named its requirement),
    /// MISATTRIBUTED (failures named other requirements) or SURVIVED. docs/adequacy.md.
    ///
    /// Exit status: 0 when every fault is killed and attributed or a listed exception, 1 otherwise,
    /// 2 usage, 3 no fault selected.
    Adequacy(adequacy::AdequacyArgs),
    /// Run the catalogue against several targets (the reference testee first, then every --sdk
    /// and --testee) and print requirement × target as markdown, with the scenarios on which
    /// the targets disagree.
    ///
    /// Exit status: the worst of the targets' run statuses (0 when every run is clean).
    Matrix(matrix::MatrixArgs),
    /// Show one scenario, the texts of the requirements it checks, and how to re-run just it;
    /// or, given a requirement ID (TP-CALL-01), its text and the scenarios that check it.
    Explain {
        /// The scenario id, or a requirement ID.
        id: String,
        #[command(flatten)]
        sel: run::Selection,
    },
    /// Compare two runs' JSON reports (`--json`): per scenario and per requirement, what broke,
    /// what was fixed, what changed, what was added or removed.
    ///
    /// Exit status: 0 nothing got worse, 1 something did (a PASS, XFAIL or SKIP became FAIL, WARN,
    /// XPASS, ERROR, FLAKY or LEAK; a requirement newly broken; a scenario added that fails), 2 an
    /// unreadable report (file:line:col).
    Diff(reports::DiffArgs),
    /// Merge the JSON reports of the shards of one run (`--shard K/N --json FILE`) into the
    /// reports of the whole: the same cases, verdicts and summary as one unsharded run.
    ///
    /// Exit status: the whole run's (0 clean, 1 a FAIL/XPASS/FLAKY/LEAK, 3 an ERROR or nothing
    /// executed), 2 unreadable reports or reports that are not the shards of one run.
    Merge(reports::MergeArgs),
    /// Decode a captured byte stream (one direction of a protomcp connection) into frames,
    /// sideband payloads, and the protocol rules it breaks.
    ///
    /// The input is raw bytes as they crossed the socket, e.g. captured with `strace -e read`
    /// or written by a test; use `--hex` for whitespace-separated hex text.
    #[command(after_help = EXIT_CODES)]
    Decode {
        /// File to read; `-` or nothing reads standard input.
        file: Option<PathBuf>,
        /// Who sent these bytes (decides which requirement IDs a violation names).
        #[arg(long, value_enum, default_value_t = Sender::ToolProcess)]
        from: Sender,
        /// The input is hex text (whitespace and `0x` prefixes ignored).
        #[arg(long)]
        hex: bool,
        /// Largest frame body accepted, in bytes.
        #[arg(long, default_value_t = MAX_FRAME)]
        max_frame: u32,
    },
    /// Run the reference bridge: serve MCP on stdio and bridge it to a protomcp tool process
    /// (`bridge -- CMD ARGS…`, or `bridge FILE`).
    ///
    /// Exit status: 0 after the host closed stdin or a SIGINT/SIGTERM, 1 when the tool process
    /// failed to start or to hand-shake.
    Bridge(bridge::BridgeArgs),
    /// Capture a real session (host, bridge, tool process) and write it as two scenarios: the
    /// harness playing the bridge against the tool process, and playing host and tool process
    /// against the bridge (`capture --out DIR --tool 'CMD' -- BRIDGE… {tool}…`).
    ///
    /// Runs the bridge with the tool process's socket interposed (the bridge starts `{tool}`, a
    /// launcher that execs --tool on a socket of the capture's) and the host's stdin/stdout
    /// relayed; records every frame and line with its time in DIR/capture.txt.
    #[command(after_help = capture::AFTER_HELP)]
    Capture(capture::CaptureArgs),
    /// Explore a tool process with generated sessions (property-based): each case a fresh
    /// process; a failure is shrunk and written as a scenario that replays through the normal
    /// run. Several targets: differential (DIVERGENT when they answer differently).
    ///
    /// Exit status: 0 nothing found, 1 a failure or divergence found (scenario written), 2 usage.
    Explore(Box<explore::ExploreArgs>),
    /// The mock tool process of bridge scenarios: started by the bridge under test, it relays
    /// every byte between the bridge's socket (PROTOMCP_SOCKET) and the harness's control socket
    /// (PROTOMCP_CONFORM_CONTROL), so the scenario plays the tool process. With --native (or
    /// PROTOMCP_CONFORM_MOCK=native) it is the reference testee instead.
    ///
    /// Exit status: 0 when a side closed, 1 when a socket failed, 2 when a variable is missing.
    Mock {
        /// Behave as the reference testee instead of relaying.
        #[arg(long)]
        native: bool,
    },
    /// Run the reference proto-mcp server (profile proto-mcp) on stdio: binary MCPMessage
    /// frames, or JSON-RPC lines when the first byte is `{`.
    ///
    /// Exit status: 0 after stdin ended at a frame boundary, 1 after a first byte that selects no
    /// protocol, an oversize frame or a stream that ended inside a frame.
    ProtoMcpServer(proto_mcp::ServerArgs),
    /// Run the reference testee: a tool process that serves the whole fixture contract
    /// (harness/testees/README.md) over the socket named by PROTOMCP_SOCKET.
    ///
    /// Exit status: 0 when the bridge closed the connection, 1 when connecting failed or the
    /// framing was lost, 2 when PROTOMCP_SOCKET is unset or empty, 3 for --misbehave
    /// crash-mid-call. PROTOMCP_CHUNK_THRESHOLD and PROTOMCP_COMPRESS_THRESHOLD move the
    /// sideband and compression thresholds.
    Testee {
        /// The middleware variant: also register guard (1), mirror (10) and broken (20).
        #[arg(long)]
        middleware: bool,
        /// Break one rule on purpose (otherwise behaving normally), for self-tests of the harness.
        #[arg(long, value_name = "KIND", value_parser = misbehave_parser())]
        misbehave: Option<Misbehave>,
        /// Switch on one fault of the catalogue (a realistic bug that breaks one requirement), for
        /// `adequacy`; `adequacy --list` lists them (docs/adequacy.md).
        #[arg(long, value_name = "NAME", value_parser = fault_parser(protomcp_proto::fault::Role::ToolProcess))]
        fault: Option<protomcp_proto::fault::Fault>,
        /// Serve the fixture of the official MCP conformance suite (its test_* tools, test://
        /// resources and prompts) instead of Appendix B: for running that suite through a bridge
        /// (tests/mcp-conformance/run.sh).
        #[arg(long, conflicts_with = "middleware")]
        mcp_conformance: bool,
        /// Register `secret` visible: the Appendix B fixture of a tool process that does not
        /// declare `hidden`, so nothing is hidden and no DisableToolsRequest follows the marker.
        #[arg(long)]
        no_hidden: bool,
    },
}

/// `--fault NAME` of the peer of `role` (`testee`, `bridge`): the names of that role's faults.
pub(crate) fn fault_parser(
    role: protomcp_proto::fault::Role,
) -> impl TypedValueParser<Value = protomcp_proto::fault::Fault> {
    use protomcp_proto::fault::Fault;
    let names = Fault::ALL.iter().filter(move |f| f.role() == role).map(|f| PossibleValue::new(f.name()).hide(true));
    PossibleValuesParser::new(names).try_map(|name| name.parse::<Fault>())
}

fn misbehave_parser() -> impl TypedValueParser<Value = Misbehave> {
    let values = Misbehave::ALL.iter().map(|(m, name)| PossibleValue::new(*name).help(m.summary()));
    PossibleValuesParser::new(values).try_map(|name| name.parse::<Misbehave>())
}

#[derive(Clone, Copy, ValueEnum)]
enum Sender {
    ToolProcess,
    Bridge,
}

fn main() -> ExitCode {
    // Started through a link named `mock` (the `{mock}` of a bridge run): `protomcp-conform mock`.
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // Started through the link `{tool}` of a capture: the launcher (it execs the tool process).
    let name = args.first().and_then(|a| std::path::Path::new(a).file_name());
    if name.is_some_and(|n| n == protomcp_harness::capture::LAUNCHER_NAME) {
        return ExitCode::from(u8::try_from(protomcp_harness::capture::launcher::run(&args[1..])).unwrap_or(1));
    }
    if args.first().and_then(|a| std::path::Path::new(a).file_name()).is_some_and(|n| n == "mock") {
        args.insert(1, "mock".into());
        return match run(Cli::parse_from(args)) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("protomcp-conform mock: {e:#}");
                ExitCode::from(2)
            }
        };
    }
    if let Some(code) = proto_mcp::dispatch() {
        return code;
    }
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        // A reader that went away (`| head`) is not an error worth a message.
        Err(e) if e.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) => {
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("protomcp-conform: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    let Some(command) = cli.command else { return run::run(cli.run) };
    match command {
        Command::List { sel } => run::list(&sel),
        Command::Explain { id, sel } => run::explain(&sel, &id),
        Command::Explore(a) => explore::run(*a),
        Command::Coverage(a) => coverage::coverage(a),
        Command::Adequacy(a) => adequacy::adequacy(a),
        Command::Diff(a) => reports::diff(a),
        Command::Merge(a) => reports::merge(a),
        Command::Matrix(a) => matrix::matrix(a),
        Command::Bridge(args) => bridge::run(args),
        Command::Capture(args) => capture::run(args),
        Command::ProtoMcpServer(args) => proto_mcp::serve(args),
        Command::Mock { native } => {
            let code = protomcp_harness::mock::run_blocking(native || protomcp_harness::mock::native_from_env());
            Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
        }
        Command::Testee { middleware, misbehave, fault, mcp_conformance, no_hidden } => {
            // Before anything reads the environment: a fault may change how.
            if let Some(f) = fault {
                protomcp_proto::fault::activate(f);
            }
            let fixture = if mcp_conformance { testee::Fixture::McpConformance } else { testee::Fixture::AppendixB };
            let opts =
                testee::Options { middleware, misbehave, fixture, hidden: !no_hidden, ..testee::Options::from_env() };
            let code = testee::run_blocking(opts);
            Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
        }
        Command::Decode { file, from, hex, max_frame } => {
            let mut raw = Vec::new();
            match &file {
                Some(p) if p.as_os_str() != "-" => {
                    raw = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?
                }
                _ => {
                    std::io::stdin().read_to_end(&mut raw).context("reading standard input")?;
                }
            }
            let bytes = if hex { parse_hex(&raw)? } else { raw };
            let party = match from {
                Sender::ToolProcess => Party::ToolProcess,
                Sender::Bridge => Party::Bridge,
            };
            let limits = Limits { max_frame, ..Limits::default() };
            let dump = protomcp_harness::dump::dump(&bytes, party, limits);
            for line in &dump.lines {
                println!("{line}");
            }
            println!("{} frames in {} bytes", dump.frames, bytes.len());
            for v in &dump.violations {
                println!("VIOLATION {v}");
            }
            Ok(if dump.violations.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
    }
}

fn parse_hex(text: &[u8]) -> Result<Vec<u8>> {
    let text = std::str::from_utf8(text).context("--hex input is not text")?;
    let mut out = Vec::new();
    for (lineno, line) in text.lines().enumerate() {
        let digits: String = line.split_whitespace().map(|w| w.trim_start_matches("0x")).collect();
        let bytes =
            protomcp_proto::dynamic::hex_decode(&digits).map_err(|e| anyhow::anyhow!("line {}: {e}", lineno + 1))?;
        out.extend(bytes);
    }
    Ok(out)
}
