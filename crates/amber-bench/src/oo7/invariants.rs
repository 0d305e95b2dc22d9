//! The generator's invariants on the tiny configuration, and the facts of
//! the original Wisconsin generator on the small one.

use std::collections::HashMap;

use super::generate::{DATE_MAX, DATE_MIN, Oo7Db, generate, title};
use super::model::Model;
use super::ops::{OO7_PROTOCOL, Op, Traversal, inputs};
use super::params::{Params, Size};

fn tiny(modules: u32) -> Oo7Db {
    let params = Params {
        modules,
        ..Size::Tiny.params(7)
    };
    generate(params).expect("tiny generates")
}

#[test]
fn counts_per_level_on_tiny() {
    for modules in [1, 3] {
        let db = tiny(modules);
        let p = db.params;
        assert_eq!(db.modules.len() as u32, modules);
        assert_eq!(p.complex_per_module(), 4);
        assert_eq!(p.base_per_module(), 9);
        assert_eq!(db.complex.len() as u32, 4 * modules);
        assert_eq!(db.base.len() as u32, 9 * modules);
        assert_eq!(db.composites.len() as u32, 20 * modules);
        assert_eq!(db.atomics.len() as u32, 100 * modules);
        assert_eq!(db.connections.len() as u32, 300 * modules);
        for m in &db.modules {
            let mut level = vec![m.design_root];
            for l in (2..=p.assm_levels).rev() {
                let mut next = Vec::new();
                for &id in &level {
                    let ca = &db.complex[(id - 1) as usize];
                    assert_eq!((ca.id, ca.level, ca.module), (id, l, m.id));
                    assert_eq!(ca.subs.len(), 3);
                    for &s in &ca.subs {
                        if l > 2 {
                            assert_eq!(db.complex[(s - 1) as usize].super_assembly, Some(id));
                        } else {
                            let b = &db.base[(s - 1) as usize];
                            assert_eq!((b.id, b.super_assembly, b.module), (s, id, m.id));
                        }
                    }
                    next.extend(&ca.subs);
                }
                level = next;
            }
            assert_eq!(level.len(), 9, "base assemblies under module {}", m.id);
        }
        assert_eq!(db.complex[0].super_assembly, None);
    }
}

#[test]
fn small_matches_the_wisconsin_generator() {
    let db = generate(Size::Small.params(1993)).expect("small generates");
    assert_eq!(db.complex.len(), 364);
    assert_eq!(db.base.len(), 729);
    assert_eq!(db.composites.len(), 500);
    assert_eq!(db.atomics.len(), 10_000);
    assert_eq!(db.connections.len(), 30_000);
    let mut m = Model::new(&db);
    assert_eq!(m.by_title.len(), 500);
    assert_eq!(m.traverse(1, Traversal::T1).expect("T1").count, 43_740);
    assert_eq!(m.traverse(1, Traversal::T6).expect("T6").count, 2_187);
    assert_eq!(m.traverse(1, Traversal::T2c).expect("T2c").count, 174_960);
    let big = Size::QuickstoreBig.params(1);
    assert_eq!(
        (big.complex_per_module(), big.base_per_module()),
        (1_093, 2_187)
    );
    assert_eq!(big.atomics(), 200_000);
}

#[test]
fn dates_kinds_and_values_are_in_range() {
    let db = tiny(2);
    for c in &db.composites {
        let range = if c.id % 10 == 0 {
            2_000..=2_999
        } else {
            0..=999
        };
        assert!(range.contains(&c.build_date), "composite part {}", c.id);
    }
    let dates = DATE_MIN..=DATE_MAX;
    assert!(db.atomics.iter().all(|a| dates.contains(&a.build_date)));
    assert!(db.base.iter().all(|b| dates.contains(&b.build_date)));
    assert!(db.complex.iter().all(|c| dates.contains(&c.build_date)));
    assert!(db.modules.iter().all(|m| dates.contains(&m.build_date)));
    let total = db.composites.len() as u32;
    for a in &db.atomics {
        assert!((0..=99_999).contains(&a.x) && (0..=99_999).contains(&a.y));
        assert!((1..=total).contains(&a.doc_id));
        assert!(a.kind.starts_with(b"type00"));
    }
    assert!(
        db.connections
            .iter()
            .all(|c| (0..=99_999).contains(&c.length))
    );
    let young = db
        .composites
        .iter()
        .filter(|c| c.build_date >= 2_000)
        .count();
    assert_eq!(young, db.composites.len() / 10);
}

