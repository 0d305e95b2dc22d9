//! What freeing releases: `free` takes an object's buffers (its vectors',
//! its byte strings', and those of its vectors' elements) with it, not what
//! its pointers lead to; `free_tree` takes everything its pointers reach,
//! once each, through cycles and sharing. Checked in the committed file by
//! a census of live and freed objects per type, after reopening.

use super::{Cfg, open, opts};
use amber::inspect::Inspector;
use amber::{Db, Error, PBytes, PRef, PVec, Persistent, Smart, Tx};
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Persistent, Default)]
#[repr(C)]
pub struct Label {
    pub text: PBytes,
    pub tags: PVec<u32>,
}

#[derive(Persistent)]
#[repr(C)]
pub struct Owner {
    pub id: u64,
    pub name: PBytes,
    pub values: PVec<u64>,
    pub labels: PVec<Label>,
    pub pair: [Label; 2],
    pub friend: Option<PRef<Owner>>,
}

#[derive(Persistent)]
#[repr(C)]
pub struct TreeNode {
    pub id: u64,
    pub text: PBytes,
    pub kids: PVec<PRef<TreeNode>>,
    pub parent: Option<PRef<TreeNode>>,
    pub link: Option<Smart<TreeNode>>,
}

/// Live and freed objects per stored type name, in the committed file.
fn census(path: &Path) -> BTreeMap<String, (u64, u64)> {
    let ins = Inspector::open(path).expect("inspect");
    let mut out: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for e in ins.blocks() {
        let b = ins.block(e.start).expect("block");
        for o in &b.objects {
            let name = o.type_name.clone().unwrap_or_else(|| o.type_id.to_string());
            let c = out.entry(name).or_default();
            if o.is_free() {
                c.1 += 1;
            } else {
                c.0 += 1;
            }
        }
    }
    out
}

/// Live objects whose stored type name contains `what`.
fn live(c: &BTreeMap<String, (u64, u64)>, what: &str) -> u64 {
    c.iter()
        .filter(|(n, _)| n.contains(what))
        .map(|(_, v)| v.0)
        .sum()
}

/// Every object, in any of the file's blocks, that is live.
fn all_live(c: &BTreeMap<String, (u64, u64)>) -> u64 {
    c.values().map(|v| v.0).sum()
}

fn empty_owner(id: u64, friend: Option<PRef<Owner>>) -> Owner {
    Owner {
        id,
        name: PBytes::new(),
        values: PVec::new(),
        labels: PVec::new(),
        pair: [Label::default(), Label::default()],
        friend,
    }
}

/// A label with a text and tags, made in an object of its own and moved out
/// of it (the one way safe code puts a filled label into a vector), the
/// emptied object freed.
fn filled_label(tx: &mut Tx<'_>, text: &str) -> Label {
    let tmp = tx
        .alloc(Label {
            text: PBytes::new(),
            tags: PVec::new(),
        })
        .expect("alloc label");
    tx.set_bytes(tmp, |l| &mut l.text, text.as_bytes())
        .expect("text");
    for t in 0..5 {
        tx.push(tmp, |l| &mut l.tags, t).expect("tag");
    }
    let l = tx.get_mut(tmp);
    let out = Label {
        text: std::mem::take(&mut l.text),
        tags: std::mem::take(&mut l.tags),
    };
    tx.free(tmp).expect("free the emptied label");
    out
}

/// A database with `keep` (a root, no buffers) and `gone`, which points to
/// `keep` and owns buffers at every depth: a byte string, a vector of
/// numbers, a vector of labels each with a text and a vector, and an array
/// of two labels.
fn owners(path: &Path, b: Cfg) -> Db {
    let mut db = Db::create(path, opts(b)).expect("create");
    let mut tx = db.begin().expect("begin");
    let keep = tx.alloc(empty_owner(1, None)).expect("alloc");
    let gone = tx.alloc(empty_owner(2, Some(keep))).expect("alloc");
    tx.set_root("keep", keep).expect("root");
    tx.set_root("gone", gone).expect("root");
    tx.set_bytes(gone, |o| &mut o.name, b"a name that is going")
        .expect("name");
    for i in 0..100 {
        tx.push(gone, |o| &mut o.values, i).expect("push");
    }
    for i in 0..3 {
        let l = filled_label(&mut tx, &format!("label {i}"));
        tx.push(gone, |o| &mut o.labels, l).expect("label");
    }
    for i in 0..2 {
        let l = filled_label(&mut tx, &format!("pair {i}"));
        tx.get_mut(gone).pair[i] = l;
    }
    tx.commit().expect("commit");
    db
}

/// Live objects in the committed file: `keep`, `gone`, and gone's 13
/// buffers (name, values, the labels' buffer, 3 + 2 labels' texts and tags).
const OWNERS_LIVE: u64 = 2 + 1 + 1 + 1 + 5 * 2;

