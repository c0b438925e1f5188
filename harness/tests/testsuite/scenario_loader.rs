//! The scenario loader: every error points at `file:line:col`, semantic checks, directories.

use crate::loader::{first_error, parse};

use std::path::{Path, PathBuf};
use std::time::Duration;

use protomcp_harness::requirements::Level;
use protomcp_harness::scenario::{Action, CloseMode, ExitCode, FrameBody, Loc, Role, SocketSetup, load_dir};
use protomcp_harness::testee::Misbehave;

const HEAD: &str = "id: calls.echo\ntitle: Echo\nrequirements: [TP-CALL-01]\nlevel: MUST\nrole: tool-process\n";

/// The scenario with `steps` after the standard header (steps start on line 7).
fn with_steps(steps: &str) -> String {
    format!("{HEAD}steps:\n{steps}")
}

/// `dir/s.yaml:L:C` of the first occurrence of `needle` in `text` (1-based, in characters).
fn at(text: &str, needle: &str) -> String {
    let (line_no, line) = text.lines().enumerate().find(|(_, l)| l.contains(needle)).expect("needle in text");
    let col = line[..line.find(needle).unwrap()].chars().count() + 1;
    format!("dir/s.yaml:{}:{col}", line_no + 1)
}

#[test]
fn a_valid_scenario_loads_with_locations() {
    let s = parse(&with_steps(
        "  - handshake: {}\n  - send: {request_id: r1, call_tool: {name: echo, arguments_json: {text: hi}}}\n  - expect:\n      envelope: {request_id: r1, call_result: {result_json: [{type: text, text: hi}]}}\n",
    ))
    .unwrap();
    assert_eq!(s.id, "calls.echo");
    assert_eq!(s.id_loc, Loc::new(1, 5));
    assert_eq!(s.level, Level::Must);
    assert_eq!(s.role, Role::ToolProcess);
    assert_eq!(s.requirements[0].id, "TP-CALL-01");
    assert_eq!(s.steps.len(), 3);
    assert_eq!(s.steps[0].loc, Loc::new(7, 5));
    assert_eq!(s.steps[1].loc, Loc::new(8, 5));
    assert_eq!(s.at(s.steps[2].loc).to_string(), "dir/s.yaml:9:5");
    assert_eq!(s.steps[2].keyword(), "expect");
    let Action::Expect(e) = &s.steps[2].action else { panic!() };
    assert_eq!(e.within, Duration::from_millis(1000));
    let Action::Handshake(h) = &s.steps[0].action else { panic!() };
    assert_eq!((h.rid.as_str(), h.hidden.is_none(), h.within), ("req-0", true, Duration::from_secs(10)));
    let Action::Send(t) = &s.steps[1].action else { panic!() };
    let body = t.body(&Default::default()).unwrap();
    let env = <protomcp_proto::Envelope as prost::Message>::decode(body.as_slice()).unwrap();
    assert_eq!(env.request_id, "r1");
}

#[test]
fn typo_in_a_key_points_at_the_key() {
    assert_eq!(
        first_error(&with_steps("  - handshake: {hiden: [secret]}\n")),
        "dir/s.yaml:7:17: unknown field `hiden`, expected one of rid, hidden, middleware, tool_list, within_ms"
    );
    assert_eq!(
        first_error("id: calls.echo\ntitel: Echo\n"),
        "dir/s.yaml:2:1: unknown field `titel`, expected one of id, title, requirements, level, role, profile, needs, unless, notes, timeout_ms, testee, host_requests, stale_socket, shared_tmp, transports, exclusive, duration_ms, steps"
    );
    let e = first_error(&with_steps("  - handshake: {}\n  - expct: {envelope: {}}\n"));
    assert!(e.starts_with("dir/s.yaml:8:5: unknown variant `expct`, expected one of handshake, send,"), "{e}");
    let text = with_steps("  - expect: {envelope: {}, within: 5}\n");
    let e = first_error(&text);
    assert!(e.starts_with(&format!("{}: unknown field `within`", at(&text, "within"))), "{e}");
}

#[test]
fn syntax_and_type_errors_have_positions() {
    assert_eq!(first_error("id: [\n"), "dir/s.yaml:1:5: expected string scalar");
    let text = with_steps("  - sleep: {ms: soon}\n");
    assert!(first_error(&text).starts_with(&format!("{}: `soon` is not a time", at(&text, "soon"))));
    let text = with_steps("  - sleep: {ms: -5}\n");
    assert_eq!(first_error(&text), format!("{}: a time cannot be negative", at(&text, "-5")));
    let text = with_steps("  - send_frame: {length: 4294967296}\n");
    let e = first_error(&text);
    assert!(e.starts_with(&format!("{}: ", at(&text, "4294967296"))), "{e}");
    let e = first_error("id: calls.echo\n");
    assert!(e.starts_with("dir/s.yaml:1:1: missing field `title`"), "{e}");
    assert!(first_error("").starts_with("dir/s.yaml:1:1: "));
}

