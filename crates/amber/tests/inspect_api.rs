//! `amber::inspect` as a program would use it (public items only): create,
//! the files read directly, a read-only open of the committed state (a
//! block's objects with their fields decoded, one object by address, the
//! catalog and roots), checkpoint and recover with what they found.
//!
//! Its own test binary: opening a `Db` may install the SIGSEGV backend's
//! signal handler.

use amber::inspect::{
    self, BlockKind, Inspector, LogRecords, ObjectValue, RecordKind, Shape, SuperblockCopy, Tail,
    Value,
};
use amber::{Db, Options, PRef, PVec, Persistent};

#[derive(Persistent)]
#[repr(C)]
struct Item {
    n: i32,
    tag: [u8; 4],
    next: Option<PRef<Item>>,
    xs: PVec<u16>,
}

#[test]
fn create_read_inspect_checkpoint_recover() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let path = dir.path().join("api.amber");
    let st = inspect::create(&path, 8192).expect("create");
    assert_eq!(st.page_size, 8192);
    assert!(inspect::wal_path(&path).exists());
    assert!(
        inspect::create(&path, 8192).is_err(),
        "an existing database"
    );

    // Two items, committed and left in the log (no close).
    let (a, b) = {
        let mut db = Db::open(&path, Options::default()).expect("open");
        let mut tx = db.begin().expect("begin");
        let b = tx
            .alloc(Item {
                n: -2,
                tag: *b"bb\0\0",
                next: None,
                xs: PVec::new(),
            })
            .expect("alloc");
        let a = tx
            .alloc(Item {
                n: 1,
                tag: *b"aa\0\0",
                next: Some(b),
                xs: PVec::new(),
            })
            .expect("alloc");
        tx.push(a, |i| &mut i.xs, 7).expect("push");
        tx.set_root("a", a).expect("root");
        tx.commit().expect("commit");
        let out = (tx_paddr(&mut db, a), tx_paddr(&mut db, b));
        drop(db);
        out
    };

    let sbs = inspect::read_superblocks(&path).expect("superblocks");
    assert!(sbs.has_magic());
    assert!(matches!(sbs.copies[0], SuperblockCopy::Valid(_)));
    let checkpoint_lsn = sbs.current().expect("a current copy").checkpoint_lsn;
    let mut kinds = Vec::new();
    let log = inspect::read_log(&path, &mut |r| kinds.push(r.kind.clone())).expect("log");
    let LogRecords::Scanned {
        from_lsn,
        records,
        tail,
        ..
    } = &log.records
    else {
        panic!("not scanned: {:?}", log.records)
    };
    assert_eq!(*from_lsn, checkpoint_lsn);
    assert_eq!(*records, kinds.len() as u64);
    assert_eq!(*tail, Tail::Clean);
    assert!(kinds.contains(&RecordKind::Commit), "{kinds:?}");
    assert!(
        kinds
            .iter()
            .any(|k| matches!(k, RecordKind::Root { name, addr, .. }
            if name == "a" && *addr == a)),
        "{kinds:?}"
    );

    {
        let ins = Inspector::open(&path).expect("read-only open");
        assert_eq!(ins.recovery().committed, 1);
        let cat = ins.catalog();
        let item = cat
            .iter()
            .find(|c| matches!(&c.decoded, Ok(t) if t.name == "Item"))
            .expect("Item in the catalog");
        assert!(matches!(&item.decoded, Ok(t) if matches!(t.shape, Shape::Struct(_))));
        let roots = ins.roots();
        assert_eq!((roots[0].name.as_str(), roots[0].addr), ("a", a));
        let block = ins.block(a / 8192).expect("block");
        assert_eq!(block.kind(), Some(BlockKind::Data));
        assert!(block.pending, "committed in the log only");
        let o = ins.object(a + 3).expect("an address inside the object");
        assert_eq!((o.addr, o.type_id, o.is_free()), (a, item.id, false));
        assert_eq!(o.type_name.as_deref(), Some("Item"));
        let ObjectValue::Struct { fields, .. } = &o.value else {
            panic!("{:?}", o.value)
        };
        let v: Vec<(&str, &Value)> = fields.iter().map(|f| (f.name.as_str(), &f.value)).collect();
        assert_eq!(v[0].0, "n");
        assert_eq!(*v[0].1, Value::Scalar(inspect::Scalar::I32(1)));
        assert_eq!(*v[1].1, Value::Bytes(b"aa\0\0".to_vec()));
        assert_eq!(*v[2].1, Value::Ref(b));
        assert!(matches!(v[3].1, Value::Vector { len: 1, .. }));
        assert!(ins.verify_deep().expect("deep").is_clean());
        assert!(ins.object(ins.stats().page_count * 8192 + 40).is_err());
    }

    let rec = inspect::recover(&path).expect("recover");
    assert_eq!(rec.recovery.committed, 1);
    assert!(rec.installed.is_some_and(|i| i.blocks > 0));
    let ck = inspect::checkpoint(&path).expect("checkpoint");
    assert!(ck.at_open.is_none() && ck.checkpoint.is_nothing());
    assert!(inspect::verify(&path).expect("verify").is_ok());
}

fn tx_paddr(db: &mut Db, p: PRef<Item>) -> u64 {
    let tx = db.begin().expect("begin");
    let a = tx.to_smart(p).expect("paddr").paddr();
    tx.abort().expect("abort");
    a
}
