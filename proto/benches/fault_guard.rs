//! `cargo bench -p protomcp-proto --bench fault_guard`
//!
//! What the fault catalogue (issue 29, `protomcp_proto::fault`) costs when no fault is named:
//! `frame::encode_frame_into`, which checks for faults on every frame, against the same encoder
//! without the checks (`encode_message_frame_into_unguarded`, kept in the library as it was
//! before the catalogue so both are compiled alike), on the same Envelopes. The two run in
//! alternating rounds in one process, so machine noise hits both alike; the report is the ratio of
//! their medians (guarded / unguarded: 1.00 means no cost). docs/adequacy.md has the figures.

use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use protomcp_proto::envelopes as env;
use protomcp_proto::frame::{MAX_FRAME, encode_frame_into, encode_message_frame_into_unguarded};
use protomcp_proto::pb::Envelope;

/// The encoder as it was before the fault checks (kept in the library, so that both are compiled
/// alike).
fn unguarded(e: &Envelope, dst: &mut BytesMut) {
    encode_message_frame_into_unguarded(e, MAX_FRAME, dst).expect("fits");
}

fn guarded(e: &Envelope, dst: &mut BytesMut) {
    encode_frame_into(e, MAX_FRAME, dst).expect("fits");
}

fn round(f: fn(&Envelope, &mut BytesMut), envelopes: &[Envelope], dst: &mut BytesMut) -> Duration {
    let start = Instant::now();
    for _ in 0..20 {
        dst.clear();
        for e in envelopes {
            f(black_box(e), dst);
        }
        black_box(&dst);
    }
    start.elapsed()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    assert_eq!(protomcp_proto::fault::active(), None, "no fault is named in a benchmark");
    let envelopes: Vec<Envelope> = (0..10_000)
        .map(|i| match i % 3 {
            0 => env::call_result_text(&format!("result {i}")),
            1 => env::progress("tok", i, 100, "step"),
            _ => env::log("info", "bench", "\"a log line\""),
        })
        .collect();
    let mut dst = BytesMut::with_capacity(1 << 20);
    // Warm-up, then alternate.
    round(guarded, &envelopes, &mut dst);
    round(unguarded, &envelopes, &mut dst);
    let (mut g, mut u) = (Vec::new(), Vec::new());
    for _ in 0..101 {
        g.push(round(guarded, &envelopes, &mut dst));
        u.push(round(unguarded, &envelopes, &mut dst));
    }
    let (g, u) = (median(g), median(u));
    let per = |d: Duration| d.as_nanos() as f64 / (20.0 * envelopes.len() as f64);
    println!(
        "encode_frame_into, 10,000 small Envelopes x 20: guarded {:.1} ns/frame, unguarded {:.1} ns/frame, ratio {:.3}",
        per(g),
        per(u),
        g.as_secs_f64() / u.as_secs_f64()
    );
}
