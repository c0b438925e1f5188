//! `cargo bench -p protomcp-proto --bench decode`
//!
//! Our FrameDecoder (framing + Envelope decode + unknown-field detection) against tokio-util's
//! `LengthDelimitedCodec` followed by `prost::Message::decode`, on the same bytes. The two run in
//! alternating rounds in one process, so machine noise hits both alike; the report is the ratio
//! of their medians (ours / baseline: below 1.0 means we are faster).

use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use prost::Message;
use protomcp_proto::envelopes::{self as env, EnvelopeExt};
use protomcp_proto::frame::{Frame, FrameDecoder};
use protomcp_proto::pb::Envelope;
use protomcp_proto::violation::Party;
use tokio_util::codec::{Decoder, LengthDelimitedCodec};

struct Case {
    name: &'static str,
    wire: Vec<u8>,
    frames: usize,
    body: usize,
}

fn case(name: &'static str, envelope: Envelope, frames: usize) -> Case {
    let frame = envelope.to_frame();
    let mut wire = Vec::with_capacity(frame.len() * frames);
    for _ in 0..frames {
        wire.extend_from_slice(&frame);
    }
    Case { name, wire, frames, body: frame.len() - 4 }
}

fn ours(wire: BytesMut) -> usize {
    let mut buf = wire;
    let mut d = FrameDecoder::new(Party::ToolProcess);
    let mut n = 0;
    while let Some(item) = d.decode(&mut buf).expect("valid") {
        if let Frame::Envelope(decoded) = &item {
            black_box(&decoded.envelope);
            n += 1;
        }
    }
    n
}

fn baseline(wire: BytesMut) -> usize {
    let mut buf = wire;
    let mut codec = LengthDelimitedCodec::builder().max_frame_length(10 * 1024 * 1024).new_codec();
    let mut n = 0;
    while let Some(frame) = codec.decode(&mut buf).expect("valid") {
        let envelope = Envelope::decode(frame.freeze()).expect("valid");
        black_box(&envelope);
        n += 1;
    }
    n
}

fn time(f: fn(BytesMut) -> usize, c: &Case) -> Duration {
    let input = BytesMut::from(&c.wire[..]);
    let start = Instant::now();
    let n = f(input);
    let t = start.elapsed();
    assert_eq!(n, c.frames);
    t
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    // Profiling aid: `BENCH_ONLY=ours|baseline` runs one side once per case (for callgrind).
    if let Ok(which) = std::env::var("BENCH_ONLY") {
        let small = env::call_tool("echo", r#"{"text":"hello, bench"}"#).with_rid("req-12345");
        let big = env::call_result_text(&"x".repeat(1 << 20)).with_rid("req-1");
        for c in [case("small", small, 20_000), case("big", big, 8)] {
            let f = if which == "ours" { ours } else { baseline };
            let runs: Vec<Duration> = (0..5).map(|_| time(f, &c)).collect();
            println!("{} {:?}", c.name, runs);
        }
        return;
    }
    // `cargo test --benches` runs this binary with `--bench` absent: keep that quick.
    let quick = !std::env::args().any(|a| a == "--bench");
    let rounds = if quick { 3 } else { 31 };
    let small = env::call_tool("echo", r#"{"text":"hello, bench"}"#).with_rid("req-12345");
    let big = env::call_result_text(&"x".repeat(1 << 20)).with_rid("req-1");
    let cases = [
        case("64-byte frames", small, if quick { 1000 } else { 200_000 }),
        case("1 MiB frames", big, if quick { 4 } else { 64 }),
    ];
    println!("{:<16} {:>10} {:>14} {:>14} {:>8}", "case", "body B", "ours ns/fr", "baseline ns/fr", "ratio");
    for c in &cases {
        // Warm up both paths.
        time(ours, c);
        time(baseline, c);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            // Alternate which goes first.
            if round % 2 == 0 {
                a.push(time(ours, c));
                b.push(time(baseline, c));
            } else {
                b.push(time(baseline, c));
                a.push(time(ours, c));
            }
        }
        let (ma, mb) = (median(a), median(b));
        let per = |d: Duration| d.as_nanos() as f64 / c.frames as f64;
        println!(
            "{:<16} {:>10} {:>14.1} {:>14.1} {:>8.3}",
            c.name,
            c.body,
            per(ma),
            per(mb),
            ma.as_secs_f64() / mb.as_secs_f64()
        );
    }
    if quick {
        println!("(quick run: pass --bench, as `cargo bench` does, for the real numbers)");
    }
}
