//! What `amber inspect` shows of a database, read without changing it: the
//! report as text, here so that a server (`amber serve`) makes the same
//! report of a database it serves as the command makes of a file.
//!
//! Everything comes from this module's parent: the superblock copies and the log
//! are read from the files directly, so that they are shown even when the
//! store cannot be opened (damage); the rest from a read-only
//! [`Inspector`], which runs recovery in memory and writes nothing. The fault backend that opening the database would
//! choose on this machine is shown with the reason (`Db::probe_backend`).
//! The schema catalog's descriptors are decoded (types
//! by name, with their fields); `--page N` and `--object PAGE:OFFSET` dump
//! objects field by field (`objects.rs`).

mod objects;

use crate::error::Result;
use crate::inspect::{
    self, CatalogEntry, Extent, Inspector, LogHeaderCopy, LogRecords, RecordKind, Superblock,
    SuperblockCopy, Tail,
};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

/// How many items of a long list are shown before summarising.
const SHOWN: usize = 8;

/// What `amber inspect` shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Show {
    /// The whole database, summarised.
    Summary,
    /// One page (the block holding it), object by object.
    Page(u64),
    /// One object, `PAGE:OFFSET`.
    Object(String),
}

/// `amber inspect PATH [--page N | --object PAGE:OFFSET]`: the report into
/// `out`. A database whose store cannot be opened (damage) is shown as far
/// as its files allow, and the damage is the error.
pub fn report(path: &Path, show: &Show, out: &mut String) -> Result<()> {
    if *show != Show::Summary {
        let s = Inspector::open(path)?;
        let _ = writeln!(out, "database {}", path.display());
        match show {
            Show::Page(p) => objects::page(&s, path, *p, out)?,
            Show::Object(spec) => objects::one_object(&s, path, spec, out)?,
            Show::Summary => {}
        }
        return Ok(());
    }
    // Open first: it takes the database's lock, so the raw reads below see
    // files no one is changing. Damage is shown as far as possible.
    let (store, damage) = match Inspector::open(path) {
        Ok(s) => (Some(s), None),
        Err(e) if e.is_corruption() => (None, Some(e)),
        Err(e) => return Err(e),
    };
    let _ = writeln!(out, "database {}", path.display());
    let current = superblocks(path, out)?;
    backend(current.as_ref(), out);
    log(path, out)?;
    if let Some(s) = &store {
        let cat = s.catalog();
        pages(s, out);
        catalog(&cat, out);
        roots(s, &cat, out);
    }
    match damage {
        None => Ok(()),
        Some(e) => {
            let _ = writeln!(
                out,
                "(the store could not be opened, so free space, blocks, catalog and roots are not shown; \
                 `amber verify` lists every problem)"
            );
            Err(e)
        }
    }
}

