//! An outline editor's store: notes in a tree (children and parent links),
//! each with a title and a text, found by title through an ordered index;
//! edits, a rename, a deletion of a whole branch, an aborted change, a
//! reopen, a read-only handle beside the writer, and a collection that
//! gives the deleted notes' space back.
//!
//! `cargo run -p amber --example outline [PATH]` (default: a file in the
//! temporary directory, removed at the end).

use amber::{Db, Options, PIndex, PRef, PString, PVec, Persistent, Result, View};
use std::ops::Bound;
use std::path::PathBuf;

#[derive(Persistent)]
#[repr(C)]
struct Outline {
    /// Every note by title, in title order.
    by_title: PIndex<Note, String>,
    /// The top-level notes, in order.
    top: PVec<PRef<Note>>,
    /// Notes ever made (ids are never reused).
    made: u64,
}

#[derive(Persistent)]
#[repr(C)]
struct Note {
    id: u64,
    title: PString,
    text: PString,
    parent: Option<PRef<Note>>,
    children: PVec<PRef<Note>>,
}

/// Adds a note under `parent` (or at the top), indexed by its title.
fn add(
    tx: &mut amber::Tx<'_>,
    outline: PRef<Outline>,
    parent: Option<PRef<Note>>,
    title: &str,
    text: &str,
) -> Result<PRef<Note>> {
    tx.get_mut(outline).made += 1;
    let id = tx.get(outline).made;
    let note = tx.alloc_with(|tx| {
        Ok(Note {
            id,
            title: tx.new_string(title)?,
            text: tx.new_string(text)?,
            parent,
            children: PVec::new(),
        })
    })?;
    match parent {
        Some(p) => tx.push(p, |n| &mut n.children, note)?,
        None => tx.push(outline, |o| &mut o.top, note)?,
    }
    tx.index_insert(outline, |o| &mut o.by_title, title, note)?;
    Ok(note)
}

/// The outline as indented lines: read-only code, written once for a
/// database and a transaction alike.
fn render(r: &impl View, outline: PRef<Outline>) -> Vec<String> {
    fn walk(r: &impl View, notes: &[PRef<Note>], depth: usize, out: &mut Vec<String>) {
        for &n in notes {
            let note = r.get(n);
            out.push(format!("{}{}", "  ".repeat(depth), r.str(&note.title)));
            walk(r, r.slice(&note.children), depth + 1, out);
        }
    }
    let mut out = Vec::new();
    walk(r, r.slice(&r.get(outline).top), 0, &mut out);
    out
}

fn main() -> Result<()> {
    let (path, temporary) = match std::env::args().nth(1) {
        Some(p) => (PathBuf::from(p), false),
        None => (
            std::env::temp_dir().join(format!("outline-{}.amber", std::process::id())),
            true,
        ),
    };
    let mut db = Db::open_or_create(&path, Options::default())?;
    let outline = match db.root::<Outline>("outline")? {
        Some(o) => o,
        None => {
            let mut tx = db.begin()?;
            let o = tx.alloc(Outline {
                by_title: PIndex::new(),
                top: PVec::new(),
                made: 0,
            })?;
            tx.set_root("outline", o)?;
            tx.commit()?;
            o
        }
    };

    // Some notes, committed at once.
    let mut tx = db.begin()?;
    let work = add(&mut tx, outline, None, "work", "")?;
    let amber = add(
        &mut tx,
        outline,
        Some(work),
        "amber",
        "a persistent object store",
    )?;
    add(
        &mut tx,
        outline,
        Some(amber),
        "readers",
        "beside the writer",
    )?;
    add(
        &mut tx,
        outline,
        Some(amber),
        "collection",
        "gives space back",
    )?;
    let home = add(&mut tx, outline, None, "home", "")?;
    add(&mut tx, outline, Some(home), "groceries", "bread, milk")?;
    tx.commit()?;
    println!("{}", render(&db, outline).join("\n"));

    // Edit a text in place; rename a note (the index follows).
    let mut tx = db.begin()?;
    tx.set_str(amber, |n| &mut n.text, "a persistent object store for Rust")?;
    tx.index_remove(outline, |o| &mut o.by_title, "groceries")?;
    let groceries = tx.slice(&tx.get(home).children)[0];
    tx.set_str(groceries, |n| &mut n.title, "shopping")?;
    tx.index_insert(outline, |o| &mut o.by_title, "shopping", groceries)?;
    tx.commit()?;

    // A change thought better of: nothing of it stays.
    let mut tx = db.begin()?;
    add(&mut tx, outline, None, "draft", "not kept")?;
    tx.abort()?;
    assert!(db.index_get(&db.get(outline).by_title, "draft")?.is_none());

    // Titles from "a" to before "s", in order, by the index.
    let titles: Vec<String> = db
        .index_range(
            &db.get(outline).by_title,
            (Bound::Included("a"), Bound::Excluded("s")),
        )?
        .map(|e| e.map(|(title, _)| title))
        .collect::<Result<_>>()?;
    println!("titles a..s: {titles:?}");
    assert_eq!(titles, ["amber", "collection", "home", "readers"]);

    // A reader (it could be another process) sees a snapshot until it
    // refreshes. Pointers belong to the handle that made them: the reader
    // finds the outline by its root.
    let mut reader = Db::open_read_only(&path, Options::default())?;
    let seen: PRef<Outline> = reader.root("outline")?.expect("the outline");
    let mut tx = db.begin()?;
    add(&mut tx, outline, Some(home), "garden", "")?;
    tx.commit()?;
    let before = render(&reader, seen).len();
    reader.refresh()?;
    assert_eq!(render(&reader, seen).len(), before + 1);
    reader.close()?;

    // Delete the "work" branch: every note under it, with its strings and
    // vectors, and its index entries.
    let mut tx = db.begin()?;
    let mut branch = vec![work];
    let mut i = 0;
    while i < branch.len() {
        let kids = tx.slice(&tx.get(branch[i]).children).to_vec();
        branch.extend(kids);
        i += 1;
    }
    for &n in &branch {
        let title = tx.str(&tx.get(n).title).to_string();
        tx.index_remove(outline, |o| &mut o.by_title, title.as_str())?;
    }
    tx.retain(outline, |o| &mut o.top, |&n| n != work)?;
    let freed = tx.free_tree(work)?;
    tx.commit()?;
    println!("deleted {freed} notes");

    // Give the space back, then reopen: the outline is as it was left.
    let (db, stats) = db.collect()?;
    println!(
        "collected: {} objects kept, {} reclaimed; page file {} -> {} bytes",
        stats.objects_live,
        stats.objects_reclaimed,
        stats.file_bytes_before,
        stats.file_bytes_after
    );
    db.close()?;
    let db = Db::open(&path, Options::default())?;
    let outline: PRef<Outline> = db.root("outline")?.expect("the outline");
    let lines = render(&db, outline);
    println!("{}", lines.join("\n"));
    assert_eq!(lines, ["home", "  shopping", "  garden"]);
    db.close()?;
    if temporary {
        for suffix in ["", "-wal", "-readers"] {
            let mut p = path.clone().into_os_string();
            p.push(suffix);
            let _ = std::fs::remove_file(p);
        }
    }
    Ok(())
}
