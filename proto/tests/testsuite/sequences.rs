//! Property: any sequence of Envelopes (and sideband transfers), cut into any chunks, decodes to
//! the same sequence it was encoded from.

use bytes::BytesMut;
use proptest::prelude::*;
use protomcp_proto::envelopes::{self, Arm, EnvelopeExt};
use protomcp_proto::frame::{Frame, FrameDecoder};
use protomcp_proto::pb::Envelope;
use protomcp_proto::sideband::{Compression, encode_sideband};
use protomcp_proto::violation::Party;

#[derive(Debug, Clone, PartialEq)]
enum Item {
    Envelope(Envelope),
    Sideband { rid: String, value: Vec<u8>, zstd: bool },
}

fn rid() -> impl Strategy<Value = String> {
    prop_oneof![Just(String::new()), "req-[0-9]{1,4}", "\\PC{1,12}", "[a-z]{200,1100}"]
}

fn envelope() -> impl Strategy<Value = Envelope> {
    (0..Arm::ALL.len(), prop::collection::vec(any::<u64>(), 1..64), rid(), any::<bool>()).prop_map(
        |(arm, entropy, rid, empty)| {
            if empty {
                return Envelope::default().with_rid(rid);
            }
            let mut it = entropy.into_iter().cycle();
            let mut next = move || it.next().unwrap();
            envelopes::synthesize(Arm::ALL[arm], &mut next).with_rid(rid)
        },
    )
}

fn item() -> impl Strategy<Value = Item> {
    prop_oneof![
        8 => envelope().prop_map(Item::Envelope),
        1 => ("[a-z0-9-]{1,8}", prop::collection::vec(any::<u8>(), 0..300), any::<bool>())
            .prop_map(|(rid, mut value, zstd)| {
                // A plain payload is the text of a JSON value, which has no NUL byte: the decoder
                // takes a NUL in one for where a short payload ended and frames began (and holds
                // the payload until it can tell). A zstd payload may hold any byte.
                if !zstd {
                    value.iter_mut().filter(|b| **b == 0).for_each(|b| *b = b' ');
                }
                Item::Sideband { rid, value, zstd }
            }),
    ]
}

fn encode(items: &[Item]) -> Vec<u8> {
    let mut wire = Vec::new();
    for item in items {
        match item {
            Item::Envelope(e) => wire.extend_from_slice(&e.to_frame()),
            Item::Sideband { rid, value, zstd } => {
                let c = if *zstd { Compression::Zstd { level: 1 } } else { Compression::None };
                wire.extend_from_slice(&encode_sideband(rid, "result_json", value, c).unwrap());
            }
        }
    }
    wire
}

fn decode(wire: &[u8], cuts: &[usize]) -> Vec<Item> {
    let mut d = FrameDecoder::new(Party::ToolProcess);
    let mut buf = BytesMut::new();
    let mut frames = Vec::new();
    let mut at = 0;
    let mut sizes = cuts.iter().cycle();
    while at < wire.len() {
        let n = (*sizes.next().unwrap()).min(wire.len() - at);
        buf.extend_from_slice(&wire[at..at + n]);
        at += n;
        while let Some(f) = d.decode(&mut buf).expect("valid stream") {
            frames.push(f);
        }
    }
    assert_eq!(d.decode_eof(&mut buf), Ok(None), "nothing left over");
    let mut out = Vec::new();
    let mut frames = frames.into_iter();
    while let Some(f) = frames.next() {
        match f {
            Frame::Envelope(d) if d.envelope.arm() == Some(Arm::RawHeader) => {
                let Some(Frame::Sideband(s)) = frames.next() else { panic!("payload follows its header") };
                let zstd = s.header.compression == "zstd";
                out.push(Item::Sideband { rid: s.header.request_id, value: s.payload.unwrap().to_vec(), zstd });
            }
            Frame::Envelope(d) => {
                assert!(d.wire.is_none(), "our own encoding is canonical");
                out.push(Item::Envelope(d.envelope));
            }
            Frame::Sideband(s) => panic!("payload without header: {s:?}"),
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn any_sequence_in_any_chunks_decodes_to_itself(
        items in prop::collection::vec(item(), 0..24),
        cuts in prop::collection::vec(1usize..80, 1..40),
    ) {
        // A RawHeader announces a payload whatever its Envelope rid, so RawHeaders only come
        // with their payloads, as sideband items.
        let items: Vec<Item> = items.into_iter().filter(|i| !matches!(i,
            Item::Envelope(e) if e.arm() == Some(Arm::RawHeader))).collect();
        let wire = encode(&items);
        prop_assert_eq!(decode(&wire, &cuts), items.clone());
        prop_assert_eq!(decode(&wire, &[1]), items);
    }
}
