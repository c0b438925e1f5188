//! The names of the reference testee's hostile modes (`--misbehave KIND`, a scenario's
//! `misbehave:`): which kinds exist, their command-line names and one-line summaries. What each
//! kind does is the testee's (`protomcp_harness::testee::misbehave`).

/// One hostile behaviour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Misbehave {
    /// Stays alive and never connects to `PROTOMCP_SOCKET` (not even when it is unset): for
    /// startup watchdogs (BR-CONN-10).
    NeverConnect,
    /// Connects, reads everything, and never writes a byte; exits when the bridge closes.
    Silent,
    /// Connects and at once writes 4 KiB of pseudo-random bytes that are not protocol (the
    /// first byte is non-zero, so the first "length prefix" is far above `MAX_FRAME`); then
    /// reads until the bridge closes.
    Garbage,
    /// Connects, writes the length prefix `FF FF FF FF` (4 GiB) and then stays silent, reading
    /// until the bridge closes (BR-FRAME-03).
    HugePrefix,
    /// Writes everything one byte per second: a peer that is alive but hopelessly slow.
    Drip,
    /// Answers every tool call under a different rid (`wrong-<rid>`): the reply to a call
    /// never arrives under the call's rid (BR-CALL-17).
    WrongRid,
    /// Answers every tool call twice (BR-CALL-17: the second result must be discarded).
    AnswerTwice,
    /// Exits at once with status 3, without answering, when a CallToolRequest for `slow`
    /// arrives: a crash while a call is in flight (BR-LIFECYCLE-03).
    CrashMidCall,
    /// After the handshake sends LogMessages as fast as the socket takes them and never stops,
    /// while still answering requests: a flood, for the bounds of every buffer a peer fills.
    Flood,
    /// Installs a SIGTERM handler that ignores the signal: teardown must escalate to SIGKILL
    /// (BR-LIFECYCLE-09/10).
    IgnoreSigterm,
    /// Starts `sleep 3600` as a child in the testee's own process group and leaves it running
    /// when the testee exits: a leftover companion process (TP-LIFECYCLE-03) that teardown must find.
    Grandchild,
    /// Opens a file (its own executable) and never closes it for every CancelRequest that names
    /// a call: one fd leaked per cancelled call, otherwise conforming. The planted leak a soak
    /// must report as LEAK with its rate.
    LeakFdPerCancel,
}

impl Misbehave {
    /// Every kind with its command-line name, in documentation order.
    pub const ALL: &'static [(Misbehave, &'static str)] = &[
        (Misbehave::NeverConnect, "never-connect"),
        (Misbehave::Silent, "silent"),
        (Misbehave::Garbage, "garbage"),
        (Misbehave::HugePrefix, "huge-prefix"),
        (Misbehave::Drip, "drip"),
        (Misbehave::WrongRid, "wrong-rid"),
        (Misbehave::AnswerTwice, "answer-twice"),
        (Misbehave::CrashMidCall, "crash-mid-call"),
        (Misbehave::Flood, "flood"),
        (Misbehave::IgnoreSigterm, "ignore-sigterm"),
        (Misbehave::Grandchild, "grandchild"),
        (Misbehave::LeakFdPerCancel, "leak-fd-per-cancel"),
    ];

    /// The command-line names of every kind.
    pub const NAMES: &'static [&'static str] = &[
        "never-connect",
        "silent",
        "garbage",
        "huge-prefix",
        "drip",
        "wrong-rid",
        "answer-twice",
        "crash-mid-call",
        "flood",
        "ignore-sigterm",
        "grandchild",
        "leak-fd-per-cancel",
    ];

    /// One line for `--help`.
    pub fn summary(self) -> &'static str {
        match self {
            Misbehave::NeverConnect => "stay alive and never connect",
            Misbehave::Silent => "connect and never write",
            Misbehave::Garbage => "write 4 KiB of random non-protocol bytes after connecting",
            Misbehave::HugePrefix => "write the length prefix FF FF FF FF, then stay silent",
            Misbehave::Drip => "write everything one byte per second",
            Misbehave::WrongRid => "answer tool calls under a different rid",
            Misbehave::AnswerTwice => "answer every tool call twice",
            Misbehave::CrashMidCall => "exit with status 3 when a call of `slow` arrives",
            Misbehave::Flood => "send LogMessages without end after the handshake",
            Misbehave::IgnoreSigterm => "ignore SIGTERM",
            Misbehave::Grandchild => "leave `sleep 3600` running in the process group",
            Misbehave::LeakFdPerCancel => "leak one open file for every cancelled call",
        }
    }

    /// The command-line name.
    pub fn name(self) -> &'static str {
        Misbehave::ALL.iter().find(|(m, _)| *m == self).map_or("?", |(_, n)| n)
    }
}

impl std::fmt::Display for Misbehave {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is no [`Misbehave`] kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown misbehaviour {0:?}; one of: {names}", names = Misbehave::NAMES.join(", "))]
pub struct UnknownMisbehave(pub String);

impl std::str::FromStr for Misbehave {
    type Err = UnknownMisbehave;

    fn from_str(s: &str) -> Result<Self, UnknownMisbehave> {
        Misbehave::ALL.iter().find(|(_, n)| *n == s).map(|(m, _)| *m).ok_or_else(|| UnknownMisbehave(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        assert_eq!(Misbehave::ALL.len(), Misbehave::NAMES.len());
        for ((m, n), listed) in Misbehave::ALL.iter().zip(Misbehave::NAMES) {
            assert_eq!(n, listed);
            assert_eq!(n.parse::<Misbehave>(), Ok(*m));
            assert_eq!(m.to_string(), *n);
        }
        assert!("nope".parse::<Misbehave>().unwrap_err().to_string().contains("never-connect"));
    }
}
