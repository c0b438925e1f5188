use super::*;

/// A bridge (played here on the other end of the socket) that pulls a list on demand while
/// the harness waits for something else: the pull is answered at once by `poll_pulls`, and
/// the frame after it is kept for the step that reads next.
#[tokio::test]
async fn a_list_pull_after_the_handshake_is_answered_while_other_frames_wait_for_their_step() {
    use tokio::io::AsyncReadExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let scenario = crate::scenario::parse_str(
        std::path::Path::new("t.yaml"),
        "id: t.pull\ntitle: t\nrequirements: [BR-HANDSHAKE-09]\nlevel: MUST\nrole: bridge\nsteps:\n  - expect: {envelope: {arm: call_tool}}\n",
    )
    .unwrap();
    let proc = Proc::Task { handle: tokio::spawn(std::future::pending::<i32>()), ended: None };
    let mut ex = Exec::new(&scenario, 1.0, &[], false, listener, proc);
    ex.lists = Some(PullAnswers { resources: json!([]), templates: json!([]), prompts: json!([{"name": "greet"}]) });
    let bridge = tokio::spawn(async move {
        let mut s = tokio::net::UnixStream::connect(&path).await.unwrap();
        let pull = env::list_prompts().with_rid("req-7");
        let call = env::call_tool_with_progress("echo", "{}", "").with_rid("req-8");
        for e in [pull, call] {
            s.write_all(&e.to_frame()).await.unwrap();
        }
        let mut len = [0u8; 4];
        s.read_exact(&mut len).await.unwrap();
        let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
        s.read_exact(&mut body).await.unwrap();
        let reply: protomcp_proto::pb::Envelope = prost::Message::decode(&body[..]).unwrap();
        (reply.request_id.clone(), reply.arm().map(|a| a.name()))
    });
    ex.ensure_conn().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while ex.stash.is_empty() && Instant::now() < deadline {
        ex.poll_pulls().await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (rid, arm) =
        tokio::time::timeout(Duration::from_secs(5), bridge).await.expect("the pull was answered within 5 s").unwrap();
    assert_eq!((rid.as_str(), arm), ("req-7", Some("prompt_list_response")), "the pull got its answer");
    let v = ex.next_required(Instant::now() + Duration::from_secs(1), Duration::from_secs(1), &[]).await.unwrap();
    assert_eq!(arm_of(&v), Some("call_tool"), "the frame after the pull waits for the next step: {v}");
    assert!(
        ex.transcript.tail(10).iter().any(|l| l.contains("a list pull: answered by the harness")),
        "{:?}",
        ex.transcript.tail(10)
    );
}

/// A scenario of `role` whose steps are `steps`, its socket's path, and the listener on it.
fn scripted(
    role: &str,
    requirement: &str,
    steps: &str,
) -> (tempfile::TempDir, Scenario, std::path::PathBuf, UnixListener) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let yaml = format!("id: t.x\ntitle: t\nrequirements: [{requirement}]\nlevel: MUST\nrole: {role}\nsteps:\n{steps}");
    let scenario = crate::scenario::parse_str(std::path::Path::new("t.yaml"), &yaml).unwrap();
    (dir, scenario, path, listener)
}

/// A peer that connects to `path`, writes `bytes`, then closes (`close`) or stays until the
/// harness closes.
fn peer(path: std::path::PathBuf, bytes: Vec<u8>, close: bool) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        use tokio::io::AsyncReadExt;
        let mut s = tokio::net::UnixStream::connect(&path).await.unwrap();
        s.write_all(&bytes).await.unwrap();
        if !close {
            let mut sink = Vec::new();
            let _ = s.read_to_end(&mut sink).await;
        }
    })
}

/// `[RawHeader for call "c1" announcing `size`][payload]`.
fn sideband_announcing(size: u64, payload: &[u8]) -> Vec<u8> {
    let header = protomcp_proto::pb::RawHeader {
        request_id: "c1".into(),
        field_name: "result_json".into(),
        size,
        compression: String::new(),
        uncompressed_size: 0,
    };
    let mut out = protomcp_proto::pb::Envelope::from(header).to_frame().to_vec();
    out.extend_from_slice(payload);
    out
}

