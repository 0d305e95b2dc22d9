//! `amber inspect PATH`: what is in a database, read without changing it.
//!
//! The superblock copies and the log are decoded from the files directly, so
//! that they are shown even when the store cannot be opened (damage); the
//! rest comes from a read-only [`Store::open`], which runs recovery in memory
//! and writes nothing. The fault backend that opening the database would
//! choose on this machine is shown with the reason (`Db::probe_backend`).
//! The schema catalog's descriptors are decoded (types
//! by name, with their fields); `--page N` and `--object PAGE:OFFSET` dump
//! objects field by field (`objects.rs`).

use crate::admin::{closed_cleanly, precheck, tail_line};
use crate::error::CliError;
use crate::objects;
use amber::internals::format::PageNo;
use amber::internals::format::superblock::{self, SLOT_OFFSETS, SLOT_SIZE, SlotError, Superblock};
use amber::internals::io::real::RealVfs;
use amber::internals::io::{OpenMode, Vfs};
use amber::internals::store::{Store, StoreOptions, wal_path};
use amber::internals::wal::Record;
use amber::internals::wal::header::{self as log_header, LogHeader};
use amber::internals::wal::scan;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::ops::ControlFlow;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

/// How many items of a long list are shown before summarising.
const SHOWN: usize = 8;

/// What `amber inspect` shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Show {
    /// The whole database, summarised.
    Summary,
    /// One page (the block holding it), object by object.
    Page(PageNo),
    /// One object, `PAGE:OFFSET`.
    Object(String),
}

/// `amber inspect PATH [--page N | --object PAGE:OFFSET]`.
pub fn inspect(path: &Path, show: &Show, out: &mut String) -> Result<ExitCode, CliError> {
    precheck(path)?;
    let vfs: Arc<dyn Vfs> = Arc::new(RealVfs);
    let opts = StoreOptions {
        read_only: true,
        ..StoreOptions::default()
    };
    if *show != Show::Summary {
        let s = Store::open(vfs, path, opts)?;
        let _ = writeln!(out, "database {}", path.display());
        match show {
            Show::Page(p) => objects::page(&s, path, *p, out)?,
            Show::Object(spec) => objects::one_object(&s, path, spec, out)?,
            Show::Summary => {}
        }
        return Ok(ExitCode::SUCCESS);
    }
    // Open first: it takes the database's lock, so the raw reads below see
    // files no one is changing. Damage is shown as far as possible.
    let (store, damage) = match Store::open(vfs.clone(), path, opts) {
        Ok(s) => (Some(s), None),
        Err(e) if e.is_corruption() => (None, Some(e)),
        Err(e) => return Err(e.into()),
    };
    let _ = writeln!(out, "database {}", path.display());
    let current = superblocks(&*vfs, path, out)?;
    backend(current.as_ref(), out);
    log(path, current.as_ref(), out)?;
    if let Some(s) = &store {
        pages(s, out);
        catalog(s, out);
        roots(s, out);
    }
    match damage {
        None => Ok(ExitCode::SUCCESS),
        Some(e) => {
            let _ = writeln!(
                out,
                "(the store could not be opened, so free space, blocks, catalog and roots are not shown; \
                 `amber verify` lists every problem)"
            );
            Err(e.into())
        }
    }
}

