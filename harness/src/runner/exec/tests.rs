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
