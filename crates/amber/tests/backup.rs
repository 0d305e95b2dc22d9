//! Online backup's pinned state (`store::backup`): a copy taken while the
//! writer commits holds exactly the pinned snapshot's commits, however many
//! come after; a checkpoint that rewrites the files during the copy is
//! caught when the copy ends, and the copy is taken again. (`amber backup`
//! as a program, locally and through a server, is tested in amber-cli's
//! `admin_remote.rs`.)

use amber::internals::io::real::RealVfs;
use amber::internals::store::backup::{self, BackupSource, LocalSource, Part, PinInfo, Pinned};
use amber::{Db, Error, Options, PRef, Persistent};
use std::path::Path;
use std::sync::Arc;

#[derive(Persistent)]
#[repr(C)]
struct Counter {
    n: u64,
}

fn bump(db: &mut Db) {
    let c: PRef<Counter> = db.root("c").unwrap().expect("root");
    let mut tx = db.begin().expect("begun");
    tx.get_mut(c).n += 1;
    tx.commit().expect("committed");
}

fn create(path: &Path) -> Db {
    let mut db = Db::create(path, Options::default()).expect("created");
    let mut tx = db.begin().expect("begun");
    let c = tx.alloc(Counter { n: 0 }).expect("allocated");
    tx.set_root("c", c).expect("root");
    tx.commit().expect("committed");
    db
}

fn counter(path: &Path) -> u64 {
    let db = Db::open(path, Options::default()).expect("opened");
    let c: PRef<Counter> = db.root("c").unwrap().expect("root");
    let n = db.get(c).n;
    db.close().expect("closed");
    n
}

#[test]
fn a_copy_holds_the_pinned_snapshot_not_the_commits_after_it() {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("a.amber");
    let mut db = create(&path);
    for _ in 0..3 {
        bump(&mut db);
    }
    let mut src = LocalSource::new(Arc::new(RealVfs), &path);
    let info = src.pin().expect("pinned");
    // Commits after the pin are in the log the copy reads, past its end.
    for _ in 0..5 {
        bump(&mut db);
    }
    let dest = dir.path().join("b.amber");
    let mut out = backup::Dest::create(Arc::new(RealVfs), &dest, &info).expect("created");
    for (part, len) in [(Part::Data, info.data_len), (Part::Log, info.log_len)] {
        let bytes = src.read(part, 0, len as usize).expect("read");
        out.write(part, 0, &bytes).expect("written");
    }
    src.finish().expect("no checkpoint ran");
    out.finish(&info).expect("finished");
    db.close().expect("closed");
    assert_eq!(counter(&dest), 3);
    assert_eq!(counter(&path), 8);
    assert!(amber::inspect::verify(&dest).expect("verified").is_ok());
}

#[test]
fn a_checkpoint_during_the_copy_is_caught_and_the_copy_retaken() {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("a.amber");
    let mut db = create(&path);
    bump(&mut db);
    // Nothing committed past the pin: the writer's checkpoint may run, and
    // rewrites the page file under the copy.
    let p = Pinned::open(Arc::new(RealVfs), &path).expect("pinned");
    db.checkpoint().expect("checkpointed");
    match p.finish() {
        Err(Error::Invalid(m)) => assert!(m.contains("a checkpoint rewrote"), "{m}"),
        other => panic!("{other:?}"),
    }

    /// A source whose first copy a checkpoint spoils.
    struct Spoiled<'a> {
        inner: LocalSource,
        db: &'a mut Db,
        pins: u32,
    }
    impl BackupSource for Spoiled<'_> {
        fn pin(&mut self) -> amber::Result<PinInfo> {
            self.pins += 1;
            if self.pins == 1 {
                bump(self.db);
            }
            let info = self.inner.pin()?;
            if self.pins == 1 {
                // Nothing committed past the pin: it does not defer this.
                self.db.checkpoint().expect("checkpointed");
            }
            Ok(info)
        }
        fn read(&mut self, part: Part, offset: u64, len: usize) -> amber::Result<Vec<u8>> {
            self.inner.read(part, offset, len)
        }
        fn finish(&mut self) -> amber::Result<()> {
            self.inner.finish()
        }
    }
    let dest = dir.path().join("b.amber");
    let mut src = Spoiled {
        inner: LocalSource::new(Arc::new(RealVfs), &path),
        db: &mut db,
        pins: 0,
    };
    let rep = backup::backup(&mut src, Arc::new(RealVfs), &dest, 4096).expect("backed up");
    assert_eq!((rep.retries, src.pins), (1, 2));
    db.close().expect("closed");
    assert_eq!(counter(&dest), 2);
}
