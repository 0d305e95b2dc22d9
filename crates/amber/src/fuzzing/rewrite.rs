//! The whole-file target over the operations that rewrite a database:
//! `Db::collect`, then `Db::migrate` to the content's next version, on a
//! mutated seed (a [`Bundle`], as the other whole-file targets take it).
//!
//! Both copy every object the roots reach into a new file, so both meet
//! every damaged block; both refuse a database deep verification finds
//! damaged and leave it as it was. Checked, beyond the contract (without
//! resealing, as `open_and_read` checks, `files.rs`): every node read back
//! is one that was committed, before and after each rewrite; a collection
//! that succeeds keeps every node that was read whole before it, and a
//! migration that succeeds converts every one of them; one that is
//! refused leaves the database reading back as before (read back through the next
//! version's types, `Content::read_next`).

use super::Content;
use super::files::Bundle;
use super::seeds;
use crate::io::Vfs;
use std::sync::Arc;

/// The target (see the module's comment).
pub fn migrate_collect<C: Content>(data: &[u8]) {
    let Some(bundle) = Bundle::within_cap(data) else {
        return;
    };
    let strict = !bundle.reseal;
    let vfs: Arc<dyn Vfs> = Arc::new(bundle.materialize());
    let opts = seeds::options(bundle.page_size());
    let open = || seeds::open(vfs.clone(), opts.clone());
    let Ok(db) = open() else {
        return;
    };
    let before = C::read(&db, strict);
    let db = match db.collect() {
        Ok((db, _)) => {
            let after = C::read(&db, strict);
            if strict {
                assert_eq!(after, before, "a collection lost or made objects");
            }
            db
        }
        Err(_) => {
            // Refused, the handle closed: the database is as it was.
            let Ok(db) = open() else {
                panic!(
                    "a database a refused collection left does not open again: {:?}",
                    open().err()
                );
            };
            if strict {
                assert_eq!(
                    C::read(&db, true),
                    before,
                    "a refused collection changed it"
                );
            }
            db
        }
    };
    let Ok(m) = C::migration() else {
        panic!("the content's next version is no migration");
    };
    let kept = C::read(&db, strict);
    match db.migrate(&m) {
        Ok((db, _)) => {
            let next = C::read_next(&db, strict);
            if strict {
                assert_eq!(next, kept, "a migration lost or made objects");
            }
        }
        Err(_) => {
            let Ok(db) = open() else {
                panic!(
                    "a database a refused migration left does not open again: {:?}",
                    open().err()
                );
            };
            if strict {
                assert_eq!(C::read(&db, true), kept, "a refused migration changed it");
            }
        }
    }
}
