use super::*;
use protomcp_proto::envelopes::EnvelopeExt;

#[tokio::test]
async fn a_line_longer_than_the_bridge_reads_is_passed_on_whole_and_recorded_as_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let rec = Rec(Arc::new(Mutex::new(Recorder {
        start: Instant::now(),
        file: std::fs::File::create(dir.path().join("capture.txt")).unwrap(),
        events: Vec::new(),
        dropped: 0,
        paths: Vec::new(),
    })));
    let long = crate::limits::BRIDGE_HOST_LINE * 2 + 5;
    let mut input = vec![b'x'; long];
    input.extend_from_slice(b"\n{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"id\":1}\nlast");
    let out = relay_lines(&input[..], Vec::new(), &rec, Dir::ToTestee).await;
    assert!(out == input, "every byte passed on, in order");
    let r = rec.0.lock().unwrap();
    let items: Vec<&Item> = r.events.iter().map(|e| &e.item).collect();
    assert_eq!(items.len(), 3, "{items:?}");
    assert_eq!(items[0], &Item::Dropped { items: 1, bytes: long as u64 + 1 });
    assert!(matches!(items[1], Item::Host { message: Some(m), .. } if m["method"] == "ping"));
    assert!(matches!(items[2], Item::Host { raw: Some(l), .. } if l == "last"));
}

fn frame(e: &protomcp_proto::pb::Envelope) -> Vec<u8> {
    let mut b = BytesMut::new();
    protomcp_proto::frame::encode_frame_into(e, protomcp_proto::frame::MAX_FRAME, &mut b).unwrap();
    b.to_vec()
}

#[test]
fn the_tap_decodes_frames_split_anywhere_and_keeps_a_sideband_payload_as_sent() {
    let a = protomcp_proto::envelopes::list_tools().with_rid("r1");
    let mut bytes = frame(&a);
    let mut tap = Tap::new(Dir::FromTestee, Party::Bridge);
    let mut items = Vec::new();
    for b in bytes.chunks(3) {
        items.extend(tap.feed(b));
    }
    assert_eq!(items.len(), 1);
    assert!(matches!(&items[0], Item::Frame { tree: Some(t), hex: None, note: None, .. } if t["request_id"] == "r1"));
    // A RawHeader and its payload: the payload item carries the bytes as they came.
    let header = protomcp_proto::pb::Envelope {
        msg: Some(protomcp_proto::pb::envelope::Msg::RawHeader(protomcp_proto::pb::RawHeader {
            request_id: "c1".into(),
            field_name: "result_json".into(),
            size: 2,
            ..Default::default()
        })),
        ..Default::default()
    };
    bytes = frame(&header);
    bytes.extend_from_slice(b"[]");
    let mut tap = Tap::new(Dir::ToTestee, Party::ToolProcess);
    let items = tap.feed(&bytes);
    assert_eq!(items.len(), 2, "{items:?}");
    assert!(matches!(&items[0], Item::Frame { note: Some(n), .. } if n == SIDEBAND_HEADER));
    match &items[1] {
        Item::Frame { tree: Some(t), hex: Some(h), note: Some(n), .. } => {
            assert_eq!(n, SIDEBAND_PAYLOAD);
            assert_eq!(h, "5b 5d");
            assert_eq!(t["call_result"]["result_json"], "[]");
            assert_eq!(t["request_id"], "c1");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_frame_written_rid_first_is_kept_as_a_tree_with_its_field_order() {
    let e = protomcp_proto::envelopes::list_tools().with_rid("req-0");
    let tree = protomcp_proto::dynamic::from_envelope(&e).unwrap();
    // As Go and Python write it: request_id (14) first, then the arm.
    let body = protomcp_proto::dynamic::hex_decode("72057265712d301200").unwrap();
    let t = in_wire_order(tree.clone(), &body);
    assert_eq!(t["field_order"], serde_json::json!(["request_id", "list_tools"]));
    assert_eq!(protomcp_proto::dynamic::encode(&t).unwrap(), body);
    let items = Tap::new(Dir::FromTestee, Party::Bridge).feed(&[&[0, 0, 0, 9][..], &body].concat());
    assert!(
        matches!(&items[0], Item::Frame { tree: Some(t), hex: None, .. } if t.get("field_order").is_some()),
        "{items:?}"
    );
    // Bytes no order explains leave the tree as it was.
    assert_eq!(in_wire_order(tree.clone(), b"\x00"), tree);
}

#[test]
fn a_body_that_does_not_decode_is_recorded_and_the_next_frame_still_is() {
    let mut bytes = vec![0, 0, 0, 2, 0xff, 0xff];
    bytes.extend(frame(&protomcp_proto::envelopes::list_tools().with_rid("r2")));
    let items = Tap::new(Dir::ToTestee, Party::ToolProcess).feed(&bytes);
    assert!(matches!(&items[0], Item::Malformed { hex: Some(h), .. } if h == "ff ff"), "{items:?}");
    assert!(matches!(&items[1], Item::Frame { tree: Some(t), .. } if t["request_id"] == "r2"), "{items:?}");
}

#[test]
fn a_process_is_a_tool_process_of_the_capture_only_by_its_socket_in_the_capture_dir() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .env(crate::testee::ENV_SOCKET, dir.path().join("tp-1.sock"))
        .spawn()
        .unwrap();
    let pid = i32::try_from(child.id()).unwrap();
    // Until the child has exec'd, /proc/<pid>/environ is still this process's.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ours(pid, dir.path()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(ours(pid, dir.path()));
    assert!(!ours(pid, Path::new("/elsewhere")));
    assert!(!ours(i32::try_from(std::process::id()).unwrap(), dir.path()));
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn a_bridge_command_without_the_tool_placeholder_is_refused() {
    let l = Path::new("/x/l");
    let e = bridge_argv(&["pmcp".into(), "run".into(), "tool.py".into()], l).unwrap_err();
    assert!(e.to_string().contains("names no `{tool}`"), "{e}");
    assert!(matches!(bridge_argv(&[], l), Err(CaptureError::EmptyCommand(_))));
    assert_eq!(bridge_argv(&["b".into(), "--tool={tool}".into()], l).unwrap(), ["b", "--tool=/x/l"]);
}