/// The fault backend opening this database would use on this machine, and
/// why (a probe: a one-frame frame space set up and dropped).
fn backend(current: Option<&Superblock>, out: &mut String) {
    let o = amber::Options {
        page_size: current.map_or(amber::Options::default().page_size, |sb| {
            sb.page_size as usize
        }),
        ..amber::Options::default()
    };
    let _ = match amber::Db::probe_backend(&o) {
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
fn superblocks(
    vfs: &dyn Vfs,
    path: &Path,
    out: &mut String,
) -> Result<Option<Superblock>, CliError> {
    let f = vfs
        .open(path, OpenMode::ReadOnly)
        .map_err(|e| CliError::msg(format!("{}: {e}", path.display())))?;
    let size = f
        .size()
        .map_err(|e| CliError::msg(format!("{}: {e}", path.display())))?;
    let mut slots: Vec<Result<Superblock, SlotError>> = Vec::new();
    for off in SLOT_OFFSETS {
        let mut b = [0u8; SLOT_SIZE];
        amber::internals::io::read_at_most(&*f, &mut b, off)
            .map_err(|e| CliError::msg(format!("{}: {e}", path.display())))?;
        slots.push(Superblock::decode(&b));
    }
    let chosen = superblock::choose(slots[0].clone(), slots[1].clone()).ok();
    let _ = writeln!(out, "page file: {size} bytes");
    let _ = writeln!(out, "superblock");
    for (i, s) in slots.iter().enumerate() {
        match s {
            Ok(sb) => {
                let mark = if chosen.is_some_and(|(_, slot)| usize::from(slot) == i) {
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
            Err(e) => {
                let _ = writeln!(out, "  copy {i}: DAMAGED: {e}");
            }
        }
    }
    Ok(chosen.map(|(sb, _)| sb))
}

/// Prints the log: header copies, and the records since the checkpoint.
fn log(path: &Path, sb: Option<&Superblock>, out: &mut String) -> Result<(), CliError> {
    let wal = wal_path(path);
    let bytes =
        std::fs::read(&wal).map_err(|e| CliError::msg(format!("{}: {e}", wal.display())))?;
    let _ = writeln!(out, "log {}: {} bytes", wal.display(), bytes.len());
    let mut best: Option<LogHeader> = None;
    for (i, off) in log_header::SLOT_OFFSETS.iter().enumerate() {
        let slot = bytes.get(*off as usize..).unwrap_or(&[]);
        let slot = &slot[..slot.len().min(log_header::SLOT_SIZE)];
        match LogHeader::decode(slot) {
            Ok(h) => {
                let belongs = sb.is_none_or(|sb| sb.db_id == h.db_id);
                let _ = writeln!(
                    out,
                    "  header copy {i}: generation {}, base LSN {}, page size {}{}",
                    h.generation,
                    h.base_lsn,
                    h.page_size,
                    if belongs {
                        ""
                    } else {
                        " (belongs to ANOTHER database)"
                    }
                );
                if belongs && best.is_none_or(|b| h.generation > b.generation) {
                    best = Some(h);
                }
            }
            Err(e) => {
                let _ = writeln!(out, "  header copy {i}: DAMAGED: {e}");
            }
        }
    }
    let (Some(sb), Some(h)) = (sb, best) else {
        let _ = writeln!(
            out,
            "  records: not scanned (no valid superblock and log header pair)"
        );
        return Ok(());
    };
    if h.base_lsn > sb.checkpoint_lsn {
        let _ = writeln!(
            out,
            "  records: not scanned: the log starts at LSN {} after the checkpoint LSN {}",
            h.base_lsn, sb.checkpoint_lsn
        );
        return Ok(());
    }
    let mut kinds: BTreeMap<&str, u64> = BTreeMap::new();
    let mut seen = BTreeSet::new();
    let mut committed = BTreeSet::new();
    let mut undecodable = None;
    let logf = RealVfs
        .open(&wal, OpenMode::ReadOnly)
        .map_err(|e| CliError::msg(format!("{}: {e}", wal.display())))?;
    let ps = sb.page_size as usize;
    let s = scan::scan(
        &*logf,
        h.base_lsn,
        sb.checkpoint_lsn,
        ps,
        &mut |lsn, run| {
            for rec in scan::records(lsn, run, ps) {
                let r = match rec {
                    Ok((_, r)) => r,
                    Err(e) => {
                        undecodable = Some(e);
                        return ControlFlow::Break(());
                    }
                };
                let k = match r {
                    Record::Range {
                        before: Some(_), ..
                    } => "range (with before-image)",
                    Record::Range { .. } => "range",
                    Record::Page { .. } => "page",
                    Record::Alloc { .. } => "alloc",
                    Record::Free { .. } => "free",
                    Record::Commit { txid, .. } => {
                        committed.insert(txid);
                        "commit"
                    }
                    Record::Root { .. } => "root",
                    Record::Type { .. } => "type",
                    Record::Intent { .. } => "intent",
                };
                *kinds.entry(k).or_default() += 1;
                if let Some(t) = r.txid() {
                    seen.insert(t);
                }
            }
            ControlFlow::Continue(())
        },
    )
    .map_err(|e| CliError::msg(format!("{}: {e}", wal.display())))?;
    if let Some(e) = undecodable {
        return Err(CliError::msg(format!(
            "{}: a record the scan accepted does not decode ({e})",
            wal.display()
        )));
    }
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
        "  since checkpoint LSN {}: {} record(s), {} bytes, ending at LSN {}{by_kind}",
        sb.checkpoint_lsn,
        s.records,
        s.end_lsn.saturating_sub(sb.checkpoint_lsn),
        s.end_lsn
    );
    let _ = writeln!(
        out,
        "  transactions: {} committed, {} uncommitted (no commit record; recovery ignores them)",
        committed.len(),
        seen.len() - seen.intersection(&committed).count()
    );
    let _ = writeln!(
        out,
        "  tail: {}",
        tail_line(&s.tail, closed_cleanly(&bytes))
    );
    Ok(())
}

fn list<T>(items: &[T], show: impl Fn(&T) -> String) -> String {
    let mut v: Vec<String> = items.iter().take(SHOWN).map(show).collect();
    if items.len() > SHOWN {
        v.push(format!("… and {} more", items.len() - SHOWN));
    }
    v.join(", ")
}

fn pages(s: &Store, out: &mut String) {
    let st = s.stats();
    let sb = s.superblock();
    let first = amber::internals::format::first_data_page(st.page_size);
    let _ = writeln!(out, "pages (page size {})", st.page_size);
    let _ = writeln!(
        out,
        "  page count: {} (pages below {first} hold the superblocks)",
        st.page_count
    );
    let free = s.free_extents();
    let _ = writeln!(
        out,
        "  free: {} page(s) in {} extent(s){}",
        st.free_pages,
        free.len(),
        if free.is_empty() {
            String::new()
        } else {
            format!(": {}", list(&free, |(p, n)| format!("{p}+{n}")))
        }
    );
    let blocks = s.blocks();
    let runs: Vec<(PageNo, u32)> = blocks.iter().copied().filter(|(_, n)| *n > 1).collect();
    let _ = writeln!(
        out,
        "  allocated: {} block(s), {} of them multi-page run(s){}",
        blocks.len(),
        runs.len(),
        if runs.is_empty() {
            String::new()
        } else {
            format!(": {}", list(&runs, |(p, n)| format!("{p}+{n}")))
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

fn catalog(s: &Store, out: &mut String) {
    let types = s.types();
    let _ = writeln!(out, "schema catalog: {} type(s)", types.len());
    for (id, desc) in &types {
        // Descriptors the object layer wrote decode; anything else (a
        // storage-level user's bytes, damage) is shown in hex.
        if let Ok(t) = amber::internals::schema::desc::StoredType::decode(desc) {
            objects::describe_type(*id, &t, out);
            continue;
        }
        const MAX: usize = 32;
        let more = if desc.len() > MAX {
            format!(" … ({} more bytes)", desc.len() - MAX)
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "  type {id}: {} byte(s): hex {}{more}",
            desc.len(),
            hex(&desc[..desc.len().min(MAX)])
        );
    }
}

fn roots(s: &Store, out: &mut String) {
    let roots = s.roots();
    let cat = objects::catalog(s);
    let shift = s.page_size().trailing_zeros();
    let _ = writeln!(out, "roots: {}", roots.len());
    for r in &roots {
        let page = r.addr >> shift;
        let off = r.addr & ((1u64 << shift) - 1);
        let name = match cat.get(&r.type_id) {
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