#[test]
fn graphs_are_rings_with_consecutive_ids_reachable_from_the_root() {
    let db = tiny(2);
    let n = db.params.atomic_per_comp;
    for c in &db.composites {
        assert_eq!(c.first_atomic, (c.id - 1) * n + 1);
        let parts = db.parts_of(c);
        for (i, a) in parts.iter().enumerate() {
            assert_eq!((a.id, a.part_of), (c.first_atomic + i as u32, c.id));
            let out = db.outgoing(a.id);
            assert_eq!(out.len(), 3);
            assert_eq!(out[0].to, c.first_atomic + (i as u32 + 1) % n, "the ring");
            for conn in out {
                assert_eq!(conn.from, a.id);
                assert!((c.first_atomic..c.first_atomic + n).contains(&conn.to));
            }
        }
        // Every atomic part is reachable from the root.
        let mut seen = vec![false; n as usize];
        let mut stack = vec![c.first_atomic];
        while let Some(id) = stack.pop() {
            let i = (id - c.first_atomic) as usize;
            if !std::mem::replace(&mut seen[i], true) {
                stack.extend(db.outgoing(id).iter().map(|k| k.to));
            }
        }
        assert!(seen.iter().all(|&s| s), "composite part {}", c.id);
    }
}

#[test]
fn bags_and_back_links_agree() {
    let db = tiny(3);
    let per = db.params.comp_per_module;
    let mut priv_links: HashMap<(u32, u32), i32> = HashMap::new();
    let mut shar_links: HashMap<(u32, u32), i32> = HashMap::new();
    for b in &db.base {
        assert_eq!(b.components_priv.len(), 3);
        assert_eq!(b.components_shar.len(), 3);
        for &c in &b.components_priv {
            assert_eq!(
                (c - 1) / per + 1,
                b.module,
                "a private component of another module"
            );
            *priv_links.entry((b.id, c)).or_default() += 1;
        }
        for &c in &b.components_shar {
            *shar_links.entry((b.id, c)).or_default() += 1;
        }
    }
    for c in &db.composites {
        for &b in &c.used_in_priv {
            *priv_links.entry((b, c.id)).or_default() -= 1;
        }
        for &b in &c.used_in_shar {
            *shar_links.entry((b, c.id)).or_default() -= 1;
        }
    }
    assert!(priv_links.values().all(|&n| n == 0));
    assert!(shar_links.values().all(|&n| n == 0));
    // Shared components come from other modules too.
    assert!(db.base.iter().any(|b| {
        b.components_shar
            .iter()
            .any(|&c| (c - 1) / per + 1 != b.module)
    }));
}

#[test]
fn indexes_hold_every_object() {
    let db = tiny(2);
    let m = Model::new(&db);
    let indexed: usize = m.by_date.values().map(Vec::len).sum();
    assert_eq!(indexed, db.atomics.len());
    for (date, ids) in &m.by_date {
        for &id in ids {
            assert_eq!(db.atomics[(id - 1) as usize].build_date, *date);
        }
    }
    assert_eq!(m.by_title.len(), db.composites.len());
    for c in &db.composites {
        assert_eq!(m.by_title.get(&title(c.id)), Some(&c.id));
    }
    assert_eq!(title(7), "Composite Part 00000007");
    let c = m.composites[6].as_ref().expect("composite part 7");
    assert!(
        c.document
            .text
            .starts_with("I am the documentation for composite part #00000007.\n")
    );
    assert_eq!(c.document.text.len(), 199);
    assert_eq!(m.modules[0].1.len(), 999);
    assert!(
        m.modules[0]
            .1
            .starts_with("I am the manual for module #00000001.\n")
    );
}

#[test]
fn generation_is_deterministic() {
    assert_eq!(tiny(2), tiny(2));
    let other = generate(Size::Tiny.params(8)).expect("tiny generates");
    assert_ne!(tiny(1).atomics, other.atomics);
}

#[test]
fn insert_then_delete_restores_every_answer() {
    let db = tiny(2);
    let mut m = Model::new(&db);
    let answers = |m: &Model| {
        (
            m.scan(),
            m.q5().expect("Q5"),
            m.q6().expect("Q6"),
            m.date_range(1000, 1999).expect("range"),
        )
    };
    let before = answers(&m);
    let t1 = m.traverse(1, Traversal::T1).expect("T1");
    let ins = inputs(&db.params, Op::Delete, OO7_PROTOCOL);
    for input in &ins {
        input.setup(&mut m).expect("insert");
        assert!(m.scan().count > before.0.count);
        input.run(&mut m).expect("delete");
        assert_eq!(answers(&m), before);
        assert_eq!(m.traverse(1, Traversal::T1).expect("T1"), t1);
    }
}

#[test]
fn updates_toggle_and_increment() {
    let db = tiny(1);
    let mut m = Model::new(&db);
    let q = m.date_range(1000, 1999).expect("range");
    let t3 = m.traverse(1, Traversal::T3b).expect("T3b");
    assert_eq!(t3.count, db.params.t1_visits());
    assert_eq!(m.date_range(1000, 1999).expect("range").count, q.count);
    assert_ne!(m.date_range(1000, 1999).expect("range"), q);
    let t4 = m.documents(1, false).expect("T4");
    m.documents(1, true).expect("T5");
    assert_ne!(m.documents(1, false).expect("T4"), t4);
    let scan = m.scan();
    m.traverse(1, Traversal::T2a).expect("T2a");
    assert_ne!(m.scan(), scan);
}
