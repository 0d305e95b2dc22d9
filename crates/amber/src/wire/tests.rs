use super::*;
use proptest::prelude::*;
use crate::inspect::Show;

fn code() -> impl Strategy<Value = ErrorCode> {
    proptest::sample::select(ErrorCode::ALL.to_vec())
}

fn text() -> impl Strategy<Value = String> {
    ".{0,12}"
}

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..max)
}

fn request() -> impl Strategy<Value = Request> {
    prop_oneof![
        (any::<u16>(), text(), bytes(40)).prop_map(|(version, database, token)| {
            Request::Hello {
                version,
                database,
                token,
            }
        }),
        (any::<u64>(), any::<u64>()).prop_map(|(from, pages)| Request::Blocks { from, pages }),
        any::<u64>().prop_map(|head| Request::ReadBlock { head }),
        (any::<u64>(), any::<u64>()).prop_map(|(from, pages)| Request::ReadCluster { from, pages }),
        Just(Request::Catalog),
        Just(Request::Refresh),
        Just(Request::Stats),
        Just(Request::Bye),
        Just(Request::Begin),
        (any::<u32>(), any::<u8>()).prop_map(|(pages, kind)| Request::Alloc { pages, kind }),
        bytes(40).prop_map(|desc| Request::DefineType { desc }),
        (
            proptest::collection::vec(record(), 0..4),
            proptest::collection::vec(any::<u64>(), 0..4),
            proptest::collection::vec((text(), any::<u64>(), any::<u32>()), 0..3),
            proptest::collection::vec(any::<u64>(), 0..4),
        )
            .prop_map(|(records, frees, roots, reads)| Request::Commit {
                records,
                frees,
                roots,
                reads,
            }),
        Just(Request::Abort),
        Just(Request::Status),
        Just(Request::BackupBegin),
        (any::<u8>(), any::<u64>(), any::<u32>())
            .prop_map(|(file, offset, len)| Request::BackupRead { file, offset, len }),
        Just(Request::BackupEnd),
        any::<bool>().prop_map(|deep| Request::Verify { deep }),
        Just(Request::Checkpoint),
        Just(Request::Inspect(Show::Summary)),
        any::<u64>().prop_map(|p| Request::Inspect(Show::Page(p))),
        text().prop_map(|o| Request::Inspect(Show::Object(o))),
    ]
}

fn record() -> impl Strategy<Value = WireRecord> {
    prop_oneof![
        (any::<u64>(), bytes(24)).prop_map(|(addr, data)| WireRecord::Range { addr, data }),
        (any::<u64>(), bytes(24)).prop_map(|(page, image)| WireRecord::Page { page, image }),
        (any::<u64>(), bytes(24)).prop_map(|(page, image)| WireRecord::Cached { page, image }),
    ]
}

fn wire_block() -> impl Strategy<Value = WireBlock> {
    (
        any::<u64>(),
        any::<u32>(),
        any::<u64>(),
        proptest::option::of((code(), text())),
    )
        .prop_map(|(head, pages, at, error)| WireBlock {
            head,
            pages,
            at,
            error,
        })
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        Just(Change::Unchanged),
        (
            any::<u64>(),
            proptest::collection::vec(any::<u64>(), 0..6),
            any::<bool>()
        )
            .prop_map(|(lsn, pages, catalog)| Change::Pages {
                lsn,
                pages,
                catalog
            }),
        any::<u64>().prop_map(|lsn| Change::Everything { lsn }),
    ]
}

