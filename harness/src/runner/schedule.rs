//! Delivery schedules: how the bytes the harness writes reach the socket. The same frames, cut
//! and timed differently, must be read the same way by a peer (TP-FRAME-01/02: a frame may
//! arrive in any number of reads, several frames in one).
//!
//! - `whole` (default): each frame (each step's bytes) with one write;
//! - `split1`: one byte per write;
//! - `coalesce`: writes are held back and sent as one write when the harness next waits for the
//!   peer (an `expect…` step, a sleep, a close), so several frames share one write;
//! - `random:SEED`: each write cut at seeded random places (sometimes the 4-byte prefix alone,
//!   sometimes single bytes), with seeded pauses of up to 3 ms between the pieces.
//!
//! The schedule of a run is process-wide ([`set`]), chosen once by the command line; every
//! transcript records it as its first item.

use std::sync::RwLock;
use std::time::Duration;

/// A delivery schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Schedule {
    #[default]
    Whole,
    Split1,
    Coalesce,
    Random(u64),
}

/// A `--schedule` value that names no schedule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown schedule {0:?}: whole, split1, coalesce or random:SEED")]
pub struct UnknownSchedule(pub String);

impl Schedule {
    /// `whole`, `split1`, `coalesce`, `random:SEED`.
    pub fn parse(s: &str) -> Result<Schedule, UnknownSchedule> {
        match s {
            "whole" => Ok(Schedule::Whole),
            "split1" => Ok(Schedule::Split1),
            "coalesce" => Ok(Schedule::Coalesce),
            _ => match s.strip_prefix("random:").map(str::parse::<u64>) {
                Some(Ok(seed)) => Ok(Schedule::Random(seed)),
                _ => Err(UnknownSchedule(s.to_owned())),
            },
        }
    }

    pub fn name(self) -> String {
        match self {
            Schedule::Whole => "whole".into(),
            Schedule::Split1 => "split1".into(),
            Schedule::Coalesce => "coalesce".into(),
            Schedule::Random(s) => format!("random:{s}"),
        }
    }

    /// How `len` bytes are cut into writes, each with the pause before it; `state` carries the
    /// random schedule's generator from write to write.
    pub fn pieces(self, len: usize, state: &mut u64) -> Vec<(usize, Duration)> {
        match self {
            Schedule::Whole | Schedule::Coalesce => vec![(len, Duration::ZERO)],
            Schedule::Split1 => (0..len).map(|_| (1, Duration::ZERO)).collect(),
            Schedule::Random(seed) => {
                if *state == 0 {
                    *state = seed | 1;
                }
                let mut next = || {
                    *state ^= *state << 13;
                    *state ^= *state >> 7;
                    *state ^= *state << 17;
                    *state
                };
                let mut out = Vec::new();
                let mut at = 0;
                while at < len {
                    let left = len - at;
                    let n = match next() % 4 {
                        0 => 4.min(left),
                        1 => 1,
                        2 => 1 + (next() as usize % left),
                        _ => left,
                    };
                    let pause = if next() % 3 == 0 { Duration::from_micros(next() % 3000) } else { Duration::ZERO };
                    out.push((n, pause));
                    at += n;
                }
                out
            }
        }
    }
}

static CURRENT: RwLock<Schedule> = RwLock::new(Schedule::Whole);

/// Sets the schedule of every scenario run from now on.
pub fn set(s: Schedule) {
    *CURRENT.write().unwrap_or_else(|e| e.into_inner()) = s;
}

/// The schedule in force.
pub fn current() -> Schedule {
    *CURRENT.read().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::Schedule;

    #[test]
    fn pieces_cover_the_bytes() {
        for s in [Schedule::Whole, Schedule::Split1, Schedule::Coalesce, Schedule::Random(7)] {
            let mut st = 0;
            for len in [0usize, 1, 4, 5, 100, 4096] {
                let p = s.pieces(len, &mut st);
                assert_eq!(p.iter().map(|x| x.0).sum::<usize>(), len, "{s:?} {len}");
                assert!(p.iter().all(|x| x.0 > 0 || len == 0));
            }
        }
        let mut st = 0;
        let writes: Vec<_> = (0..50).map(|_| Schedule::Random(7).pieces(1000, &mut st)).collect();
        assert!(writes.iter().map(Vec::len).sum::<usize>() > 100, "random cuts");
        assert!(writes.iter().flatten().any(|p| !p.1.is_zero()), "random pauses");
        assert!(writes.iter().any(|w| w[0].0 == 4), "sometimes the prefix alone");
        let mut again = 0;
        assert_eq!(Schedule::Random(7).pieces(1000, &mut again), writes[0], "seeded: the same cuts again");
        assert_eq!(Schedule::parse("random:9"), Ok(Schedule::Random(9)));
        assert!(Schedule::parse("random:x").is_err());
    }
}