/// `free` releases the buffers an object owns, nested ones included, and
/// leaves the object its pointer leads to; an abort takes the free back.
pub fn releases_buffers(b: Cfg) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("free.amber");
    owners(&path, b).close().expect("close");
    let before = census(&path);
    assert_eq!(all_live(&before), OWNERS_LIVE, "{before:?}");

    let mut db = open(&path, opts(b));
    let gone: PRef<Owner> = db.root("gone").expect("root").expect("gone");
    let mut tx = db.begin().expect("begin");
    tx.free(gone).expect("free");
    tx.abort().expect("abort");
    assert_eq!(db.bytes(&db.get(gone).name), b"a name that is going");
    assert_eq!(db.slice(&db.get(gone).values).len(), 100);
    let labels = db.slice(&db.get(gone).labels);
    assert_eq!(db.bytes(&labels[2].text), b"label 2");
    assert_eq!(db.slice(&labels[2].tags), &[0, 1, 2, 3, 4]);
    db.close().expect("close");
    assert_eq!(census(&path), before, "an aborted free changed the file");

    let mut db = open(&path, opts(b));
    let gone: PRef<Owner> = db.root("gone").expect("root").expect("gone");
    let keep: PRef<Owner> = db.root("keep").expect("root").expect("keep");
    let mut tx = db.begin().expect("begin");
    tx.remove_root("gone").expect("remove root");
    tx.free(gone).expect("free");
    assert!(matches!(tx.free(gone), Err(Error::Dangling { .. })));
    tx.commit().expect("commit");
    assert!(matches!(db.try_get(gone), Err(Error::Dangling { .. })));
    assert_eq!(db.get(keep).id, 1);
    db.close().expect("close");
    let after = census(&path);
    assert_eq!(all_live(&after), 1, "only `keep` stays live: {after:?}");
    assert_eq!(live(&after, "Owner"), 1);
}

/// A tree of `depth` levels under `parent`, `fan` children each, every
/// node with a text, a parent pointer (a cycle) and a smart link to its
/// first sibling (sharing). Returns the nodes made.
fn subtree(
    tx: &mut Tx<'_>,
    parent: Option<PRef<TreeNode>>,
    depth: u32,
    fan: u64,
    next: &mut u64,
) -> PRef<TreeNode> {
    *next += 1;
    let id = *next;
    let n = tx
        .alloc(TreeNode {
            id,
            text: PBytes::new(),
            kids: PVec::new(),
            parent,
            link: None,
        })
        .expect("alloc node");
    tx.set_bytes(n, |n| &mut n.text, format!("node {id}").as_bytes())
        .expect("text");
    if depth > 0 {
        let mut first = None;
        for _ in 0..fan {
            let k = subtree(tx, Some(n), depth - 1, fan, next);
            let first = *first.get_or_insert(k);
            let s = tx.to_smart(first).expect("smart");
            tx.get_mut(k).link = Some(s);
            tx.push(n, |n| &mut n.kids, k).expect("push kid");
        }
    }
    n
}

/// `free_tree` frees every object its pointers reach, each once, with its
/// buffers; an object outside the tree stays; a child freed before is
/// skipped.
pub fn frees_a_tree(b: Cfg) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("tree.amber");
    let mut db = Db::create(&path, opts(b)).expect("create");
    let mut tx = db.begin().expect("begin");
    let mut next = 0;
    let root = subtree(&mut tx, None, 3, 3, &mut next);
    let other = subtree(&mut tx, None, 0, 0, &mut next);
    tx.set_root("tree", root).expect("root");
    tx.set_root("other", other).expect("root");
    tx.commit().expect("commit");
    db.close().expect("close");
    // 1 + 3 + 9 + 27 nodes in the tree, each with a text; inner ones with
    // a vector of kids.
    let nodes = 40;
    assert_eq!(
        all_live(&census(&path)),
        nodes * 2 + 13 + 2,
        "tree and other, with their buffers"
    );

    let mut db = open(&path, opts(b));
    let root: PRef<TreeNode> = db.root("tree").expect("root").expect("tree");
    let other: PRef<TreeNode> = db.root("other").expect("root").expect("other");
    let first_kid = db.slice(&db.get(root).kids)[0];
    let mut tx = db.begin().expect("begin");
    tx.remove_root("tree").expect("remove root");
    let inner = tx.slice(&tx.get(first_kid).kids)[1];
    let leaf = tx.slice(&tx.get(inner).kids)[1];
    tx.free(leaf).expect("free a leaf first");
    assert_eq!(tx.free_tree(root).expect("free_tree"), nodes - 1);
    assert!(matches!(tx.free_tree(root), Err(Error::Dangling { .. })));
    tx.commit().expect("commit");
    assert_eq!(
        db.bytes(&db.get(other).text),
        format!("node {next}").as_bytes()
    );
    db.close().expect("close");
    let after = census(&path);
    assert_eq!(all_live(&after), 2, "only `other` and its text: {after:?}");
}