fn response() -> impl Strategy<Value = Response> {
    let u = any::<u64>;
    prop_oneof![
        (any::<u16>(), any::<u32>(), u(), u(), u(), u(), any::<u8>()).prop_map(
            |(v, ps, f, pc, l, h, s)| Response::Welcome {
                version: v,
                page_size: ps,
                first_data_page: f,
                page_count: pc,
                snapshot_lsn: l,
                home: h,
                scheme: s,
            }
        ),
        (code(), text()).prop_map(|(code, message)| Response::Error { code, message }),
        proptest::collection::vec((u(), any::<u32>()), 0..5).prop_map(Response::Blocks),
        bytes(64).prop_map(Response::Block),
        (proptest::collection::vec(wire_block(), 0..4), bytes(64))
            .prop_map(|(blocks, data)| Response::Cluster { blocks, data }),
        (
            proptest::collection::vec((any::<u32>(), bytes(20)), 0..4),
            proptest::collection::vec((text(), u(), any::<u32>()), 0..4),
        )
            .prop_map(|(types, roots)| Response::Catalog { types, roots }),
        (u(), change()).prop_map(|(page_count, change)| Response::Refreshed { page_count, change }),
        (u(), u(), u(), u(), u(), u(), u()).prop_map(|(a, b, c, d, e, f, g)| Response::Stats {
            snapshot_lsn: a,
            end_lsn: b,
            checkpoint_lsn: c,
            page_count: d,
            free_pages: e,
            blocks: f,
            logged_pages: g,
        }),
        (u(), change()).prop_map(|(page_count, change)| Response::Begun { page_count, change }),
        u().prop_map(|head| Response::Allocated { head }),
        any::<u32>().prop_map(|id| Response::TypeDefined { id }),
        (u(), u(), change()).prop_map(|(lsn, page_count, change)| Response::Committed {
            lsn,
            page_count,
            change,
        }),
        (u(), change(), text()).prop_map(|(page_count, change, message)| Response::Conflict {
            page_count,
            change,
            message,
        }),
        Just(Response::Aborted),
        text().prop_map(Response::Report),
        (u(), any::<u32>(), u(), u(), any::<u32>()).prop_map(|(a, b, c, d, e)| {
            Response::BackupPinned {
                snapshot_lsn: a,
                page_size: b,
                data_len: c,
                log_len: d,
                max_read: e,
            }
        }),
        bytes(64).prop_map(Response::BackupBytes),
        Just(Response::BackupDone),
    ]
}

/// The body of a whole frame, checking that its prefix says its length.
fn body(frame: &[u8]) -> &[u8] {
    let n = body_len(frame[..4].try_into().unwrap(), u32::MAX).expect("a body");
    assert_eq!(n, frame.len() - 4, "the prefix says the body's length");
    &frame[4..]
}

/// Every proper prefix of `body` is refused as malformed, and so is
/// `body` with a byte more.
fn check_edges<T: std::fmt::Debug>(body: &[u8], decode: impl Fn(&[u8]) -> Result<T, WireError>) {
    for n in 0..body.len() {
        match decode(&body[..n]) {
            Err(WireError::Malformed(_)) => {}
            other => panic!("{n} of {} bytes decoded: {other:?}", body.len()),
        }
    }
    let mut longer = body.to_vec();
    longer.push(0);
    match decode(&longer) {
        Err(WireError::Malformed(m)) => assert!(m.contains("trailing"), "{m}"),
        other => panic!("a trailing byte decoded: {other:?}"),
    }
}

proptest! {
    #[test]
    fn requests_round_trip_and_refuse_truncation(r in request()) {
        let frame = r.encode();
        let b = body(&frame);
        prop_assert_eq!(Request::decode(b).expect("decodes"), r);
        check_edges(b, Request::decode);
    }

    #[test]
    fn responses_round_trip_and_refuse_truncation(r in response()) {
        let frame = r.encode();
        let b = body(&frame);
        prop_assert_eq!(Response::decode(b).expect("decodes"), r);
        check_edges(b, Response::decode);
    }
}