#[test]
fn unknown_and_misfit_requirements() {
    let text = HEAD.replace("[TP-CALL-01]", "[TP-CALL-99]") + "steps:\n  - handshake: {}\n";
    assert_eq!(
        first_error(&text),
        "dir/s.yaml:3:16: unknown requirement `TP-CALL-99`; TP-CALL-* runs from TP-CALL-01 to TP-CALL-21"
    );
    let text = HEAD.replace("[TP-CALL-01]", "[tp-call-01]") + "steps:\n  - handshake: {}\n";
    assert_eq!(first_error(&text), "dir/s.yaml:3:16: unknown requirement `tp-call-01`; did you mean TP-CALL-01?");
    let text = HEAD.replace("[TP-CALL-01]", "[BR-CALL-01]") + "steps:\n  - handshake: {}\n";
    assert!(first_error(&text).contains("BR-CALL-01 is an obligation of a bridge"));
    let text = HEAD.replace("[TP-CALL-01]", "[]") + "steps:\n  - handshake: {}\n";
    assert_eq!(first_error(&text), "dir/s.yaml:3:15: a scenario must cite at least one requirement");
    // A feature-tagged requirement needs its feature.
    let text = HEAD.replace("[TP-CALL-01]", "[TP-HANDSHAKE-09]") + "steps:\n  - handshake: {}\n";
    assert_eq!(
        first_error(&text),
        "dir/s.yaml:3:16: TP-HANDSHAKE-09 depends on feature `middleware`: add it to `needs`"
    );
    let ok = HEAD.replace("[TP-CALL-01]", "[TP-HANDSHAKE-09]") + "needs: [middleware]\nsteps:\n  - handshake: {}\n";
    assert!(parse(&ok).is_ok());
    let text = HEAD.to_owned() + "needs: [hiden]\nsteps:\n  - handshake: {}\n";
    assert!(
        first_error(&text).starts_with("dir/s.yaml:6:9: unknown feature `hiden` for role tool-process; valid: hidden,")
    );
}

#[test]
fn level_must_fit_the_cited_requirements() {
    // TP-CALL-05 is a SHOULD.
    let text = HEAD.replace("[TP-CALL-01]", "[TP-CALL-05]") + "steps:\n  - handshake: {}\n";
    assert_eq!(
        first_error(&text),
        "dir/s.yaml:4:8: level MUST is stronger than every requirement cited (TP-CALL-05 SHOULD); use SHOULD"
    );
    let text = HEAD.replace("level: MUST", "level: SHOULD") + "steps:\n  - handshake: {}\n";
    assert!(
        first_error(&text).contains("level SHOULD is weaker than every requirement cited (TP-CALL-01 MUST); use MUST")
    );
    let mixed = HEAD.replace("[TP-CALL-01]", "[TP-CALL-01, TP-CALL-05]").replace("level: MUST", "level: SHOULD");
    assert_eq!(parse(&(mixed + "steps:\n  - handshake: {}\n")).unwrap().level, Level::Should);
    let text = HEAD.replace("level: MUST", "level: must") + "steps:\n  - handshake: {}\n";
    assert_eq!(first_error(&text), "dir/s.yaml:4:8: unknown level `must`; valid: MUST, SHOULD, MAY");
}

/// Asserts that the first error of `steps` is at the first `needle` and starts with `message`.
#[track_caller]
fn assert_error(steps: &str, needle: &str, message: &str) {
    let text = with_steps(steps);
    let e = first_error(&text);
    let want = format!("{}: {message}", at(&text, needle));
    assert!(e.starts_with(&want), "\n got: {e}\nwant: {want}…");
}

#[test]
fn unknown_names_in_envelopes_and_patterns() {
    assert_error(
        "  - send: {call_tool: {name: echo, argument_json: x}}\n",
        "argument_json",
        "call_tool.argument_json: CallToolRequest has no field `argument_json`; valid: name, arguments_json, progress_token, unknown_fields, field_order",
    );
    assert_error(
        "  - send: {call_tul: {}}\n",
        "call_tul",
        "call_tul: Envelope has no field `call_tul`; valid: reload,",
    );
    assert_error("  - send: {request_id: 1}\n", "1}", "request_id: expected a string, found number 1");
    assert_error(
        "  - send: {unknown_fields: [{number: 99, varint: 1, text: x}]}\n",
        "{number",
        "unknown_fields[0]: a raw field needs exactly one of varint, fixed32, fixed64, bytes_hex, text, message, raw_hex (found varint, text)",
    );
    assert_error(
        "  - expect: {envelope: {call_reslt: {}}}\n",
        "call_reslt",
        "Envelope pattern has no field `call_reslt`; valid: reload,",
    );
    let e = first_error(&with_steps("  - expect: {envelope: {call_reslt: {}}}\n"));
    assert!(e.ends_with("unknown_fields, arm, via, sideband, stream, size_rule"), "{e}");
    assert_error(
        "  - expect: {envelope: {call_result: {is_eror: true}}}\n",
        "is_eror",
        "CallToolResponse has no field `is_eror`; valid: is_error,",
    );
    assert_error(
        "  - expect: {envelope: {arm: call_reslt}}\n",
        "call_reslt",
        "unknown an arm name `call_reslt`; valid: reload,",
    );
    assert_error(
        "  - expect: {envelope: {via: frames}}\n",
        "frames",
        "unknown a result form `frames`; valid: frame, sideband, stream",
    );
    assert_error(
        "  - expect: {envelope: {arm: log}, ignore: [progres]}\n",
        "progres",
        "unknown arm `progres`; valid: reload,",
    );
    assert_error(
        "  - expect: {envelope: {request_id: 5}}\n",
        "5}",
        "`request_id` is a string: expected a string, found integer 5 (quote it)",
    );
    assert_error("  - expect: {envelope: {progress: {total: x}}}\n", "x}", "`total` is an int64: expected an integer");
    assert_error(
        "  - expect: {envelope: {call_result: {enable_tools: secret}}}\n",
        "secret",
        "`enable_tools` is a list: expected a list",
    );
    assert_error(
        "  - expect: {envelope: {call_result: {is_error: {contains: x}, regex: y}}}\n",
        "regex",
        "CallToolResponse has no field `regex`",
    );
    assert_error(
        "  - expect: {envelope: {call_result: {result_json: [{regex: x, text: y}]}}}\n",
        "regex",
        "`regex` is a matcher keyword and cannot be mixed with other keys (text)",
    );
    assert_error(
        "  - expect: {envelope: {call_result: {is_error: {unordered: [true]}}}}\n",
        "unordered",
        "`unordered` applies to lists",
    );
    assert_error(
        "  - expect: {envelope: {stream_chunk: {data: 'x'}}}\n",
        "'x'",
        "`data` is bytes: expected {hex: …} or {text: …}",
    );
}