/// A catalog whose index owns its nodes.
#[derive(Persistent)]
#[repr(C)]
pub struct Catalog {
    pub by_name: amber::PIndex<TreeNode, String>,
}

/// `free` releases the nodes of the object's indexes, not the objects its
/// values lead to; `free_tree` releases those too.
pub fn releases_index_nodes(b: Cfg) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("index.amber");
    let mut db = Db::create(&path, opts(b)).expect("create");
    let mut tx = db.begin().expect("begin");
    let mut next = 0;
    let target = subtree(&mut tx, None, 0, 0, &mut next);
    let cat = tx
        .alloc(Catalog {
            by_name: amber::PIndex::new(),
        })
        .expect("alloc");
    for i in 0..2000 {
        tx.index_insert(
            cat,
            |c| &mut c.by_name,
            format!("entry number {i:06}").as_str(),
            target,
        )
        .expect("insert");
    }
    tx.set_root("catalog", cat).expect("root");
    tx.set_root("target", target).expect("root");
    tx.commit().expect("commit");
    db.close().expect("close");
    let before = all_live(&census(&path));
    assert!(
        before > 2 + 2 + 4,
        "the index has several nodes: {before} objects"
    );

    let mut db = open(&path, opts(b));
    let cat: PRef<Catalog> = db.root("catalog").expect("root").expect("catalog");
    let target: PRef<TreeNode> = db.root("target").expect("root").expect("target");
    let mut tx = db.begin().expect("begin");
    tx.remove_root("catalog").expect("remove root");
    tx.free(cat).expect("free");
    tx.commit().expect("commit");
    assert_eq!(db.get(target).id, 1, "the values' objects stay");
    db.close().expect("close");
    let after = census(&path);
    assert_eq!(
        all_live(&after),
        2,
        "only the target and its text: {after:?}"
    );

    // `free_tree` follows an index's values as it follows pointers: each
    // value's object goes, with its text, once (two keys lead to one).
    let mut db = open(&path, opts(b));
    let mut tx = db.begin().expect("begin");
    let cat = tx
        .alloc(Catalog {
            by_name: amber::PIndex::new(),
        })
        .expect("alloc");
    for i in 0..300 {
        let v = subtree(&mut tx, None, 0, 0, &mut next);
        for key in [format!("a {i:04}"), format!("b {i:04}")] {
            tx.index_insert(cat, |c| &mut c.by_name, key.as_str(), v)
                .expect("insert");
        }
    }
    tx.set_root("catalog", cat).expect("root");
    tx.commit().expect("commit");
    let mut tx = db.begin().expect("begin");
    tx.remove_root("catalog").expect("remove root");
    assert_eq!(tx.free_tree(cat).expect("free_tree"), 301);
    tx.commit().expect("commit");
    db.close().expect("close");
    let after = census(&path);
    assert_eq!(all_live(&after), 2, "the values went with it: {after:?}");
}

/// A vector that drops elements (`truncate`, `retain`, `clear`) frees
/// what they own, as `free` does an object's; an abort takes it back.
pub fn dropped_elements_release_their_buffers(b: Cfg) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("drop.amber");
    owners(&path, b).close().expect("close");
    let before = all_live(&census(&path));
    let mut db = open(&path, opts(b));
    let gone: PRef<Owner> = db.root("gone").expect("root").expect("gone");
    let mut tx = db.begin().expect("begin");
    tx.retain(gone, |o| &mut o.labels, |l| l.tags.len() != 5)
        .expect("retain");
    tx.abort().expect("abort");
    assert_eq!(
        db.slice(&db.get(gone).labels).len(),
        3,
        "the abort kept them"
    );
    let mut tx = db.begin().expect("begin");
    // Label 2 goes by truncate, labels 0 and 1 by retain: each with its
    // text and its tags.
    tx.truncate(gone, |o| &mut o.labels, 2).expect("truncate");
    assert_eq!(tx.slice(&tx.get(gone).labels).len(), 2);
    assert_eq!(
        tx.bytes(&tx.slice(&tx.get(gone).labels)[1].text),
        b"label 1"
    );
    tx.retain(gone, |o| &mut o.labels, |_| false)
        .expect("retain");
    assert!(tx.slice(&tx.get(gone).labels).is_empty());
    tx.clear(gone, |o| &mut o.values)
        .expect("clear numbers: nothing owned");
    tx.commit().expect("commit");
    db.close().expect("close");
    let after = all_live(&census(&path));
    assert_eq!(before - after, 3 * 2, "three labels' texts and tags freed");
}
