//! `Arbitrary` for [`Op`], for the `session_ops` fuzz target.
use super::{Args, Extra, Noise, Op, Request, RidKind, Tool};
use arbitrary::{Arbitrary, Result, Unstructured};

fn pick<T: Copy>(u: &mut Unstructured<'_>, all: &[T]) -> Result<T> {
    Ok(*u.choose(all)?)
}

impl<'a> Arbitrary<'a> for RidKind {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        Ok(match u.int_in_range(0u8..=4)? {
            0 => RidKind::Plain,
            1 => RidKind::Long,
            2 => RidKind::Unicode,
            3 => RidKind::Control,
            _ => RidKind::Reuse(u.arbitrary()?),
        })
    }
}

impl<'a> Arbitrary<'a> for Op {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        Ok(match u.int_in_range(0u8..=5)? {
            0 => Op::Call {
                tool: pick(u, Tool::ALL)?,
                args: pick(u, Args::ALL)?,
                rid: u.arbitrary()?,
                progress: u.arbitrary()?,
                extra: pick(u, &[Extra::None, Extra::UnknownFields, Extra::Namespace])?,
            },
            1 => Op::Request { req: pick(u, Request::ALL)?, rid: u.arbitrary()? },
            2 => Op::Cancel { pick: u.arbitrary()?, envelope_rid: u.arbitrary()? },
            3 => Op::Noise(match u.int_in_range(0u8..=4)? {
                0 => Noise::WrongDirection { arm: u.arbitrary()?, seed: u.arbitrary()? },
                1 => Noise::UnsolicitedReply(u.arbitrary()?),
                2 => Noise::UnknownArm(u.arbitrary()?),
                3 => Noise::EmptyEnvelope,
                _ => Noise::ZeroLength,
            }),
            4 => Op::Sync,
            _ => Op::Alive,
        })
    }
}