#[test]
fn bad_regex_hex_and_json() {
    assert_error(
        "  - expect: {envelope: {call_result: {result_json: {regex: '('}}}}\n",
        "'('",
        "invalid regex: regex parse error: ( ^ error: unclosed group",
    );
    assert_error("  - send_raw: {hex: '0g'}\n", "'0g'", "invalid hex: `g` is not a hex digit");
    assert_error("  - send_raw: {hex: 'abc'}\n", "'abc'", "invalid hex: odd number of hex digits (3)");
    assert_error("  - send_frame: {body_hex: 'zz'}\n", "'zz'", "invalid hex: `z` is not a hex digit");
    assert_error(
        "  - send: {stream_chunk: {data: {hex: 'q1'}}}\n",
        "'q1'",
        "stream_chunk.data.hex: invalid hex: `q` is not a hex digit",
    );
    assert_error(
        "  - expect: {envelope: {stream_chunk: {data: {hex: 'q1'}}}}\n",
        "'q1'",
        "invalid hex: `q` is not a hex digit",
    );
    assert_error(
        "  - expect: {envelope: {call_result: {result_json: '[{'}}}\n",
        "'[{'",
        "a string here is JSON text, and this one does not parse",
    );
}

#[test]
fn captures_must_be_defined_by_an_earlier_step() {
    assert_error(
        "  - send: {request_id: '${rid}', list_tools: {}}\n",
        "'${rid}'",
        "`${rid}` is not defined: no earlier step captures `rid` (with {capture: rid})",
    );
    // Defined in the same step does not count.
    assert_error(
        "  - expect: {envelope: {request_id: {capture: rid}, call_result: {result_json: {contains: '${rid}'}}}}\n",
        "'${rid}'",
        "`${rid}` is not defined",
    );
    assert_error("  - expect_exit: {stderr: {regex: 'pid ${pid}'}}\n", "'pid", "`${pid}` is not defined");
    let ok = with_steps(
        "  - expect: {envelope: {tool_list: {tools: [{name: {capture: first}}]}}}\n  - send: {request_id: x, call_tool: {name: '${first}', arguments_json: {text: 'tool ${first}'}}}\n  - expect: {envelope: {call_result: {result_json: [{text: {regex: '^tool ${first}$'}}]}}}\n",
    );
    parse(&ok).unwrap();
    assert_error("  - send: {request_id: '${1x}', list_tools: {}}\n", "'${1x}'", "`${1x}` is not a placeholder");
    assert_error("  - expect: {envelope: {request_id: {capture: 'a b'}}}\n", "'a b'", "`capture` takes a name");
}