const RESULT: &[u8] = br#"[{"type":"text","text":"hi"}]"#;

async fn run(ex: &mut Exec<'_>) -> (String, Duration) {
    let started = std::time::Instant::now();
    let r = tokio::time::timeout(Duration::from_secs(30), ex.run_steps()).await.expect("the steps end");
    match r {
        Err(StepError::Fail(m)) => (m, started.elapsed()),
        other => panic!("expected a failure, got {other:?}"),
    }
}

fn task() -> Proc {
    Proc::Task { handle: tokio::spawn(std::future::pending::<i32>()), ended: None }
}

#[tokio::test]
async fn a_sideband_payload_shorter_than_its_size_is_named_when_the_next_frame_arrives_not_at_the_deadline() {
    let (_dir, s, path, listener) =
        scripted("tool-process", "TP-CALL-01", "  - expect: {within_ms: 20000, envelope: {request_id: c1}}\n");
    let mut bytes = sideband_announcing(RESULT.len() as u64 + 6, RESULT);
    bytes.extend_from_slice(&env::log("info", "t", "\"after\"").to_frame());
    let _peer = peer(path, bytes, false);
    let mut ex = Exec::new(&s, 1.0, &[], false, listener, task());
    let (m, took) = run(&mut ex).await;
    assert!(m.contains("TP-SIDEBAND-01 [MUST] broken by the tool process"), "{m}");
    assert!(m.contains(&format!("payload of {} bytes, shorter than the {}", RESULT.len(), RESULT.len() + 6)), "{m}");
    assert_eq!(ex.broken(), ["TP-SIDEBAND-01"], "the rule broken, not what the step checks");
    assert!(took < Duration::from_secs(10), "named when the bytes arrived, after {took:?}");
}

#[tokio::test]
async fn a_sideband_payload_short_of_its_size_when_the_peer_goes_quiet_or_closes_is_named() {
    // Quiet: the step's time runs out, and its failure says what was left unfinished.
    let (_dir, s, path, listener) =
        scripted("tool-process", "TP-CALL-01", "  - expect: {within_ms: 300, envelope: {request_id: c1}}\n");
    let _peer = peer(path, sideband_announcing(RESULT.len() as u64 + 6, RESULT), false);
    let mut ex = Exec::new(&s, 1.0, &[], false, listener, task());
    let (m, _) = run(&mut ex).await;
    let want = format!("has {} of the {} bytes its RawHeader.size announced", RESULT.len(), RESULT.len() + 6);
    assert!(m.contains("nothing arrived within 300ms; the tool process sent no more") && m.contains(&want), "{m}");
    assert_eq!(ex.broken(), ["TP-CALL-01"], "a quiet peer may be slow: the step's own requirement");
    // Closed: the connection ended inside the payload.
    let (_dir, s, path, listener) =
        scripted("tool-process", "TP-CALL-01", "  - expect: {within_ms: 20000, envelope: {request_id: c1}}\n");
    let _peer = peer(path, sideband_announcing(RESULT.len() as u64 + 6, RESULT), true);
    let mut ex = Exec::new(&s, 1.0, &[], false, listener, task());
    let (m, _) = run(&mut ex).await;
    assert!(m.contains("TP-SIDEBAND-01 [MUST] broken by the tool process: the tool process's stream ended inside the sideband payload"), "{m}");
    assert_eq!(ex.broken(), ["TP-SIDEBAND-01"]);
}