/// The fault backend opening this database would use on this machine, and
/// why (a probe: a one-frame frame space set up and dropped).
fn backend(current: Option<&Superblock>, out: &mut String) {
    let o = crate::Options {
        page_size: current.map_or(crate::Options::default().page_size, |sb| {
            sb.page_size as usize
        }),
        ..crate::Options::default()
    };
    let _ = match crate::Db::probe_backend(&o) {
        Ok((b, why)) => writeln!(out, "fault backend on this machine: {b} ({why})"),
        Err(e) => writeln!(
            out,
            "fault backend on this machine: none can be set up: {e}"
        ),
    };
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Prints both superblock copies; returns the one in charge.
fn superblocks(path: &Path, out: &mut String) -> Result<Option<Superblock>> {
    let sbs = inspect::read_superblocks(path)?;
    let _ = writeln!(out, "page file: {} bytes", sbs.file_size);
    let _ = writeln!(out, "superblock");
    for (i, c) in sbs.copies.iter().enumerate() {
        match c {
            SuperblockCopy::Valid(sb) => {
                let mark = if sbs.current == Some(i) {
                    "  (current)"
                } else {
                    ""
                };
                let _ = writeln!(
                    out,
                    "  copy {i}: generation {}, checkpoint LSN {}, page size {}, blobs: free-space map page {}, \
                     root directory page {}, schema catalog page {}; db id {}; next txid {}{mark}",
                    sb.generation,
                    sb.checkpoint_lsn,
                    sb.page_size,
                    sb.fsm_page,
                    sb.roots_page,
                    sb.catalog_page,
                    hex(&sb.db_id),
                    sb.next_txid
                );
            }
            SuperblockCopy::Damaged(e) => {
                let _ = writeln!(out, "  copy {i}: DAMAGED: {e}");
            }
            SuperblockCopy::NoMagic => {
                let _ = writeln!(out, "  copy {i}: DAMAGED: bad magic");
            }
        }
    }
    Ok(sbs.current().copied())
}

/// The name a record kind is counted under.
fn kind_name(k: &RecordKind) -> &'static str {
    match k {
        RecordKind::Range {
            before_image: true, ..
        } => "range (with before-image)",
        RecordKind::Range { .. } => "range",
        RecordKind::Ranges {
            before_image: true, ..
        } => "ranges (with before-images)",
        RecordKind::Ranges { .. } => "ranges",
        RecordKind::Page { .. } => "page",
        RecordKind::Alloc { .. } => "alloc",
        RecordKind::Free { .. } => "free",
        RecordKind::Commit => "commit",
        RecordKind::Root { .. } => "root",
        RecordKind::Type { .. } => "type",
        RecordKind::Intent { .. } => "intent",
    }
}

