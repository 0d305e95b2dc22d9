//! The wire protocol's decoder (`crate::wire`): a body from a peer, decoded
//! as a request and as a response. Neither may panic nor allocate more
//! than the body implies, and what decodes must encode back to the same
//! bytes (every accepted body has exactly one meaning, so that the server
//! and the client cannot read one frame two ways).

use crate::wire::{
    Change, DEFAULT_MAX_FRAME, ErrorCode, Request, Response, VERSION, WireBlock, WireRecord,
    body_len, hello_version,
};

/// The target: `data` is a frame body (and its first four bytes, a length
/// prefix).
pub fn wire_decode(data: &[u8]) {
    if let Ok(r) = Request::decode(data) {
        assert_eq!(&r.encode()[4..], data, "{r:?} re-encodes otherwise");
        if let Request::Hello { version, .. } = r {
            assert_eq!(hello_version(data), Some(version));
        }
    }
    let whole = Response::decode(data);
    if let Ok(r) = &whole {
        assert_eq!(&r.encode()[4..], data, "{r:?} re-encodes otherwise");
    }
    // The client's in-place decoding of a cluster agrees with the whole.
    match (Response::decode_cluster(data), &whole) {
        (None, _) => assert!(!matches!(whole, Ok(Response::Cluster { .. }))),
        (Some(Ok((blocks, range))), Ok(Response::Cluster { blocks: b, data: d })) => {
            assert_eq!(&blocks, b);
            assert_eq!(&data[range], &d[..]);
        }
        (Some(Err(_)), Err(_)) => {}
        (Some(other), whole) => panic!("in place {other:?}, whole {whole:?}"),
    }
    if let Some(&prefix) = data.first_chunk::<4>()
        && let Ok(n) = body_len(prefix, DEFAULT_MAX_FRAME)
    {
        assert!((1..=DEFAULT_MAX_FRAME as usize).contains(&n));
    }
}

/// The seeds: the body of one message of every kind.
pub fn wire_seeds() -> Vec<Vec<u8>> {
    let requests = [
        Request::Hello {
            version: VERSION,
            database: "db".into(),
            token: b"secret".to_vec(),
        },
        Request::Blocks { from: 3, pages: 9 },
        Request::ReadBlock { head: 3 },
        Request::ReadCluster { from: 3, pages: 9 },
        Request::Catalog,
        Request::Refresh,
        Request::Stats,
        Request::Bye,
        Request::Begin,
        Request::Alloc { pages: 2, kind: 1 },
        Request::DefineType { desc: vec![1, 2] },
        Request::Commit {
            records: vec![
                WireRecord::Range {
                    addr: 4096 + 64,
                    data: vec![7; 5],
                },
                WireRecord::Page {
                    page: 5,
                    image: vec![0; 16],
                },
                WireRecord::Cached {
                    page: 6,
                    image: vec![3; 16],
                },
            ],
            frees: vec![9],
            roots: vec![("top".into(), 4096 + 64, 1)],
            reads: vec![5, u64::MAX],
        },
        Request::Abort,
        Request::Status,
        Request::BackupBegin,
        Request::BackupRead {
            file: 1,
            offset: 8192,
            len: 1 << 20,
        },
        Request::BackupEnd,
        Request::Verify { deep: true },
        Request::Checkpoint,
        Request::Inspect(crate::inspect::Show::Object("5:64".into())),
    ];
    let responses = [
        Response::Welcome {
            version: VERSION,
            page_size: 4096,
            first_data_page: 3,
            page_count: 40,
            snapshot_lsn: 512,
            home: 0x1234 << 30,
            scheme: 4,
        },
        Response::Error {
            code: ErrorCode::Invalid,
            message: "page 5 does not start an allocated block".into(),
        },
        Response::Blocks(vec![(3, 1), (4, 2)]),
        Response::Block(vec![1, 2, 3]),
        Response::Cluster {
            blocks: vec![
                WireBlock {
                    head: 3,
                    pages: 1,
                    at: 0,
                    error: None,
                },
                WireBlock {
                    head: 4,
                    pages: 1,
                    at: 4,
                    error: Some((ErrorCode::Corrupt, "bad checksum".into())),
                },
            ],
            data: vec![9; 8],
        },
        Response::Catalog {
            types: vec![(1, vec![5, 6])],
            roots: vec![("top".into(), 4096, 1)],
        },
        Response::Refreshed {
            page_count: 40,
            change: Change::Pages {
                lsn: 600,
                pages: vec![3, 5],
                catalog: false,
            },
        },
        Response::Refreshed {
            page_count: 40,
            change: Change::Everything { lsn: 700 },
        },
        Response::Stats {
            snapshot_lsn: 1,
            end_lsn: 2,
            checkpoint_lsn: 0,
            page_count: 40,
            free_pages: 2,
            blocks: 9,
            logged_pages: 1,
        },
        Response::Begun {
            page_count: 40,
            change: Change::Unchanged,
        },
        Response::Allocated { head: 41 },
        Response::TypeDefined { id: 2 },
        Response::Committed {
            lsn: 900,
            page_count: 42,
            change: Change::Pages {
                lsn: 900,
                pages: vec![5, 41],
                catalog: true,
            },
        },
        Response::Conflict {
            page_count: 42,
            change: Change::Pages {
                lsn: 950,
                pages: vec![5],
                catalog: false,
            },
            message: "page 5, changed by the commit at LSN 950".into(),
        },
        Response::Aborted,
        Response::Report("{\"connections\":[]}".into()),
        Response::BackupPinned {
            snapshot_lsn: 900,
            page_size: 4096,
            data_len: 1 << 20,
            log_len: 8192 + 300,
            max_read: 1 << 20,
        },
        Response::BackupBytes(vec![9; 16]),
        Response::BackupDone,
    ];
    (requests.iter().map(Request::encode))
        .chain(responses.iter().map(Response::encode))
        .map(|f| f[4..].to_vec())
        .collect()
}