#[test]
fn testee_setup_and_connection_rules() {
    let text = format!(
        "{HEAD}needs: [middleware]\ntestee:\n  middleware: true\n  misbehave: wrong-rid\n  env: {{PROTOMCP_CHUNK_THRESHOLD: 100, GONE: null, FLAG: true}}\nsteps:\n  - handshake: {{middleware: [guard, mirror, broken], hidden: []}}\n"
    );
    let s = parse(&text).unwrap();
    assert!(s.testee.middleware);
    assert_eq!(s.testee.misbehave, Some(Misbehave::WrongRid));
    assert_eq!(s.testee.env.get("PROTOMCP_CHUNK_THRESHOLD"), Some(&Some("100".to_owned())));
    assert_eq!(s.testee.env.get("GONE"), Some(&None));
    assert_eq!(s.testee.env.get("FLAG"), Some(&Some("true".to_owned())));
    assert!(s.connects());
    let e = first_error(&format!("{HEAD}testee: {{misbehave: nasty}}\nsteps:\n  - handshake: {{}}\n"));
    assert!(e.starts_with("dir/s.yaml:6:21: unknown misbehave kind `nasty`; valid: never-connect,"), "{e}");
    let e = first_error(&format!("{HEAD}testee: {{env: {{PROTOMCP_SOCKET: x}}}}\nsteps:\n  - handshake: {{}}\n"));
    assert!(e.starts_with("dir/s.yaml:6:16: PROTOMCP_SOCKET belongs to the harness"), "{e}");
    let e = first_error(&format!("{HEAD}testee: {{middleware: true}}\nsteps:\n  - handshake: {{}}\n"));
    assert_eq!(e, "dir/s.yaml:6:22: the middleware variant needs `middleware` in `needs`");
    let s = parse(&format!("{HEAD}testee: {{hidden: false}}\nsteps:\n  - handshake: {{hidden: []}}\n")).unwrap();
    assert!(s.testee.nothing_hidden);
    assert!(!parse(&format!("{HEAD}steps:\n  - handshake: {{}}\n")).unwrap().testee.nothing_hidden);
    let e = first_error(&format!("{HEAD}needs: [hidden]\ntestee: {{hidden: false}}\nsteps:\n  - handshake: {{}}\n"));
    assert!(e.ends_with("`hidden: false` (nothing hidden) contradicts `hidden` in `needs`"), "{e}");
    // A testee that never connects allows only process-level steps.
    let text = HEAD.replace("TP-CALL-01", "TP-CONN-04")
        + "testee: {socket: missing}\nsteps:\n  - sleep: {ms: 10}\n  - expect_exit: {code: nonzero, stderr: {contains: PROTOMCP_SOCKET}}\n";
    let s = parse(&text).unwrap();
    assert_eq!(s.testee.socket, SocketSetup::Missing);
    assert!(!s.connects());
    let Action::ExpectExit(x) = &s.steps[1].action else { panic!() };
    assert_eq!((x.code, x.within), (ExitCode::NonZero, Duration::from_secs(1)));
    assert!(x.code.accepts(Some(1)) && x.code.accepts(None) && !x.code.accepts(Some(0)));
    let text = HEAD.to_owned() + "testee: {socket: unset}\nsteps:\n  - handshake: {}\n";
    assert!(
        first_error(&text).starts_with("dir/s.yaml:8:5: `handshake` needs the connection, but with testee.socket set")
    );
    let e = first_error(&with_steps("  - handshake: {}\n  - close: {}\n  - expect_close: {}\n"));
    assert_eq!(e, "dir/s.yaml:9:5: `expect_close` needs the connection, which the `close` step at 8:5 closed");
    let e = first_error(&with_steps("  - close: {mode: write}\n  - expect_close: {}\n  - send_raw: {hex: '00'}\n"));
    assert_eq!(
        e,
        "dir/s.yaml:9:5: `send_raw` writes to the connection, whose sending side the `close` step at 7:5 shut down"
    );
    let s = parse(&with_steps("  - close: {mode: write}\n  - expect_close: {within_ms: 50}\n  - signal: {name: SIGTERM}\n  - expect_exit: {code: 0}\n")).unwrap();
    assert!(matches!(s.steps[0].action, Action::Close(CloseMode::Write)));
    assert!(matches!(s.steps[3].action, Action::ExpectExit(ref x) if x.code == ExitCode::Exactly(0)));
}

#[test]
fn send_frame_and_raw_bytes() {
    let s = parse(&with_steps(
        "  - send_frame: {length: 10485761}\n  - send_frame: {length: 5, body: {list_tools: {}, request_id: '${x}'}}\n  - send_raw: {hex: '00 00 00 00'}\n",
    ));
    // ${x} is undefined: that is the only error.
    let e = s.unwrap_err();
    assert_eq!(e.len(), 1, "{e}");
    let s = parse(&with_steps("  - send_frame: {length: 10485761}\n  - send_frame: {length: 5, body: {list_tools: {}}}\n  - send_raw: {hex: '00 00 00 00'}\n")).unwrap();
    let Action::SendFrame(f) = &s.steps[0].action else { panic!() };
    assert_eq!(f.length, Some(10_485_761));
    assert!(matches!(&f.body, FrameBody::Hex(b) if b.is_empty()));
    let Action::SendFrame(f) = &s.steps[1].action else { panic!() };
    assert!(matches!(&f.body, FrameBody::Envelope(_)));
    assert!(matches!(&s.steps[2].action, Action::SendRaw(b) if b == &[0, 0, 0, 0]));
    assert_error(
        "  - send_frame: {body_hex: '00', body: {}}\n",
        "{}}",
        "give the frame's body as `body_hex` or as `body`, not both",
    );
}

#[test]
fn several_errors_are_reported_in_order() {
    let text = with_steps("  - send: {request_id: 1}\n  - expect: {envelope: {arm: nope}}\n  - send_raw: {hex: x}\n");
    let e = parse(&text).unwrap_err();
    let got: Vec<String> = e.iter().map(|e| format!("dir/s.yaml:{}:{}", e.line, e.col)).collect();
    assert_eq!(got, [at(&text, "1}"), at(&text, "nope"), at(&text, "x}")]);
    assert_eq!(e.to_string().lines().count(), 3);
}

