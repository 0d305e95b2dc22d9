//! The schema file target: what `Migration::load` reads (`schema/schema_file.rs`),
//! and the migration of a seed database to whatever schema it decodes to,
//! as `amber migrate DB --schema FILE` runs it.
//!
//! Input: a flags byte (bit 0: make the file's checksum valid first, so
//! that mutations reach the decoding behind it; bits 1–7 pick the seed
//! database, `seeds::databases` order), then the schema file's bytes.
//!
//! A layout larger than 1 MiB is decoded but not migrated to: the
//! migration allocates an object of every layout, and the format allows
//! objects of 4 GiB (docs/design.md §9, the bounds).
//!
//! Checked, beyond the contract: what decodes encodes to a file that
//! decodes and encodes to the same bytes; a file that decodes loads as a migration;
//! a migration either is refused, leaving the seed's committed values
//! readable, or succeeds, leaving a database that opens and whose deep
//! verification finds no damage (any layouts the plan accepted).

use super::Content;
use super::seeds;
use crate::Migration;
use crate::format::crc;
use crate::io::{OpenMode, Vfs};
use crate::schema::schema_file;
use std::path::Path;
use std::sync::Arc;

/// The largest layout the target migrates a seed database to (1 MiB, some
/// pages of the largest page size; the decoding is checked whatever the
/// sizes).
const MIGRATED_LAYOUT_MAX: u32 = 1 << 20;

/// Where the target puts the schema file, beside the seed database.
fn schema_path() -> &'static Path {
    Path::new("/fuzz.schema")
}

/// Makes a schema file's trailing CRC-32C match the bytes before it.
pub fn reseal_schema(file: &mut [u8]) {
    if let Some(body) = file.len().checked_sub(4) {
        let c = crc(&file[..body]);
        file[body..].copy_from_slice(&c.to_le_bytes());
    }
}

/// The schema file target (see the module's comment).
pub fn schema_file<C: Content>(data: &[u8]) {
    let flags = data.first().copied().unwrap_or(0);
    let mut bytes = data.get(1..).unwrap_or(&[]).to_vec();
    if flags & 1 == 1 {
        reseal_schema(&mut bytes);
    }
    let Ok(w) = schema_file::decode(&bytes) else {
        return;
    };
    let encoded = schema_file::encode(&w);
    match schema_file::decode(&encoded) {
        Ok(again) => assert!(
            schema_file::encode(&again) == encoded,
            "a schema file encoded and decoded again is another schema"
        ),
        Err(e) => panic!("a decoded schema encodes to a file that does not decode: {e}"),
    }
    // A layout states the size of the objects a migration converts to, up
    // to the format's 4 GiB: the migration allocates an object of each.
    // Larger than a page file of the seeds, it is decoded, not migrated to.
    if w.largest_layout() > MIGRATED_LAYOUT_MAX {
        return;
    }
    let dbs = seeds::cached::<C>();
    let seed = &dbs[usize::from(flags >> 1) % dbs.len()];
    let vfs = seed.materialize();
    let written = vfs
        .open(schema_path(), OpenMode::CreateNew)
        .and_then(|f| f.write_all_at(&bytes, 0));
    if let Err(e) = written {
        panic!("the in-memory file system refused a write: {e}");
    }
    let m = match Migration::load_with(&vfs, schema_path()) {
        Ok(m) => m,
        Err(e) => panic!("a schema file that decodes does not load: {e}"),
    };
    let v: Arc<dyn Vfs> = Arc::new(vfs);
    let opts = seeds::options(seed.page_size());
    let migrated = m.run_file_with(v.clone(), seeds::db_path());
    let db = match seeds::open(v, opts) {
        Ok(db) => db,
        Err(e) => panic!(
            "after a migration that {}, the database does not open: {e}",
            if migrated.is_ok() {
                "succeeded"
            } else {
                "was refused"
            }
        ),
    };
    match migrated {
        // Nothing was written, or only what recovery installs.
        Err(_)
        | Ok(crate::MigrateStats {
            rewritten: false, ..
        }) => {
            assert!(C::read(&db, true) > 0, "a refused migration lost the root");
        }
        Ok(_) => match db.verify_deep() {
            Ok(r) => assert!(
                !r.is_damaged(),
                "a migration left damage: {:?}",
                r.findings.first()
            ),
            Err(e) => panic!("a migrated database cannot be deep-verified: {e}"),
        },
    }
}

/// Seeds: the schema file of the seed content's next version (a field
/// added, one renamed), and of its unchanged types, each for every seed
/// database.
pub(super) fn schema_seeds<C: Content>(dbs: usize) -> Vec<Vec<u8>> {
    let vfs = crate::io::crash::CrashVfs::new();
    let mut out = Vec::new();
    for (k, m) in [C::migration(), C::unchanged()].into_iter().enumerate() {
        let path = Path::new(if k == 0 {
            "/next.schema"
        } else {
            "/same.schema"
        });
        let bytes = m.and_then(|m| m.save_with(&vfs, path)).ok().and_then(|()| {
            let f = vfs.open(path, OpenMode::ReadOnly).ok()?;
            let mut b = vec![0u8; f.size().ok()? as usize];
            f.read_exact_at(&mut b, 0).ok()?;
            Some(b)
        });
        let Some(bytes) = bytes else {
            panic!("the seed content's schema cannot be saved");
        };
        for i in 0..dbs {
            let mut seed = vec![(i as u8) << 1];
            seed.extend_from_slice(&bytes);
            out.push(seed);
        }
    }
    out
}