/// Random bodies (a few thousand, from a fixed seed so that a failure
/// repeats): decoding never panics, and what decodes encodes back to the
/// same bytes (every accepted body has one meaning). Each starts with a
/// real kind byte, and half carry a small count after it, so that fields
/// and vectors are reached; the stable fuzz run (`tests/fuzz_decoders.rs`,
/// target `wire_decode`) mutates real messages instead.
#[test]
fn random_bodies_decode_or_are_refused() {
    let mut rng = crate::io::crash::SplitMix::new(0x5eed_a3be);
    let kinds = [
        0x01u8, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x0E, 0x0F, 0x10, 0x11, 0x12, 0x13,
        0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x8E, 0x8F, 0x90, 0x91, 0xFF,
    ];
    let mut decoded = 0;
    for _ in 0..8000 {
        let len = rng.below(32) as usize;
        let mut b: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        if b.len() > 8 && rng.below(2) == 0 {
            b[0] = kinds[rng.below(kinds.len() as u64) as usize];
            let at = 1 + rng.below(4) as usize;
            b[at..at + 4].copy_from_slice(&(rng.next_u64() as u32 % 3).to_le_bytes());
        } else if let Some(k) = b.first_mut() {
            *k = kinds[rng.below(kinds.len() as u64) as usize];
        }
        if let Ok(r) = Request::decode(&b) {
            assert_eq!(&r.encode()[4..], &b[..], "{r:?}");
            decoded += 1;
        }
        if let Ok(r) = Response::decode(&b) {
            assert_eq!(&r.encode()[4..], &b[..], "{r:?}");
            decoded += 1;
        }
    }
    assert!(decoded > 60, "only {decoded} random bodies decoded");
}

#[test]
fn frames_are_bounded() {
    assert!(matches!(
        body_len([0; 4], 10),
        Err(WireError::Malformed(m)) if m.contains("empty frame")
    ));
    let e = body_len(11u32.to_le_bytes(), 10).unwrap_err();
    assert_eq!(e.to_string(), "frame of 11 bytes exceeds the limit of 10");
    assert_eq!(body_len(10u32.to_le_bytes(), 10).unwrap(), 10);

    let frame = Request::ReadBlock { head: 7 }.encode();
    let got = read_frame(&mut &frame[..], DEFAULT_MAX_FRAME).expect("a frame");
    assert_eq!(Request::decode(&got).unwrap(), Request::ReadBlock { head: 7 });
    // A stream that ends inside the body, or inside the prefix.
    for cut in [2, frame.len() - 1] {
        let e = read_frame(&mut &frame[..cut], DEFAULT_MAX_FRAME).unwrap_err();
        assert!(matches!(e, WireError::Io(ref io) if io.kind() == std::io::ErrorKind::UnexpectedEof));
    }
    // The limit is checked before the body is read (or allocated).
    let huge = u32::MAX.to_le_bytes();
    assert!(matches!(
        read_frame(&mut &huge[..], DEFAULT_MAX_FRAME),
        Err(WireError::TooLarge { len, max: DEFAULT_MAX_FRAME }) if len == u32::MAX as u64
    ));
}

