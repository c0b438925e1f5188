//! The `soak` step: its defaults, the unit its rate is named in, and the mixes and sample plans
//! the loader refuses (each with its place in the file).

use std::path::Path;
use std::time::Duration;

use protomcp_harness::scenario::{Action, SoakCall, parse_str};

const HEAD: &str =
    "id: soak.x\ntitle: X\nrequirements: [TP-CALL-01]\nlevel: MUST\nrole: tool-process\nsteps:\n  - handshake: {}\n";

fn load(step: &str) -> Result<protomcp_harness::scenario::Scenario, String> {
    parse_str(Path::new("dir/s.yaml"), &format!("{HEAD}{step}")).map_err(|e| e.first().to_string())
}

fn soak(step: &str) -> protomcp_harness::scenario::Soak {
    let s = load(step).unwrap();
    let Action::Soak(k) = &s.steps[1].action else { panic!("{:?}", s.steps[1].action) };
    k.clone()
}

#[test]
fn a_soak_samples_every_twentieth_of_its_rounds_after_a_tenth_by_default() {
    let k = soak("  - soak: {repeat: 1000, mix: [echo]}\n");
    assert_eq!((k.repeat, k.sample_every, k.warmup), (1000, 50, 100));
    assert_eq!(k.within, Duration::from_secs(5));
    assert_eq!(k.mix, [SoakCall::Echo]);
    let k = soak("  - soak: {repeat: 40, mix: [cancel, cancel], sample_every: 2, warmup: 4, within_ms: 800}\n");
    assert_eq!((k.sample_every, k.warmup, k.within), (2, 4, Duration::from_millis(800)));
}

#[test]
fn the_rate_is_named_per_call_of_a_one_kind_mix_and_per_round_of_a_mixed_one() {
    let k = soak("  - soak: {repeat: 40, mix: [cancel, cancel, cancel, cancel, cancel]}\n");
    assert_eq!(k.unit(), ("cancelled call".to_owned(), 5));
    let k = soak("  - soak: {repeat: 40, mix: [echo, sideband, echo]}\n");
    assert_eq!(k.unit(), ("round of the mix (2 echo calls, 1 sideband-sized result)".to_owned(), 1));
}

#[test]
fn unknown_calls_a_mixed_reload_and_too_few_samples_after_the_warm_up_are_refused() {
    let e = load("  - soak: {repeat: 10, mix: [echo, upload]}\n").unwrap_err();
    assert!(e.starts_with("dir/s.yaml:8:") && e.contains("unknown call `upload`"), "{e}");
    let e = load("  - soak: {repeat: 10, mix: [reload, echo]}\n").unwrap_err();
    assert!(e.contains("`reload` stands alone"), "{e}");
    let e = load("  - soak: {repeat: 10, mix: []}\n").unwrap_err();
    assert!(e.contains("at least one call"), "{e}");
    let e = load("  - soak: {repeat: 0, mix: [echo]}\n").unwrap_err();
    assert!(e.contains("at least 1"), "{e}");
    // 100 rounds sampled every 40 after a warm-up of 50: rounds 80 and 100 only.
    let e = load("  - soak: {repeat: 100, mix: [echo], sample_every: 40, warmup: 50}\n").unwrap_err();
    assert!(e.contains("leaves 2 samples to judge; at least 4"), "{e}");
    let e = load("  - soak: {repeat: 100, mix: [echo], times: 3}\n").unwrap_err();
    assert!(e.contains("times"), "{e}");
    // Every sample is kept: a plan of more than 10,000 is refused before anything runs.
    let e = load("  - soak: {repeat: 1000000, mix: [echo], sample_every: 10}\n").unwrap_err();
    assert!(e.starts_with("dir/s.yaml:8:") && e.contains("takes 100000 samples; at most 10000"), "{e}");
    soak("  - soak: {repeat: 100000, mix: [echo], sample_every: 10}\n");
}
