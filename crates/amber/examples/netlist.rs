//! A netlist: cells with pins, nets connecting pins, a cell library looked
//! up by name, and cells grouped by kind in a multi-valued index. Builds a
//! chain of gates, walks the graph from the inputs (plain pointer loads
//! once its pages are resident), rewires a net, deletes a cell, survives a
//! reopen, and checks every pointer with deep verification.
//!
//! `cargo run -p amber --example netlist [CELLS]` (default 20,000).

use amber::{Db, Options, PIndex, PMultiIndex, PRef, PString, PVec, Persistent, Result, View};
use std::collections::HashSet;
use std::time::Instant;

#[derive(Persistent)]
#[repr(C)]
struct Design {
    /// Cells by instance name.
    cells: PIndex<Cell, String>,
    /// Cells by kind ("nand2", "inv", …): several per key.
    by_kind: PMultiIndex<Cell, String>,
    inputs: PVec<PRef<Net>>,
}

#[derive(Persistent)]
#[repr(C)]
struct Cell {
    name: PString,
    kind: PString,
    /// Nets on the cell's input pins, then its output pin's.
    ins: PVec<PRef<Net>>,
    out: Option<PRef<Net>>,
}

#[derive(Persistent)]
#[repr(C)]
struct Net {
    id: u64,
    driver: Option<PRef<Cell>>,
    /// The cells this net feeds.
    loads: PVec<PRef<Cell>>,
}

const KINDS: [&str; 3] = ["nand2", "nor2", "inv"];

/// Cells reachable from the design's inputs through nets and their loads.
fn fanout(r: &impl View, design: PRef<Design>) -> usize {
    let mut seen = HashSet::new();
    let mut work: Vec<PRef<Net>> = r.slice(&r.get(design).inputs).to_vec();
    while let Some(net) = work.pop() {
        for &cell in r.slice(&r.get(net).loads) {
            if seen.insert(cell) {
                work.extend(r.get(cell).out);
            }
        }
    }
    seen.len()
}

fn main() -> Result<()> {
    let cells: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000);
    let path = std::env::temp_dir().join(format!("netlist-{}.amber", std::process::id()));
    let mut db = Db::create(&path, Options::default())?;

    // A chain of gates: every cell reads the previous cell's output net and
    // one of the two primary inputs.
    let t = Instant::now();
    let mut tx = db.begin()?;
    let design = tx.alloc(Design {
        cells: PIndex::new(),
        by_kind: PMultiIndex::new(),
        inputs: PVec::new(),
    })?;
    let a = tx.alloc(Net {
        id: 0,
        driver: None,
        loads: PVec::new(),
    })?;
    let b = tx.alloc(Net {
        id: 1,
        driver: None,
        loads: PVec::new(),
    })?;
    tx.extend(design, |d| &mut d.inputs, [a, b])?;
    let mut prev = a;
    for i in 0..cells {
        let kind = KINDS[(i % 3) as usize];
        let name = format!("u{i}");
        let cell = tx.alloc_with(|tx| {
            Ok(Cell {
                name: tx.new_string(&name)?,
                kind: tx.new_string(kind)?,
                ins: PVec::new(),
                out: None,
            })
        })?;
        let out = tx.alloc_near(
            Net {
                id: i + 2,
                driver: Some(cell),
                loads: PVec::new(),
            },
            cell,
        )?;
        let side = if i % 2 == 0 { a } else { b };
        tx.extend(cell, |c| &mut c.ins, [prev, side])?;
        tx.get_mut(cell).out = Some(out);
        tx.push(prev, |n| &mut n.loads, cell)?;
        tx.push(side, |n| &mut n.loads, cell)?;
        tx.index_insert(design, |d| &mut d.cells, name.as_str(), cell)?;
        tx.multi_insert(design, |d| &mut d.by_kind, kind, cell)?;
        prev = out;
    }
    tx.set_root("design", design)?;
    tx.commit()?;
    println!(
        "built {cells} cells in {:.1} ms",
        t.elapsed().as_secs_f64() * 1e3
    );

    let t = Instant::now();
    let reached = fanout(&db, design);
    println!(
        "fanout from the inputs: {reached} cells in {:.2} ms",
        t.elapsed().as_secs_f64() * 1e3
    );
    assert_eq!(reached as u64, cells);
    let invs = db.multi_get(&db.get(design).by_kind, "inv")?.count();
    assert_eq!(invs as u64, cells / 3);

    // Rewire: the last cell's second input moves from its primary input
    // to the first cell's output.
    let last = db.index_get(&db.get(design).cells, format!("u{}", cells - 1).as_str())?;
    let first = db.index_get(&db.get(design).cells, "u0")?;
    let (Some(last), Some(first)) = (last, first) else {
        panic!("cells by name")
    };
    let mut tx = db.begin()?;
    let old = tx.slice(&tx.get(last).ins)[1];
    let new = tx.get(first).out.expect("an output");
    tx.slice_mut(last, |c| &mut c.ins)[1] = new;
    tx.retain(old, |n| &mut n.loads, |&c| c != last)?;
    tx.push(new, |n| &mut n.loads, last)?;
    tx.commit()?;

    // Delete a cell that drives nothing (the last one): unhook it from its
    // nets and indexes; `free` takes its strings and vectors with it.
    let mut tx = db.begin()?;
    for net in tx.slice(&tx.get(last).ins).to_vec() {
        tx.retain(net, |n| &mut n.loads, |&c| c != last)?;
    }
    let out = tx.get(last).out.expect("an output");
    let name = tx.str(&tx.get(last).name).to_string();
    let kind = tx.str(&tx.get(last).kind).to_string();
    tx.index_remove(design, |d| &mut d.cells, name.as_str())?;
    tx.multi_remove(design, |d| &mut d.by_kind, kind.as_str(), last)?;
    tx.free(out)?;
    tx.free(last)?;
    tx.commit()?;
    assert_eq!(fanout(&db, design) as u64, cells - 1);
    db.close()?;

    // Reopened cold: the same graph, every pointer checked.
    let db = Db::open(&path, Options::default())?;
    let design: PRef<Design> = db.root("design")?.expect("the design");
    assert_eq!(fanout(&db, design) as u64, cells - 1);
    let report = db.verify_deep()?;
    assert!(report.is_clean(), "{:?}", report.findings);
    println!("reopened: {} cells, deep verification clean", cells - 1);
    db.close()?;
    for suffix in ["", "-wal", "-readers"] {
        let mut p = path.clone().into_os_string();
        p.push(suffix);
        let _ = std::fs::remove_file(p);
    }
    Ok(())
}