#[test]
fn errors_say_what_is_wrong() {
    let m = |b: &[u8]| match Request::decode(b) {
        Err(e) => e.to_string(),
        Ok(r) => panic!("decoded {r:?}"),
    };
    assert_eq!(m(&[0x17]), "request kind 0x17 is unknown");
    assert_eq!(
        m(&[0x03, 1, 2, 3]),
        "truncated: ReadBlock needs 8 bytes after its kind, got 3"
    );
    assert!(m(b"\x01ABCD\x01\x00").contains("not an Amber client"));
    let mut bad_utf8 = b"\x01AMBR\x01\x00\x02\x00".to_vec();
    bad_utf8.extend_from_slice(&[0xff, 0xfe, 0, 0, 0, 0]);
    assert!(m(&bad_utf8).contains("database is not UTF-8"), "{}", m(&bad_utf8));
    let long_token = Request::Hello {
        version: VERSION,
        database: "a".into(),
        token: vec![7; MAX_TOKEN + 1],
    }
    .encode();
    assert!(m(&long_token[4..]).contains("token of 4097 bytes exceeds the limit of 4096"));
    // A count larger than the bytes left is refused before any allocation.
    let mut hostile = vec![0x82];
    hostile.extend_from_slice(&u32::MAX.to_le_bytes());
    match Response::decode(&hostile) {
        Err(WireError::Malformed(m)) => assert!(m.contains("count 4294967295"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(Response::decode(&[0xFF, 0, 0, 0]), Err(WireError::Malformed(m)) if m.contains("error code 0")));
}

#[test]
fn hello_version_is_read_before_the_rest() {
    let hello = |version| Request::Hello {
        version,
        database: "db".into(),
        token: b"t".to_vec(),
    };
    assert_eq!(hello_version(&hello(VERSION).encode()[4..]), Some(VERSION));
    // A client of another version: its Hello may not decode as this
    // version's, but its version is still read.
    let mut other = hello(9).encode()[4..].to_vec();
    other.truncate(7);
    assert_eq!(hello_version(&other), Some(9));
    assert_eq!(hello_version(b"\x01XXXX\x01\x00"), None);
    assert_eq!(hello_version(&Request::Bye.encode()[4..]), None);
}

#[test]
fn long_messages_are_cut_at_a_character_boundary() {
    let message = "é".repeat(40_000); // 80 000 bytes
    let frame = Response::Error {
        code: ErrorCode::Internal,
        message,
    }
    .encode();
    let Response::Error { message, .. } = Response::decode(&frame[4..]).unwrap() else {
        panic!("not an error");
    };
    assert_eq!(message.len(), 65534);
    assert!(message.chars().all(|c| c == 'é'));
}

#[test]
fn error_codes_have_one_byte_and_words_each() {
    for (i, c) in ErrorCode::ALL.into_iter().enumerate() {
        assert_eq!(c as u8, i as u8 + 1);
        assert_eq!(ErrorCode::from_u8(c as u8), Some(c));
        assert!(!c.to_string().is_empty());
    }
    assert_eq!(ErrorCode::from_u8(0), None);
    assert_eq!(ErrorCode::from_u8(ErrorCode::ALL.len() as u8 + 1), None);
}

proptest! {
    /// The client's copy-free decoding of a cluster finds what the full
    /// decoding finds, and no other message passes for a cluster.
    #[test]
    fn a_cluster_decodes_in_place_as_it_decodes_whole(r in response()) {
        let frame = r.encode();
        let body = body(&frame);
        match (&r, Response::decode_cluster(body)) {
            (Response::Cluster { blocks, data }, Some(Ok((b, range)))) => {
                prop_assert_eq!(&b, blocks);
                prop_assert_eq!(&body[range], &data[..]);
            }
            (Response::Cluster { .. }, other) => prop_assert!(false, "{other:?}"),
            (_, None) => {}
            (_, Some(other)) => prop_assert!(false, "not a cluster, decoded as one: {other:?}"),
        }
    }
}

proptest! {
    /// A frame sent in two parts is the frame: its prefix counts both, and
    /// the second part is the response's own images (a `Block`'s, a
    /// `Cluster`'s, a backup's bytes), not a copy of them.
    #[test]
    fn a_split_frame_is_the_frame_and_borrows_its_images(r in response()) {
        let (head, tail) = r.encode_split();
        let whole = [&head[..], tail].concat();
        prop_assert_eq!(&whole, &r.encode());
        prop_assert_eq!(body(&whole).len(), whole.len() - 4);
        let images: Option<&[u8]> = match &r {
            Response::Block(b) | Response::BackupBytes(b) => Some(b),
            Response::Cluster { data, .. } => Some(data),
            _ => None,
        };
        match images {
            Some(images) => prop_assert!(std::ptr::eq(tail, images)),
            None => prop_assert!(tail.is_empty()),
        }
    }
}