#[tokio::test]
async fn stream_chunks_past_their_total_are_named_when_they_arrive() {
    let (_dir, s, path, listener) =
        scripted("tool-process", "TP-CALL-01", "  - expect: {within_ms: 20000, envelope: {request_id: c1}}\n");
    let mut bytes = Vec::new();
    let header = protomcp_proto::pb::StreamHeader { field_name: "result_json".into(), total_size: 4, chunk_size: 64 };
    bytes.extend_from_slice(&protomcp_proto::pb::Envelope::from(header).with_rid("c1").to_frame());
    let chunk = protomcp_proto::pb::StreamChunk { data: RESULT.to_vec().into(), r#final: false };
    bytes.extend_from_slice(&protomcp_proto::pb::Envelope::from(chunk).with_rid("c1").to_frame());
    let _peer = peer(path, bytes, false);
    let mut ex = Exec::new(&s, 1.0, &[], false, listener, task());
    let (m, took) = run(&mut ex).await;
    assert!(m.contains("TP-STREAM-04 [MUST] broken by the tool process: total_size 4 but"), "{m}");
    assert_eq!(ex.broken(), ["TP-STREAM-04"]);
    assert!(took < Duration::from_secs(10), "{took:?}");
}

#[tokio::test]
async fn in_a_bridge_run_the_frames_on_the_tool_side_are_the_bridges() {
    // A length prefix far above MAX_FRAME.
    let (_dir, s, path, listener) = scripted("bridge", "BR-HANDSHAKE-01", "  - tool_handshake: {}\n");
    let _peer = peer(path, vec![0xff, 0xff, 0xff, 0xff], false);
    let mut ex = Exec::new(&s, 1.0, &[], false, listener, task());
    ex.ensure_conn().await.unwrap();
    let e = ex.next_required(Instant::now() + Duration::from_secs(5), Duration::from_secs(5), &[]).await;
    let Err(StepError::Fail(m)) = e else { panic!("{e:?}") };
    assert!(m.starts_with("BR-FRAME-04 [MUST] broken by the bridge: the bridge sent a frame"), "{m}");
    assert!(!m.contains("tool process"), "{m}");
    assert_eq!(ex.broken(), ["BR-FRAME-04"]);
    // A RawHeader, which only a tool process sends: a frame of the bridge, not a payload's start.
    let (_dir, s, path, listener) = scripted("bridge", "BR-HANDSHAKE-01", "  - tool_handshake: {}\n");
    let _peer = peer(path, sideband_announcing(RESULT.len() as u64, RESULT), false);
    let mut ex = Exec::new(&s, 1.0, &[], false, listener, task());
    ex.ensure_conn().await.unwrap();
    let e = ex.next_required(Instant::now() + Duration::from_secs(5), Duration::from_secs(5), &[]).await;
    let Err(StepError::Fail(m)) = e else { panic!("{e:?}") };
    assert!(m.starts_with("BR-SIDEBAND-10 [MUST] broken by the bridge: the bridge sent a raw_header frame"), "{m}");
    // The same bytes from a tool process are its sideband transfer.
    let (_dir, s, path, listener) =
        scripted("tool-process", "TP-CALL-01", "  - expect: {within_ms: 5000, envelope: {request_id: c1}}\n");
    let _peer = peer(path, sideband_announcing(RESULT.len() as u64, RESULT), false);
    let mut ex = Exec::new(&s, 1.0, &[], false, listener, task());
    tokio::time::timeout(Duration::from_secs(10), ex.run_steps()).await.unwrap().unwrap();
}

#[tokio::test]
async fn in_a_tool_process_run_the_frames_are_the_tool_processes() {
    let (_dir, s, path, listener) =
        scripted("tool-process", "TP-CALL-01", "  - expect: {within_ms: 5000, envelope: {request_id: c1}}\n");
    let _peer = peer(path, vec![0xff, 0xff, 0xff, 0xff], false);
    let mut ex = Exec::new(&s, 1.0, &[], false, listener, task());
    let (m, _) = run(&mut ex).await;
    assert!(m.contains("TP-FRAME-04 [MUST] broken by the tool process: the tool process sent a frame"), "{m}");
    assert_eq!(ex.broken(), ["TP-FRAME-04"]);
}
