//! Bounded memory: hostile length fields never drive allocation. This binary installs a counting
//! global allocator (every Rust allocation) and reads the process's peak RSS (allocations inside
//! libzstd too), so each test measures what decoding really cost. The tests run one at a time.

use std::io::Write;
use std::sync::Mutex;

use bytes::BytesMut;
use protomcp_proto::envelopes::EnvelopeExt;
use protomcp_proto::frame::{Frame, FrameDecoder, FrameError, Limits};
use protomcp_proto::fuzzing::{CountingAlloc, raw_header};
use protomcp_proto::pb::{Envelope, StreamChunk, StreamHeader};
use protomcp_proto::sideband::{self, SidebandError, StreamAssembler, StreamEvent, StreamLimits};
use protomcp_proto::violation::Party;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc::new(usize::MAX);

static SERIAL: Mutex<()> = Mutex::new(());

const MIB: usize = 1 << 20;

/// Runs `f` and returns how many bytes above the starting point the Rust heap peaked at.
fn peak_during(f: impl FnOnce()) -> usize {
    let before = ALLOC.live();
    ALLOC.reset_peak();
    f();
    ALLOC.peak().saturating_sub(before)
}

/// Peak resident set (kB) since the last reset, from /proc (Linux).
fn rss_hwm_kb() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find(|l| l.starts_with("VmHWM:"))?.split_whitespace().nth(1)?.parse().ok()
}

fn reset_rss_hwm() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

#[test]
fn a_4_gib_length_prefix_allocates_nothing_for_its_body() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut d = FrameDecoder::new(Party::ToolProcess);
    let mut buf = BytesMut::with_capacity(64);
    buf.extend_from_slice(&[0xFF, 0xFF, 0xFF, 0xFF]);
    let mut result = None;
    let peak = peak_during(|| result = Some(d.decode(&mut buf)));
    assert!(matches!(result, Some(Err(FrameError::Oversize { len: u32::MAX, .. }))));
    assert!(peak < 4096, "peak {peak} bytes for a 4 GiB prefix");
}

#[test]
fn a_legal_but_unfulfilled_prefix_reserves_at_most_the_limit() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let limits = Limits { max_frame: MIB as u32, ..Limits::default() };
    let mut d = FrameDecoder::with_limits(Party::ToolProcess, limits);
    let mut buf = BytesMut::from(&(MIB as u32).to_be_bytes()[..]);
    let peak = peak_during(|| assert_eq!(d.decode(&mut buf), Ok(None)));
    assert!(peak <= 2 * MIB + 4096, "peak {peak} for a 1 MiB frame");
}

#[test]
fn a_sideband_size_of_2_pow_64_is_skipped_without_storage() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut d = FrameDecoder::new(Party::ToolProcess);
    let mut buf = BytesMut::from(&Envelope::from(raw_header("c1", u64::MAX, "zstd", u64::MAX)).to_frame()[..]);
    let peak = peak_during(|| {
        assert!(matches!(d.decode(&mut buf), Ok(Some(Frame::Envelope(_)))));
        let Ok(Some(Frame::Sideband(s))) = d.decode(&mut buf) else { panic!() };
        assert!(matches!(s.payload, Err(SidebandError::TooLarge { .. })));
        for _ in 0..64 {
            buf.extend_from_slice(&[0u8; 16 * 1024]);
            assert_eq!(d.decode(&mut buf), Ok(None));
        }
    });
    assert!(peak < 64 * 1024, "peak {peak} while skipping 1 MiB of an endless payload");
}

/// A zstd frame of `n` zero bytes, made in a streaming way (small input buffer).
fn bomb(n: usize, level: i32) -> Vec<u8> {
    let mut enc = zstd::stream::Encoder::new(Vec::new(), level).unwrap();
    enc.set_pledged_src_size(Some(n as u64)).unwrap();
    let zeros = vec![0u8; MIB];
    for _ in 0..n / MIB {
        enc.write_all(&zeros).unwrap();
    }
    enc.finish().unwrap()
}

#[test]
fn a_zip_bomb_decompresses_no_further_than_the_limit() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let bomb = bomb(1 << 30, 3); // 1 GiB of zeros
    assert!(bomb.len() < 64 * 1024, "{} bytes of bomb", bomb.len());
    let limit = 4 * MIB as u64;
    let can_measure_rss = reset_rss_hwm();
    let rss_before = rss_hwm_kb();
    let mut out = None;
    let peak = peak_during(|| out = Some(sideband::decompress_bounded(&bomb, 0, limit)));
    assert_eq!(out, Some(Err(SidebandError::DecompressedTooLarge { limit })));
    assert!(peak <= 2 * limit as usize, "Rust heap peak {peak} for a 1 GiB bomb with a 4 MiB limit");
    if let (true, Some(a), Some(b)) = (can_measure_rss, rss_before, rss_hwm_kb()) {
        // libzstd's window is capped at 8 MiB for small limits (window_log 23).
        assert!((b - a) * 1024 < 32 * MIB, "resident set grew by {} kB", b - a);
    }
}

#[test]
fn a_bomb_that_lies_about_its_size_is_caught_at_the_declared_size() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let bomb = bomb(64 * MIB, 3);
    let mut out = None;
    let peak = peak_during(|| out = Some(sideband::decompress_bounded(&bomb, 1000, 64 * MIB as u64)));
    assert!(matches!(out, Some(Err(SidebandError::SizeMismatch { declared: 1000, .. }))));
    assert!(peak < 256 * 1024, "peak {peak}: output capped at the declared 1000 bytes");
}

#[test]
fn a_window_beyond_the_limit_is_refused() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Level 22 asks for a 128 MiB window on big inputs; with a 1 MiB limit we allow 8 MiB.
    let mut enc = zstd::stream::Encoder::new(Vec::new(), 22).unwrap();
    enc.long_distance_matching(true).unwrap();
    enc.window_log(27).unwrap();
    enc.include_contentsize(false).unwrap();
    enc.write_all(&vec![7u8; 2 * MIB]).unwrap();
    let z = enc.finish().unwrap();
    let r = sideband::decompress_bounded(&z, 0, MIB as u64);
    assert!(matches!(&r, Err(SidebandError::Zstd(why)) if why.contains("memory")), "{r:?}");
}

#[test]
fn stream_total_size_is_not_trusted() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut asm = StreamAssembler::new(Party::ToolProcess, StreamLimits::default());
    let peak = peak_during(|| {
        for i in 0..100 {
            let h = StreamHeader { field_name: "result_json".into(), total_size: u64::MAX, chunk_size: u32::MAX };
            asm.handle(&Envelope::from(h).with_rid(format!("s{i}")));
            let c = StreamChunk { data: bytes::Bytes::from_static(b"x"), r#final: false };
            assert!(matches!(
                asm.handle(&Envelope::from(c).with_rid(format!("s{i}"))),
                Some(StreamEvent::Progress { .. })
            ));
        }
    });
    assert!(peak < 256 * 1024, "peak {peak} for 100 streams announcing 2^64 bytes");
}
