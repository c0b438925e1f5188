use super::*;
use http_body_util::BodyExt;
use hyper::body::{Bytes, Frame};

/// A response body as rmcp's event stream of one request: `events`, then nothing more and
/// no end (rmcp would close it later, from another task).
fn stream_of(events: &[&str]) -> HttpBody {
    let frames: Vec<Result<Frame<Bytes>, std::convert::Infallible>> =
        events.iter().map(|e| Ok(Frame::data(Bytes::from(e.to_string())))).collect();
    let s = futures_util::stream::StreamExt::chain(futures_util::stream::iter(frames), futures_util::stream::pending());
    http_body_util::StreamBody::new(s).boxed()
}

fn until_answer(events: &[&str], id: Value) -> (UntilAnswer, Registry) {
    let registry: Registry = Arc::default();
    let call = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "method": "ping"})).unwrap();
    assert_eq!(registry.gates.check("s", &call), (Verdict::Pass, Some(id.clone())));
    let release = Release { registry: registry.clone(), session: "s".into(), id };
    (UntilAnswer { inner: stream_of(events), release: Some(release) }, registry)
}

#[tokio::test]
async fn a_request_stream_ends_with_its_answer_and_frees_the_id() {
    let priming = "data: \nid: 0/1\nretry: 3000\n\n";
    let answer = "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\nid: 1/1\n\n";
    let (body, registry) = until_answer(&[priming, answer], json!(7));
    let all = tokio::time::timeout(std::time::Duration::from_secs(5), body.collect()).await;
    let all = all.expect("the body ends after the answer, without waiting for rmcp").unwrap().to_bytes();
    assert_eq!(all, format!("{priming}{answer}").as_bytes());
    // The id is free again.
    let again = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 7, "method": "ping"})).unwrap();
    assert_eq!(registry.gates.check("s", &again), (Verdict::Pass, Some(json!(7))));
}

#[tokio::test]
async fn a_quick_answer_goes_out_in_one_frame_with_the_priming_event() {
    let priming = "data: \nid: 0/1\nretry: 3000\n\n";
    let answer = "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\nid: 1/1\n\n";
    let (body, _registry) = until_answer(&[priming, answer], json!(7));
    let mut held = Held::gather(body).await;
    let first = held.frame().await.unwrap().unwrap().into_data().unwrap();
    assert_eq!(first, format!("{priming}{answer}").as_bytes());
    assert!(held.frame().await.is_none());
    // A slow call: its stream starts with what came, and stays open.
    let (body, _registry) = until_answer(&[priming], json!(7));
    let mut held = Held::gather(body).await;
    assert_eq!(held.frame().await.unwrap().unwrap().into_data().unwrap(), priming.as_bytes());
    assert!(!hyper::body::Body::is_end_stream(&held));
}

#[tokio::test]
async fn a_request_stream_stays_open_until_its_own_answer() {
    // A progress notification, a request of the bridge's with the same id, another id's answer.
    let events = [
        "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":7,\"progress\":1}}\n\n",
        "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"roots/list\"}\n\n",
        "data: {\"jsonrpc\":\"2.0\",\"id\":\"7\",\"result\":{}}\n\n",
    ];
    let (mut body, _registry) = until_answer(&events, json!(7));
    for _ in events {
        assert!(body.frame().await.is_some());
    }
    assert!(!hyper::body::Body::is_end_stream(&body));
    let more = tokio::time::timeout(std::time::Duration::from_millis(100), body.frame()).await;
    assert!(more.is_err(), "the stream is still open");
}