/// Prints the log: header copies, and the records since the checkpoint.
fn log(path: &Path, out: &mut String) -> Result<()> {
    let mut kinds: BTreeMap<&str, u64> = BTreeMap::new();
    let mut seen = BTreeSet::new();
    let mut committed = BTreeSet::new();
    let view = inspect::read_log(path, &mut |r| {
        *kinds.entry(kind_name(&r.kind)).or_default() += 1;
        if let Some(t) = r.txid {
            seen.insert(t);
            if r.kind == RecordKind::Commit {
                committed.insert(t);
            }
        }
    })?;
    let _ = writeln!(out, "log {}: {} bytes", view.path.display(), view.size);
    for (i, c) in view.headers.iter().enumerate() {
        match c {
            LogHeaderCopy::Valid {
                header: h,
                version,
                belongs,
            } => {
                let _ = writeln!(
                    out,
                    "  header copy {i}: format version {version}, generation {}, base LSN {}, \
                     page size {}{}",
                    h.generation,
                    h.base_lsn,
                    h.page_size,
                    if *belongs {
                        ""
                    } else {
                        " (belongs to ANOTHER database)"
                    }
                );
            }
            LogHeaderCopy::Damaged(e) => {
                let _ = writeln!(out, "  header copy {i}: DAMAGED: {e}");
            }
        }
    }
    let (from_lsn, records, end_lsn, tail) = match &view.records {
        LogRecords::NoPair => {
            let _ = writeln!(
                out,
                "  records: not scanned (no valid superblock and log header pair)"
            );
            return Ok(());
        }
        LogRecords::StartsAfterCheckpoint {
            base_lsn,
            checkpoint_lsn,
        } => {
            let _ = writeln!(
                out,
                "  records: not scanned: the log starts at LSN {base_lsn} after the checkpoint LSN {checkpoint_lsn}"
            );
            return Ok(());
        }
        LogRecords::Scanned {
            from_lsn,
            records,
            end_lsn,
            tail,
        } => (*from_lsn, *records, *end_lsn, tail),
    };
    let by_kind = if kinds.is_empty() {
        String::new()
    } else {
        format!(
            ": {}",
            kinds
                .iter()
                .map(|(k, n)| format!("{n} {k}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let _ = writeln!(
        out,
        "  since checkpoint LSN {from_lsn}: {records} record(s), {} bytes, ending at LSN {end_lsn}{by_kind}",
        end_lsn.saturating_sub(from_lsn),
    );
    let _ = writeln!(
        out,
        "  transactions: {} committed, {} uncommitted (no commit record; recovery ignores them)",
        committed.len(),
        seen.len() - seen.intersection(&committed).count()
    );
    let _ = writeln!(out, "  tail: {}", tail_line(tail, view.closed_cleanly));
    Ok(())
}

fn list<T>(items: &[T], show: impl Fn(&T) -> String) -> String {
    let mut v: Vec<String> = items.iter().take(SHOWN).map(show).collect();
    if items.len() > SHOWN {
        v.push(format!("… and {} more", items.len() - SHOWN));
    }
    v.join(", ")
}

fn pages(s: &Inspector, out: &mut String) {
    let st = s.stats();
    let sb = s.superblock();
    let _ = writeln!(out, "pages (page size {})", st.page_size);
    let _ = writeln!(
        out,
        "  page count: {} (pages below {} hold the superblocks)",
        st.page_count,
        s.first_data_page()
    );
    let free = s.free_extents();
    let extent = |e: &Extent| format!("{}+{}", e.start, e.pages);
    let _ = writeln!(
        out,
        "  free: {} page(s) in {} extent(s){}",
        st.free_pages,
        free.len(),
        if free.is_empty() {
            String::new()
        } else {
            format!(": {}", list(&free, extent))
        }
    );
    let blocks = s.blocks();
    let runs: Vec<Extent> = blocks.iter().copied().filter(|b| b.pages > 1).collect();
    let _ = writeln!(
        out,
        "  allocated: {} block(s), {} of them multi-page run(s){}",
        blocks.len(),
        runs.len(),
        if runs.is_empty() {
            String::new()
        } else {
            format!(": {}", list(&runs, extent))
        }
    );
    let _ = writeln!(
        out,
        "  metadata blobs: free-space map at page {}, root directory at page {}, schema catalog at page {}",
        sb.fsm_page, sb.roots_page, sb.catalog_page
    );
    let _ = writeln!(
        out,
        "  pending: {} block(s) with committed changes in the log, not yet installed",
        st.pending_blocks
    );
}

fn catalog(cat: &[CatalogEntry], out: &mut String) {
    let _ = writeln!(out, "schema catalog: {} type(s)", cat.len());
    for c in cat {
        // Descriptors the object layer wrote decode; anything else (a
        // storage-level user's bytes, damage) is shown in hex.
        if let Ok(t) = &c.decoded {
            objects::describe_type(c.id, t, out);
            continue;
        }
        const MAX: usize = 32;
        let desc = &c.descriptor;
        let more = if desc.len() > MAX {
            format!(" … ({} more bytes)", desc.len() - MAX)
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "  type {}: {} byte(s): hex {}{more}",
            c.id,
            desc.len(),
            hex(&desc[..desc.len().min(MAX)])
        );
    }
}

fn roots(s: &Inspector, cat: &[CatalogEntry], out: &mut String) {
    let roots = s.roots();
    let ps = s.page_size() as u64;
    let _ = writeln!(out, "roots: {}", roots.len());
    for r in &roots {
        let (page, off) = (r.addr / ps, r.addr % ps);
        let name = match cat.iter().find(|c| c.id == r.type_id).map(|c| &c.decoded) {
            Some(Ok(t)) => format!(" {}", t.name),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "  {:?}: address {page}:{off} (page {page}, offset {off}), type {}{name}",
            r.name, r.type_id
        );
    }
}

/// One line describing how the log ended; `closed`: whether the log's
/// newest header was written by a clean close.
pub fn tail_line(t: &Tail, closed: bool) -> String {
    match (t, closed) {
        (Tail::Clean, _) => "clean".to_string(),
        (Tail::Torn { at, bytes, .. }, true) => format!(
            "clean, ends at LSN {at} (closed cleanly); the {bytes} byte(s) after it are older records left in place \
             when a checkpoint recycled the log (not damage; recovery ignores them)"
        ),
        (Tail::Torn { at, what, bytes }, false) => format!(
            "torn at LSN {at} ({what}; {bytes} byte(s) after the last valid record: a batch cut short by a crash, \
             or older records left when the log was recycled; recovery discards them)"
        ),
        (Tail::Corrupt { at, what, evidence }, _) => format!(
            "CORRUPT at LSN {at} ({what}; the commit record at LSN {evidence} shows the log was durable past it)"
        ),
    }
}