#[test]
fn the_scenarios_directory_loads() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let scenarios = load_dir(&root).unwrap_or_else(|e| panic!("{e}"));
    assert!(scenarios.len() >= 5, "{}", scenarios.len());
    let files: Vec<&PathBuf> = scenarios.iter().map(|s| &s.file).collect();
    let mut sorted = files.clone();
    sorted.sort();
    assert_eq!(files, sorted);
    let echo = scenarios.iter().find(|s| s.id == "calls.echo").expect("calls/echo.yaml");
    assert!(echo.file.ends_with("calls/echo.yaml"));
}

#[test]
fn duplicate_ids_name_both_places() {
    let dir = std::env::temp_dir().join(format!("protomcp-scenarios-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("a/b")).unwrap();
    let text = with_steps("  - handshake: {}\n");
    std::fs::write(dir.join("a/one.yaml"), &text).unwrap();
    std::fs::write(dir.join("a/b/two.yml"), format!("# a comment\n{text}")).unwrap();
    std::fs::write(dir.join("a/ignored.txt"), "not yaml").unwrap();
    std::fs::write(dir.join("bad.yaml"), "id: x\n").unwrap();
    let e = load_dir(&dir).unwrap_err();
    let msgs: Vec<String> = e.iter().map(ToString::to_string).collect();
    let first = dir.join("a/b/two.yml").display().to_string();
    let second = dir.join("a/one.yaml").display().to_string();
    assert_eq!(msgs.len(), 2, "{msgs:?}");
    assert_eq!(msgs[0], format!("{second}:1:5: duplicate scenario id `calls.echo`: also defined at {first}:2:5"));
    assert!(msgs[1].starts_with(&format!("{}:1:1: missing field", dir.join("bad.yaml").display())), "{}", msgs[1]);
    std::fs::remove_dir_all(&dir).unwrap();
    let e = load_dir(Path::new("/nonexistent/scenarios")).unwrap_err();
    assert!(e.first().to_string().starts_with("/nonexistent/scenarios: cannot list the directory"));
}

#[test]
fn malformed_input_never_panics() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut seeds: Vec<String> = protomcp_harness::scenario::scenario_files(&root)
        .unwrap()
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    seeds.push(with_steps("  - expect: {envelope: {call_result: {result_json: {any_of: [{regex: x}, {json: {a: [1, {capture: c}]}}]}}}}\n"));
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let alphabet: &[u8] = b" :-{}[]'\"\n#&*!|>?%@`,0123456789abcxyz${}\\\t";
    for seed in &seeds {
        // 40 mutants of each of the ~430 files; the scenario_parser fuzz target goes further.
        for _ in 0..40 {
            let mut bytes = seed.as_bytes().to_vec();
            for _ in 0..(1 + next() % 4) {
                let at = (next() as usize) % (bytes.len() + 1);
                match next() % 3 {
                    0 if at < bytes.len() => {
                        bytes.remove(at);
                    }
                    1 if at < bytes.len() => bytes[at] = alphabet[(next() as usize) % alphabet.len()],
                    _ => bytes.insert(at, alphabet[(next() as usize) % alphabet.len()]),
                }
            }
            let text = String::from_utf8_lossy(&bytes);
            if let Err(e) = parse(&text) {
                for err in &e {
                    assert!(err.line > 0 && err.col > 0, "no position: {err}\n{text}");
                    assert!(err.to_string().starts_with("dir/s.yaml:"));
                }
            }
        }
    }
}

#[test]
fn host_requests_manual_in_bridge_scenarios() {
    use protomcp_harness::scenario::HostRequests;
    let bridge_head = "id: bridge.sampling.x\ntitle: X\nrequirements: [BR-SAMPLING-04]\nlevel: MUST\nrole: bridge\n";
    let steps = "steps:\n  - host_expect: {message: {method: sampling/createMessage, id: {capture: sid}}}\n  - host_send: {message: {jsonrpc: '2.0', id: '${sid}', result: {}}}\n";
    let s = parse(&format!("{bridge_head}host_requests: manual\n{steps}")).unwrap();
    assert_eq!(s.host_requests, HostRequests::Manual);
    let s = parse(&format!("{bridge_head}{steps}")).unwrap();
    assert_eq!(s.host_requests, HostRequests::Auto);
    let s = parse(&format!("{bridge_head}host_requests: auto\n{steps}")).unwrap();
    assert_eq!(s.host_requests, HostRequests::Auto);
    let e = first_error(&format!("{bridge_head}host_requests: never\n{steps}"));
    assert_eq!(e, "dir/s.yaml:6:16: unknown host_requests `never`; valid: auto, manual");
    let e = first_error(&format!("{HEAD}host_requests: manual\nsteps:\n  - handshake: {{}}\n"));
    assert_eq!(e, "dir/s.yaml:6:16: host_requests belongs to bridge scenarios (role: bridge)");
    // The captured id must come from an earlier step.
    let e = first_error(&format!(
        "{bridge_head}host_requests: manual\nsteps:\n  - host_send: {{message: {{jsonrpc: '2.0', id: '${{sid}}', result: {{}}}}}}\n"
    ));
    assert!(e.contains("`${sid}` is not defined"), "{e}");
}

#[test]
fn tool_handshake_middleware_and_hidden() {
    let head = "id: bridge.middleware.x\ntitle: X\nrequirements: [BR-MIDDLEWARE-01]\nlevel: MUST\nrole: bridge\n";
    let s = parse(&format!(
        "{head}steps:\n  - tool_handshake: {{tools: [{{name: a}}, {{name: b}}], middleware: [{{name: auth, priority: 1}}, {{name: audit, priority: -3}}], hidden: [b]}}\n"
    ))
    .unwrap();
    let Action::ToolHandshake(h) = &s.steps[0].action else { panic!() };
    assert_eq!(
        h.middleware,
        vec![serde_json::json!({"name": "auth", "priority": 1}), serde_json::json!({"name": "audit", "priority": -3})]
    );
    assert_eq!(h.hidden, vec!["b".to_owned()]);
    let s = parse(&format!("{head}steps:\n  - tool_handshake: {{tools: [{{name: a}}]}}\n")).unwrap();
    let Action::ToolHandshake(h) = &s.steps[0].action else { panic!() };
    assert!(h.middleware.is_empty() && h.hidden.is_empty());
    // Registrations are checked against the schema.
    let e = first_error(&format!("{head}steps:\n  - tool_handshake: {{middleware: [{{name: auth, prio: 1}}]}}\n"));
    assert!(e.contains("RegisterMiddlewareRequest has no field `prio`"), "{e}");
    let e = first_error(&format!("{head}steps:\n  - tool_handshake: {{middleware: {{name: auth}}}}\n"));
    assert!(e.contains("`middleware` is a list"), "{e}");
}

#[test]
fn bridge_tool_steps_after_close_play_the_restarted_tool_process() {
    let head = "id: bridge.restart.x\ntitle: X\nrequirements: [BR-LIFECYCLE-05]\nlevel: SHOULD\nrole: bridge\n";
    let s = parse(&format!(
        "{head}steps:\n  - tool_handshake: {{}}\n  - close: {{}}\n  - expect: {{envelope: {{list_tools: {{}}}}}}\n  - close: {{}}\n  - send: {{list_tools: {{}}}}\n"
    ))
    .unwrap();
    assert_eq!(s.steps.len(), 5);
    // A tool process that shut down its sending side still cannot write.
    let e = first_error(&format!("{head}steps:\n  - close: {{mode: write}}\n  - send: {{list_tools: {{}}}}\n"));
    assert!(e.contains("whose sending side the `close` step at 7:5 shut down"), "{e}");
}

#[test]
fn touch_writes_a_file_inside_the_scenario_dir_of_a_bridge_scenario() {
    let head =
        "id: bridge.reload.x\ntitle: X\nrequirements: [BR-RELOAD-09]\nlevel: SHOULD\nrole: bridge\nneeds: [watch]\n";
    let s =
        parse(&format!("{head}steps:\n  - touch: {{path: watched/sub/tool.py}}\n  - expect_close: {{}}\n")).unwrap();
    match &s.steps[0].action {
        Action::Touch(p) => assert_eq!(p, Path::new("watched/sub/tool.py")),
        other => panic!("{other:?}"),
    }
    assert_eq!(s.steps[0].keyword(), "touch");
    assert!(!s.steps[0].action.needs_connection());
    for bad in ["/etc/passwd", "../x", "watched/../../x", "''", "./x"] {
        let text = format!("{head}steps:\n  - touch: {{path: {bad}}}\n");
        let e = first_error(&text);
        assert!(e.starts_with("dir/s.yaml:8:19: touch:"), "{bad}: {e}");
        assert!(e.contains("must be a relative path inside the scenario's dir"), "{bad}: {e}");
    }
    let e = first_error(&format!("{head}steps:\n  - touch: {{}}\n"));
    assert!(e.contains("path"), "{e}");
    let e = first_error(&with_steps("  - touch: {path: x}\n"));
    assert_eq!(e, "dir/s.yaml:7:5: `touch` belongs to bridge scenarios (role: bridge)");
}

#[test]
fn host_http_requests_with_chosen_headers_over_http_only() {
    use protomcp_harness::scenario::{HttpSessionRef, Transport};
    let head = "id: bridge.http.x\ntitle: X\nrequirements: [BR-HTTP-04]\nlevel: MUST\nrole: bridge\nneeds: [http]\n";
    let step = "  - host_http:\n      method: PUT\n      path: /other\n      headers: {Host: evil.example, Origin: ''}\n      session: none\n      body: '{}'\n      expect: {status: 403, headers: {allow: {regex: POST}}}\n";
    let s = parse(&format!("{head}transports: [http]\nsteps:\n{step}")).unwrap();
    assert_eq!(s.transports, vec![Transport::Http]);
    assert_eq!(s.steps[0].keyword(), "host_http");
    assert!(!s.steps[0].action.needs_connection());
    match &s.steps[0].action {
        Action::HostHttp(h) => {
            assert_eq!((h.method.as_str(), h.path.as_deref(), h.body.as_str()), ("PUT", Some("/other"), "{}"));
            assert_eq!(h.headers, vec![("Host".into(), "evil.example".into()), ("Origin".into(), String::new())]);
            assert_eq!(h.session, HttpSessionRef::None);
            assert!(h.status.is_some() && h.expect_headers.is_some() && h.expect_body.is_none());
        }
        other => panic!("{other:?}"),
    }
    // Defaults: POST, the endpoint's path, the current session; any other string is an id.
    let s =
        parse(&format!("{head}transports: [http]\nsteps:\n  - host_http: {{session: abc, expect: {{status: 404}}}}\n"))
            .unwrap();
    match &s.steps[0].action {
        Action::HostHttp(h) => {
            assert_eq!((h.method.as_str(), h.path.as_deref()), ("POST", None));
            assert_eq!(h.session, HttpSessionRef::Literal("abc".into()));
        }
        other => panic!("{other:?}"),
    }
    let e = first_error(&format!("{head}steps:\n{step}"));
    assert_eq!(e, "dir/s.yaml:8:5: `host_http` needs `transports: [http]` (it is a request over HTTP)");
    let bad = |step: &str| first_error(&format!("{head}transports: [http]\nsteps:\n  - host_http: {step}\n"));
    assert!(bad("{method: put, expect: {status: 1}}").contains("is not an HTTP method"));
    assert!(bad("{path: mcp, expect: {status: 1}}").contains("a path starts with `/`"));
    assert!(bad("{headers: {'a b': x}, expect: {status: 1}}").contains("header `a b`"));
    assert!(bad("{headers: [x], expect: {status: 1}}").contains("`headers` is a mapping"));
    assert!(bad("{expect: {}}").contains("`expect` needs `status`, `headers` or `body`"));
    assert!(bad("{}").contains("expect"), "{}", bad("{}"));
    assert!(bad("{expect: {status: 1, code: 2}}").contains("code"));
    // Placeholders must name captures of earlier steps.
    let e = bad("{session: '${nope}', expect: {status: 1}}");
    assert!(e.contains("`${nope}` is not defined"), "{e}");
    let two = "{expect: {headers: {mcp-session-id: {capture: other}}}}\n  - host_http: {session: '${other}', headers: {X: 'a ${other}'}, body: '${other}', expect: {status: 1}}";
    parse(&format!("{head}transports: [http]\nsteps:\n  - host_http: {two}\n")).unwrap();
    let e = first_error(&with_steps("  - host_http: {expect: {status: 403}}\n"));
    assert_eq!(e, "dir/s.yaml:7:5: `host_http` belongs to bridge scenarios (role: bridge)");
}

#[test]
fn a_precondition_that_breaks_what_the_scenario_does_not_cite_blocks_it() {
    let ok = with_steps(
        "  - handshake: {}\n  - send: {request_id: a, call_tool: {name: echo}}\n  - expect: {envelope: {request_id: a}}\n    checks: [TP-HANDSHAKE-14]\n  - expect: {envelope: {request_id: a}}\n    checks: [TP-CALL-01]\n",
    );
    let s = parse(&ok).unwrap_or_else(|e| panic!("{}", e.first()));
    let v = |ids: &[&str]| ids.iter().map(|i| (*i).to_owned()).collect::<Vec<_>>();
    // The handshake step, failing on a handshake requirement the scenario does not cite.
    assert!(s.is_precondition_failure(Some(0), &v(&["TP-HANDSHAKE-02"])));
    // A step whose checks name only handshake requirements.
    assert!(s.is_precondition_failure(Some(2), &v(&["TP-HANDSHAKE-14"])));
    // The connect, whichever step needed it first.
    assert!(s.is_precondition_failure(Some(1), &v(&["TP-CONN-01"])));
    // Not: the handshake step failing on the scenario's own requirements (its pattern), another
    // step, after the last step, or nothing named.
    let own: Vec<String> = s.requirements.iter().map(|r| r.id.to_owned()).collect();
    assert!(!s.is_precondition_failure(Some(0), &own));
    assert!(!s.is_precondition_failure(Some(3), &v(&["TP-HANDSHAKE-02"])));
    assert!(!s.is_precondition_failure(None, &v(&["TP-HANDSHAKE-02"])));
    assert!(!s.is_precondition_failure(Some(0), &[]));
    // Not in a scenario that cites the requirement: a handshake scenario that fails its handshake
    // has failed.
    let cites = ok.replacen("requirements: [", "requirements: [TP-HANDSHAKE-02, ", 1);
    let s = parse(&cites).unwrap_or_else(|e| panic!("{}", e.first()));
    assert!(!s.is_precondition_failure(Some(0), &v(&["TP-HANDSHAKE-02"])));
}

#[test]
fn a_step_names_the_requirements_it_checks_and_the_loader_checks_them() {
    let ok = with_steps(
        "  - handshake: {}\n  - send: {request_id: a, call_tool: {name: logit}}\n  - expect: {envelope: {log: {capture: entry}}}\n    checks: [TP-CALL-03]\n  - check: {capture: entry, pattern: {logger: fixture}}\n",
    );
    let s = parse(&ok).unwrap_or_else(|e| panic!("{}", e.first()));
    let ids: Vec<Vec<&str>> = s.steps.iter().map(|st| st.checks.iter().map(|r| r.id).collect()).collect();
    assert_eq!(ids, [vec![], vec![], vec!["TP-CALL-03"], vec![]]);
    // A failure at the expect breaks what it checks; elsewhere the scenario's requirements.
    assert_eq!(s.broken_by(Some(2), &[]), ["TP-CALL-03"]);
    assert_eq!(s.broken_by(Some(3), &[]), s.requirements.iter().map(|r| r.id).collect::<Vec<_>>());
    assert_eq!(s.broken_by(Some(0), &["TP-HANDSHAKE-02"]), ["TP-HANDSHAKE-02"]);
    // Unknown IDs, the other party's IDs, and two keywords in one step are errors with places.
    let e = first_error(&ok.replace("checks: [TP-CALL-03]", "checks: [TP-NOPE-01]"));
    assert!(e.contains("dir/s.yaml:") && e.contains("TP-NOPE-01"), "{e}");
    let e = first_error(&ok.replace("checks: [TP-CALL-03]", "checks: [BR-CALL-01]"));
    assert!(e.contains("BR-CALL-01 is an obligation of a bridge"), "{e}");
    let e = first_error(&ok.replace("checks: [TP-CALL-03]", "send: {request_id: b}"));
    assert!(e.contains("a step has one keyword"), "{e}");
    // `check` needs an earlier capture.
    let e = first_error(&ok.replace("capture: entry}}}", "capture: other}}}"));
    assert!(e.contains("`${entry}` is not defined") || e.contains("entry"), "{e}");
}

#[test]
fn a_judging_step_of_a_multi_requirement_scenario_must_name_what_it_checks() {
    let head = "id: calls.echo\ntitle: Echo\nrequirements: [TP-CALL-01, TP-CALL-03]\nlevel: MUST\nrole: tool-process\nsteps:\n";
    let steps = "  - handshake: {}\n  - send: {request_id: a, call_tool: {name: echo, arguments_json: {text: x}}}\n  - expect: {envelope: {request_id: a, call_result: {capture: r}}}\n    checks: [TP-CALL-01]\n  - check: {capture: r, pattern: {result_json: {json: [{type: text, text: x}]}}}\n    checks: [TP-CALL-03]\n  - sleep: {ms: 1}\n  - expect_nothing: {for_ms: 10}\n    checks: [TP-CALL-01]\n";
    // Every judging step names its requirements; sends, sleeps and a plain handshake (which
    // names what it saw broken itself) need not.
    let ok = format!("{head}{steps}");
    parse(&ok).unwrap_or_else(|e| panic!("{}", e.first()));
    // Without them, each judging step is refused at its place, with the requirements to choose from.
    let bare = ok.replace("    checks: [TP-CALL-01]\n", "");
    let e = parse(&bare).unwrap_err();
    let got: Vec<String> = e.iter().map(ToString::to_string).collect();
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(
        got[0],
        "dir/s.yaml:9:5: `expect` judges the target in a scenario citing several requirements: name the one(s) it checks with `checks:` (of TP-CALL-01, TP-CALL-03, or another requirement the step is about)"
    );
    assert!(got[1].starts_with("dir/s.yaml:13:5: `expect_nothing` judges the target"), "{}", got[1]);
    let e = first_error(&ok.replace("    checks: [TP-CALL-03]\n", ""));
    assert!(e.starts_with("dir/s.yaml:11:5: `check` judges the target"), "{e}");
    // A handshake with its own tool_list pattern leaves that pattern to the step's checks.
    let e = first_error(&ok.replace("handshake: {}", "handshake: {tool_list: {tools: {includes: [{name: echo}]}}}"));
    assert!(e.starts_with("dir/s.yaml:7:5: `handshake` judges the target"), "{e}");
    // A scenario citing one requirement: every step inherits it.
    let single = bare.replace("[TP-CALL-01, TP-CALL-03]", "[TP-CALL-01]").replace("    checks: [TP-CALL-03]\n", "");
    parse(&single).unwrap_or_else(|e| panic!("{}", e.first()));
}

#[test]
fn the_scenarios_let_through_without_checks_are_the_unconverted_ones() {
    use protomcp_harness::scenario::UNATTRIBUTED;
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut all = load_dir(&root).unwrap_or_else(|e| panic!("{e}"));
    all.extend(load_dir(&root.join("proto-mcp")).unwrap_or_else(|e| panic!("{e}")));
    let mut seen = std::collections::HashSet::new();
    for id in UNATTRIBUTED {
        assert!(seen.insert(*id), "{id} is listed twice in UNATTRIBUTED");
        let s =
            all.iter().find(|s| s.id == *id).unwrap_or_else(|| panic!("UNATTRIBUTED names {id}, which no scenario is"));
        assert!(
            !s.unattributed_steps().is_empty(),
            "{id} ({}) names what every judging step checks: take it off UNATTRIBUTED (scenario/src/model/unattributed.rs)",
            s.file.display()
        );
    }
    // The tool-process catalogue is converted: only bridge and proto-mcp scenarios wait.
    for s in &all {
        if UNATTRIBUTED.contains(&s.id.as_str()) {
            assert!(s.role == Role::Bridge || s.file.components().any(|c| c.as_os_str() == "proto-mcp"), "{}", s.id);
        }
    }
}
